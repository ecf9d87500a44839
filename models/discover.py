"""Find chat models (GGUF files) that other local-LLM apps already keep on this computer.

Most people who try a local assistant have a better model than the bundled 135M one already on
disk: LM Studio, Ollama, the Hugging Face cache, llama.cpp's own cache, GPT4All and Jan keep GGUF
files in known folders. `find_models()` lists them so Settings ▸ Model and `mnemo models` can offer
them by name instead of asking for a path. Only file headers are read (a few KB each): nothing is
loaded, copied or downloaded.

Ollama keeps its weights as content-addressed blobs without a `.gguf` name; its manifests say which
blob is a model's weights, and the blob is a plain GGUF that llama.cpp loads as it is.
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from models.resolve import GGUF_MAGIC


@dataclass(frozen=True)
class FoundModel:
    path: str  # what to load (for a split model: its first part)
    name: str  # what to show: the file name without ".gguf", or Ollama's "name:tag"
    source: str  # the app whose folder holds it ("LM Studio", "Ollama", …)
    size_bytes: int  # on disk, all parts of a split model together
    architecture: str | None  # GGUF general.architecture ("llama", "qwen2", …)
    context_length: int | None  # the context the model was trained for, when the file says

    def label(self) -> str:
        """One line for a list: name, where it was found, size."""
        return f"{self.name} ({self.source}, {format_size(self.size_bytes)})"


def format_size(n: int) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


# GGUF files that are not chat models: vision projectors, adapters, sentence embedders and rerankers
_NOT_CHAT_TYPES = {"mmproj", "adapter", "clip-vision"}
_NOT_CHAT_ARCHS = {
    "bert",
    "nomic-bert",
    "nomic-bert-moe",
    "jina-bert-v2",
    "jina-bert-v3",
    "t5encoder",
    "clip",
    "modern-bert",
    "neo-bert",
    "xlm-roberta",
}
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_HEADER_BYTES = 256 * 1024
# GGUF value types with a fixed size (8 is a string, 9 an array)
_SCALARS = {
    t: struct.Struct(fmt)
    for t, fmt in {
        0: "<B",
        1: "<b",
        2: "<H",
        3: "<h",
        4: "<I",
        5: "<i",
        6: "<f",
        7: "<?",
        10: "<Q",
        11: "<q",
        12: "<d",
    }.items()
}


def read_gguf_header(path: str | Path) -> dict | None:
    """The `general.*` metadata and the architecture's `context_length` from a GGUF file's header,
    or None when the file is not a GGUF (or cannot be read). Reading stops at the tokenizer's keys,
    which come after these and hold the vocabulary (megabytes)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_HEADER_BYTES)
    except OSError:
        return None
    if len(data) < 24 or data[:4] != GGUF_MAGIC:
        return None
    _, _version, _n_tensors, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    meta: dict = {}
    off = 24
    try:
        for _ in range(min(n_kv, 4096)):
            key, off = _read_str(data, off)
            if key.startswith("tokenizer."):
                break
            (vtype,), off = struct.unpack_from("<I", data, off), off + 4
            value, off = _read_value(data, off, vtype)
            if value is not None and (
                key.startswith("general.") or key.endswith(".context_length") or key.endswith(".pooling_type")
            ):
                meta[key] = value
    except (struct.error, UnicodeDecodeError, ValueError):
        pass  # a header longer than we read, or damaged: keep what was read
    return meta


def _read_str(data: bytes, off: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<Q", data, off)
    if off + 8 + n > len(data):
        raise ValueError("string past the end of what was read")
    return data[off + 8 : off + 8 + n].decode("utf-8"), off + 8 + n


def _read_value(data: bytes, off: int, vtype: int):
    """(value, next offset); arrays are skipped (value None)."""
    if vtype in _SCALARS:
        (v,) = _SCALARS[vtype].unpack_from(data, off)
        return v, off + _SCALARS[vtype].size
    if vtype == 8:
        return _read_str(data, off)
    if vtype == 9:
        (itype, n) = struct.unpack_from("<IQ", data, off)
        off += 12
        if itype in _SCALARS:
            return None, off + n * _SCALARS[itype].size
        if itype == 8:
            for _ in range(n):
                _, off = _read_str(data, off)
            return None, off
        raise ValueError(f"array of type {itype}")
    raise ValueError(f"value type {vtype}")


def is_chat_model(meta: Mapping) -> bool:
    arch = meta.get("general.architecture")
    if meta.get("general.type") in _NOT_CHAT_TYPES or arch in _NOT_CHAT_ARCHS:
        return False
    return not any(k.endswith(".pooling_type") for k in meta)  # sentence embedders pool their output


def model_folders(home: Path | None = None, env: Mapping[str, str] | None = None) -> list[tuple[str, Path]]:
    """(app, folder) pairs where local-LLM apps keep GGUF files, for this platform and these settings."""
    home = Path.home() if home is None else home
    env = os.environ if env is None else env
    hf_home = Path(env["HF_HOME"]) if env.get("HF_HOME") else home / ".cache" / "huggingface"
    hf_hub = Path(env["HF_HUB_CACHE"]) if env.get("HF_HUB_CACHE") else hf_home / "hub"
    llama_cache = (
        Path(env["LLAMA_CACHE"])
        if env.get("LLAMA_CACHE")
        else _under_home(platformdirs.user_cache_dir("llama.cpp", False), home)
    )
    folders = [
        ("LM Studio", home / ".lmstudio" / "models"),
        ("LM Studio", home / ".cache" / "lm-studio" / "models"),
        ("Hugging Face", hf_hub),
        ("llama.cpp", llama_cache),
        # GPT4All keeps models in <data>/nomic.ai/GPT4All on all three systems (platformdirs drops the
        # "author" part on Linux and macOS, so it is spelled out)
        ("GPT4All", _under_home(platformdirs.user_data_dir(None, False), home) / "nomic.ai" / "GPT4All"),
        ("Jan", home / "jan" / "models"),
        ("Jan", _under_home(platformdirs.user_data_dir("Jan", False), home) / "data"),
        ("Jan", _under_home(platformdirs.user_config_dir("Jan", False), home) / "data"),
        ("~/models", home / "models"),
        ("Downloads", home / "Downloads"),
    ]
    return folders


def ollama_folders(home: Path | None = None, env: Mapping[str, str] | None = None) -> list[Path]:
    home = Path.home() if home is None else home
    env = os.environ if env is None else env
    if env.get("OLLAMA_MODELS"):
        return [Path(env["OLLAMA_MODELS"])]
    return [home / ".ollama" / "models", Path("/usr/share/ollama/.ollama/models")]


def _under_home(path: str, home: Path) -> Path:
    """platformdirs answers for the real home; tests (and portable setups) pass another one."""
    p = Path(path)
    try:
        return home / p.relative_to(Path.home())
    except ValueError:
        return p


def find_models(
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    max_depth: int = 6,
    max_entries: int = 50_000,
    time_limit_s: float = 5.0,
) -> list[FoundModel]:
    """Chat-model GGUF files in the folders of `model_folders` and in Ollama's store, best known first.

    The walk is bounded (depth, directory entries, seconds) because Downloads can be large; symlinked
    folders are not followed (the Hugging Face cache links files, not folders, so its files are found).
    Files that are not GGUF, vision projectors, adapters and embedding models are left out; a model found
    twice (a link and its target) is listed once.
    """
    deadline = time.monotonic() + time_limit_s
    budget = [max_entries]
    found: list[FoundModel] = []
    seen: set[str] = set()

    def add(path: Path, source: str, name: str | None = None) -> None:
        try:
            real = str(path.resolve())
            size = path.stat().st_size
        except OSError:
            return
        if real in seen:
            return
        meta = read_gguf_header(path)
        if meta is None or not is_chat_model(meta):
            return
        seen.add(real)
        m = _SPLIT.search(path.name)
        if m:
            size = sum(_size(p) for p in path.parent.glob(_SPLIT.sub("-*-of-" + m.group(2) + ".gguf", path.name)))
        arch = meta.get("general.architecture")
        ctx = meta.get(f"{arch}.context_length") if arch else None
        # the file's own name is what the user downloaded and recognises (general.name is often a
        # training-run label: "Smollm2 135M 8k Lc100K Mix1 Ep2"); Ollama's blobs have none, its tag is used
        label = name or re.sub(r"\.gguf$", "", _SPLIT.sub("", path.name), flags=re.IGNORECASE)
        found.append(FoundModel(str(path), str(label), source, size, arch, int(ctx) if ctx else None))

    for source, folder in model_folders(home, env):
        for path in _gguf_files(folder, max_depth, budget, deadline):
            add(path, source)
    for folder in ollama_folders(home, env):
        for name, blob in _ollama_models(folder):
            add(blob, "Ollama", name)
    return found


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _gguf_files(root: Path, max_depth: int, budget: list[int], deadline: float) -> Iterator[Path]:
    if not root.is_dir():
        return
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            budget[0] -= 1
            if budget[0] < 0 or time.monotonic() > deadline:
                return
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < max_depth and not entry.name.startswith("."):
                        stack.append((Path(entry.path), depth + 1))
                elif entry.name.lower().endswith(".gguf"):
                    m = _SPLIT.search(entry.name)
                    if m is None or int(m.group(1)) == 1:
                        yield Path(entry.path)
            except OSError:
                continue


def _ollama_models(root: Path) -> Iterator[tuple[str, Path]]:
    """("name:tag", weights blob) for each model in an Ollama store (manifests/<host>/<ns>/<name>/<tag>)."""
    manifests = root / "manifests"
    if not manifests.is_dir():
        return
    for manifest in sorted(manifests.glob("*/*/*/*")):
        try:
            layers = json.loads(manifest.read_text(encoding="utf-8")).get("layers", [])
        except (OSError, ValueError, AttributeError):
            continue
        for layer in layers if isinstance(layers, list) else []:
            if isinstance(layer, dict) and layer.get("mediaType") == "application/vnd.ollama.image.model":
                digest = str(layer.get("digest", "")).replace(":", "-")
                host, namespace, name, tag = manifest.parts[-4:]
                shown = f"{name}:{tag}" if namespace == "library" else f"{namespace}/{name}:{tag}"
                if host != "registry.ollama.ai":
                    shown = f"{host}/{shown}"
                blob = root / "blobs" / digest
                if digest and blob.is_file():
                    yield shown, blob


# --- OpenAI-compatible servers running on this computer ---------------------------------------------

# the ports local-LLM apps serve their OpenAI-compatible API on by default
KNOWN_SERVERS: list[tuple[str, int]] = [
    ("Ollama", 11434),
    ("LM Studio", 1234),
    ("llama-server", 8080),
    ("vLLM", 8000),
    ("Jan", 1337),
    ("GPT4All", 4891),
]


@dataclass(frozen=True)
class FoundServer:
    url: str  # the API's base URL, ".../v1"
    app: str  # which app serves on that port by default, or "configured"
    models: tuple[str, ...]  # what its /models lists


def find_servers(
    extra: list[tuple[str, str]] | None = None,
    *,
    host: str = "127.0.0.1",
    known: list[tuple[str, int]] | None = None,
    timeout_s: float = 0.5,
) -> list[FoundServer]:
    """The OpenAI-compatible servers that answer on this computer's usual ports, and at `extra`
    ((base URL, API key) pairs, e.g. the one in settings), with the models each lists. All are asked at
    once, each for at most `timeout_s`; a port where nothing listens answers at once."""
    from concurrent.futures import ThreadPoolExecutor

    from models.errors import ModelError
    from models.openai_http import OpenAIChatModel

    candidates: dict[str, tuple[str, str]] = {}
    for url, key in extra or []:
        if url.strip():
            candidates.setdefault(url.strip().rstrip("/"), ("configured", key))
    for app, port in KNOWN_SERVERS if known is None else known:
        candidates.setdefault(f"http://{host}:{port}/v1", (app, ""))

    def ask(url: str) -> FoundServer | None:
        app, key = candidates[url]
        try:
            names = OpenAIChatModel(base_url=url, api_key=key, connect_timeout_s=timeout_s).list_models()
        except (ModelError, ValueError, OSError, AttributeError, TypeError):  # not an OpenAI-style answer
            return None
        return FoundServer(url, app, tuple(names))

    with ThreadPoolExecutor(max_workers=len(candidates)) as pool:
        return [s for s in pool.map(ask, list(candidates)) if s is not None]
