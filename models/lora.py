"""LoRA adapters in GGUF: read what a file says it is, check it fits a model, and write one.

An adapter file is a GGUF whose `general.type` is "adapter" and `adapter.type` "lora"; each adapted
weight `W` (a model tensor such as `blk.3.ffn_down.weight`, ne = [in, out]) has two tensors,
`W.lora_a` (ne = [in, r]) and `W.lora_b` (ne = [r, out]), and llama.cpp adds
`scale * alpha / r * B(A x)` to `W x` (`adapter.lora.alpha`; without it, `scale * B(A x)`). This is
the layout llama.cpp's convert_lora_to_gguf.py writes and `llama_adapter_lora_init` reads.

Why check here and not let llama.cpp do it: the user is owed one plain line ("made for a llama model
with 576-wide layers, this model's are 960") rather than a log on stderr and a null pointer, and the
file is untrusted input (a cube may carry one): it is parsed with bounds on every count and length,
and its tensors must lie inside the file, before llama.cpp sees it. A model's own tensor shapes come
from its GGUF header the same way (cached per file).

`write_lora_gguf` writes such a file with numpy alone (F32 or F16 tensors), so the tests and
`mnemo memory distill` need no `gguf` package to make one.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from models.discover import _SCALARS as GGUF_SCALARS
from models.errors import ModelError

GGUF_MAGIC = b"GGUF"
MAX_ADAPTER_BYTES = 2 << 30  # a rank-64 adapter of an 8B model is ~0.3 GB; more is not an adapter
MAX_KV = 100_000  # metadata entries (a model's tokenizer arrays count once each)
MAX_TENSORS = 100_000
MAX_STRING = 1 << 20  # one string value or key (a chat template is ~10 kB)
MAX_ARRAY = 1 << 24  # items in one array (vocabularies are ~256k)
MAX_DIMS = 4
# ggml types an adapter may hold, with (block length, bytes per block), to check the data lies in the file
_TYPE_SIZES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 30: (1, 2)}  # F32, F16, Q8_0, BF16
_TYPE_NAMES = {0: "F32", 1: "F16", 8: "Q8_0", 30: "BF16"}
_SCALARS = GGUF_SCALARS  # value type -> struct, as models.discover reads them
_STRING, _ARRAY = 8, 9


class AdapterError(ModelError):
    """An adapter file that cannot be used: the message is one line that names it and says why."""


@dataclass(frozen=True)
class TensorInfo:
    ne: tuple[int, ...]  # ggml order: ne[0] is the row length
    ggml_type: int
    offset: int  # from the start of the data section


@dataclass
class GGUFHeader:
    meta: dict[str, Any]  # scalars and strings (arrays are skipped)
    tensors: dict[str, TensorInfo]
    data_start: int
    file_size: int


@dataclass(frozen=True)
class AdapterInfo:
    """What an adapter file says about itself (`inspect_adapter`)."""

    path: str
    name: str
    architecture: str
    base_model: str  # the model it was trained for, as its metadata names it ("" when it does not)
    alpha: float | None
    rank: int
    targets: int  # adapted weights
    size: int
    layers: tuple[int, ...] = field(default=())

    def describe(self) -> str:
        base = self.base_model or f"a {self.architecture} model"
        return f"{self.name}: LoRA rank {self.rank} on {self.targets} weights, for {base}"


class _Reader:
    """Bounded reads from a GGUF file: every count and length is checked before it is used."""

    def __init__(self, f: BinaryIO, size: int):
        self.f = f
        self.size = size

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ValueError("the file ends in the middle of its header")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > MAX_STRING:
            raise ValueError(f"a string of {n:,} bytes")
        return self.take(n).decode("utf-8", "replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return _SCALARS[vtype].unpack(self.take(_SCALARS[vtype].size))[0]
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype, n = self.unpack("<I"), self.unpack("<Q")
            if n > MAX_ARRAY:
                raise ValueError(f"an array of {n:,} items")
            if itype in _SCALARS:
                self.f.seek(n * _SCALARS[itype].size, os.SEEK_CUR)
            elif itype == _STRING:
                for _ in range(n):
                    self.string()
            else:
                raise ValueError(f"an array of value type {itype}")
            return None
        raise ValueError(f"value type {vtype}")


def read_header(path: str | Path) -> GGUFHeader:
    """The metadata and tensor table of a GGUF file; AdapterError (with the file's name) when it is not
    one or is damaged. Reads only the header, never the tensors."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            return _parse(_Reader(f, size))
    except _NotGGUF as exc:
        raise AdapterError(f"{path.name}: {exc}") from None
    except (ValueError, struct.error, OverflowError) as exc:
        raise AdapterError(f"{path.name}: not a readable GGUF file ({exc})") from None
    except OSError as exc:
        raise AdapterError(f"{path.name}: cannot be read ({exc.strerror or exc})") from None


class _NotGGUF(ValueError):
    """A header that is readable but not one this reader takes (said as is, after the file's name)."""


def _parse(r: _Reader) -> GGUFHeader:
    if r.f.read(4) != GGUF_MAGIC:
        raise _NotGGUF("not a GGUF file (it does not start with the 'GGUF' signature)")
    version = r.unpack("<I")
    if version not in (2, 3):
        raise _NotGGUF(f"GGUF version {version}, which this reader does not know")
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
        raise _NotGGUF(f"a header claiming {n_tensors:,} tensors and {n_kv:,} entries")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = r.string()
        value = r.value(r.unpack("<I"))
        if value is not None:
            meta[key] = value
    tensors: dict[str, TensorInfo] = {}
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.unpack("<I")
        if not 1 <= n_dims <= MAX_DIMS:
            raise _NotGGUF(f"tensor {name[:60]!r} has {n_dims} dimensions")
        ne = tuple(r.unpack("<Q") for _ in range(n_dims))
        tensors[name] = TensorInfo(ne, r.unpack("<I"), r.unpack("<Q"))
    alignment = meta.get("general.alignment", 32)
    if not isinstance(alignment, int) or not 1 <= alignment <= 1 << 16:
        raise _NotGGUF(f"alignment {alignment!r}")
    pos = r.f.tell()
    data_start = (pos + alignment - 1) // alignment * alignment
    return GGUFHeader(meta, tensors, data_start, r.size)


_model_cache: dict[tuple[str, int, int], GGUFHeader] = {}
_model_lock = threading.Lock()


def model_header(model_path: str | Path) -> GGUFHeader:
    """A model file's header, read once per (path, size, mtime)."""
    st = os.stat(model_path)
    key = (str(Path(model_path).resolve()), st.st_size, st.st_mtime_ns)
    with _model_lock:
        header = _model_cache.get(key)
        if header is None:
            header = _model_cache[key] = read_header(model_path)
        return header


def inspect_adapter(path: str | Path) -> AdapterInfo:
    """What an adapter file is: AdapterError unless it is a well-formed LoRA adapter in GGUF whose
    every tensor lies inside the file, in pairs of the shapes a LoRA has."""
    path = Path(path)
    if not path.is_file():
        raise AdapterError(f"{path.name or path}: no such file")
    if path.stat().st_size > MAX_ADAPTER_BYTES:
        raise AdapterError(f"{path.name}: {path.stat().st_size:,} bytes, more than an adapter file can be")
    header = read_header(path)
    meta = header.meta
    if meta.get("general.type") != "adapter" or meta.get("adapter.type") != "lora":
        kind = meta.get("general.type") or "model"
        raise AdapterError(f"{path.name}: a GGUF {kind} file, not a LoRA adapter")
    arch = str(meta.get("general.architecture") or "")
    if not arch:
        raise AdapterError(f"{path.name}: the adapter does not say which architecture it is for")
    _check_data(path.name, header)
    pairs = lora_pairs(path.name, header.tensors)
    ranks = {header.tensors[a].ne[1] for a, _ in pairs.values()}
    alpha = meta.get("adapter.lora.alpha")
    layers = sorted({int(t.split(".")[1]) for t in pairs if t.startswith("blk.") and t.split(".")[1].isdigit()})
    return AdapterInfo(
        path=str(path),
        name=str(meta.get("general.name") or path.stem),
        architecture=arch,
        base_model=base_model_name(meta),
        alpha=float(alpha) if isinstance(alpha, (int, float)) else None,
        rank=max(ranks),
        targets=len(pairs),
        size=header.file_size,
        layers=tuple(layers),
    )


def base_model_name(meta: Mapping[str, Any]) -> str:
    """The model an adapter says it was made for: Mnemo's own key, then the keys llama.cpp's converter
    writes (general.base_model.0.name, general.basename / size_label)."""
    for key in ("mnemo.base_model", "general.base_model.0.name", "general.base_model.0.repo_url"):
        if meta.get(key):
            return str(meta[key])
    base = " ".join(str(meta[k]) for k in ("general.basename", "general.size_label") if meta.get(k))
    return base


def _check_data(name: str, header: GGUFHeader) -> None:
    for tname, t in header.tensors.items():
        if t.ggml_type not in _TYPE_SIZES:
            raise AdapterError(f"{name}: tensor {tname[:60]!r} is of ggml type {t.ggml_type}, not one an adapter holds")
        block, nbytes = _TYPE_SIZES[t.ggml_type]
        count = int(np.prod(t.ne, dtype=np.uint64)) if t.ne else 0
        if count == 0 or t.ne[0] % block or count > MAX_ADAPTER_BYTES:
            raise AdapterError(f"{name}: tensor {tname[:60]!r} has an impossible shape {list(t.ne)}")
        end = header.data_start + t.offset + count // block * nbytes
        if end > header.file_size:
            raise AdapterError(f"{name}: the file is cut short (tensor {tname[:60]!r} runs past its end)")


def lora_pairs(name: str, tensors: Mapping[str, TensorInfo]) -> dict[str, tuple[str, str]]:
    """{adapted weight: (its lora_a, its lora_b)}; AdapterError for a half pair or mismatched ranks."""
    pairs: dict[str, tuple[str, str]] = {}
    for tname in tensors:
        if tname.endswith(".lora_a"):
            target = tname[: -len(".lora_a")]
            b = target + ".lora_b"
            if b not in tensors:
                raise AdapterError(f"{name}: {tname[:60]!r} has no lora_b beside it")
            ta, tb = tensors[tname], tensors[b]
            if len(ta.ne) != 2 or len(tb.ne) != 2 or ta.ne[1] != tb.ne[0]:
                raise AdapterError(f"{name}: {target[:60]!r}'s lora_a and lora_b do not fit together")
            pairs[target] = (tname, b)
        elif not tname.endswith(".lora_b"):
            raise AdapterError(f"{name}: tensor {tname[:60]!r} is not part of a LoRA")
        elif tname[: -len(".lora_b")] + ".lora_a" not in tensors:
            raise AdapterError(f"{name}: {tname[:60]!r} has no lora_a beside it")
    if not pairs:
        raise AdapterError(f"{name}: the adapter holds no LoRA tensors")
    return pairs


def check_fits(adapter: str | Path, model_path: str | Path) -> AdapterInfo:
    """The adapter's info when it was made for this model's architecture and shapes; otherwise
    AdapterError with one line saying what differs (the model still works: nothing was loaded)."""
    info = inspect_adapter(adapter)
    model = model_header(model_path)
    model_arch = str(model.meta.get("general.architecture") or "?")
    model_name = Path(model_path).name
    for_what = f"made for {info.base_model or 'a ' + info.architecture + ' model'}"
    if info.architecture != model_arch:
        raise AdapterError(
            f"{Path(adapter).name}: {for_what} ({info.architecture}), not for {model_name} ({model_arch})"
        )
    header = read_header(adapter)
    for target, (a, b) in lora_pairs(Path(adapter).name, header.tensors).items():
        weight = model.tensors.get(target)
        if weight is None:
            raise AdapterError(f"{Path(adapter).name}: {for_what}: {model_name} has no weight {target!r}")
        ta, tb = header.tensors[a], header.tensors[b]
        if len(weight.ne) < 2 or ta.ne[0] != weight.ne[0] or tb.ne[1] != weight.ne[1]:
            raise AdapterError(
                f"{Path(adapter).name}: {for_what}: its {target} is {ta.ne[0]}x{tb.ne[1]}, "
                f"{model_name}'s is {weight.ne[0]}x{weight.ne[1]}"
            )
    return info


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file, hex (the registry's and a cube's checksum of an adapter)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- writing ------------------------------------------------------------------------------


def write_lora_gguf(
    path: str | Path,
    pairs: Mapping[str, tuple[np.ndarray, np.ndarray]],
    *,
    architecture: str,
    alpha: float,
    name: str,
    meta: Mapping[str, str | float | int] | None = None,
    f16: bool = True,
) -> Path:
    """Write a LoRA adapter in llama.cpp's layout: for each adapted weight name (e.g.
    "blk.0.ffn_down.weight") its A (r x in, numpy's row-major shape) and B (out x r), as peft holds
    them. Written to a temporary file and renamed, so a crash leaves no half adapter."""
    path = Path(path)
    align = 32  # GGUF's default alignment (no general.alignment key is written)
    kv: list[tuple[str, Any]] = [
        ("general.architecture", architecture),
        ("general.type", "adapter"),
        ("general.name", name),
        ("adapter.type", "lora"),
        ("adapter.lora.alpha", float(alpha)),
    ]
    kv += list((meta or {}).items())
    dtype = np.float16 if f16 else np.float32
    tensors: list[tuple[str, np.ndarray]] = []
    for target, (a, b) in pairs.items():
        tensors.append((f"{target}.lora_a", np.ascontiguousarray(a, dtype=dtype)))
        tensors.append((f"{target}.lora_b", np.ascontiguousarray(b, dtype=dtype)))
    head = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, value in kv:
        head += _kv(key, value)
    offset = 0
    for tname, arr in tensors:
        head += _str(tname) + struct.pack("<I", arr.ndim) + b"".join(struct.pack("<Q", d) for d in arr.shape[::-1])
        head += struct.pack("<IQ", 1 if f16 else 0, offset)
        offset += _padded(arr.nbytes, align)
    head += b"\0" * (_padded(len(head), align) - len(head))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(head)
        for _, arr in tensors:
            f.write(arr.tobytes())
            f.write(b"\0" * (_padded(arr.nbytes, align) - arr.nbytes))
    os.replace(tmp, path)
    return path


def _padded(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def _str(s: str) -> bytes:
    data = s.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, value: Any) -> bytes:
    if isinstance(value, str):
        return _str(key) + struct.pack("<I", _STRING) + _str(value)
    if isinstance(value, bool):
        return _str(key) + struct.pack("<I?", 7, value)
    if isinstance(value, int):  # uint32 where it fits: llama.cpp reads e.g. alignment as u32 only
        if 0 <= value < 1 << 32:
            return _str(key) + struct.pack("<II", 4, value)
        return _str(key) + struct.pack("<Iq", 11, value)
    return _str(key) + struct.pack("<If", 6, float(value))
