"""Reading an input file safely: size, zip limits, binary sniffing, strict UTF-8, JSON with positions.

Every failure here is fatal (`ImportFatalError`) and happens before the store is touched.

A zip (a ChatGPT or Claude data export) is read in place, never extracted: only its
conversations.json is decompressed, into memory, so a member's name (`../../x`) is never a path;
a zip bomb is refused from its header by the limits below before a byte of it is inflated, and
one that lies in its header is read in small steps, never more than the header said.
"""

from __future__ import annotations

import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

from app.importers.base import ImportFatalError
from memory_core.cubes import safezip

MAX_FILE_BYTES = 2 * 1024**3  # refuse absurd inputs up front rather than exhaust memory
# What a conversations.json inside a zip may expand to. Parsing JSON takes several times its size in
# memory, so 512 MiB already needs gigabytes; the largest exports heavy users report are a few hundred
# MB. A bigger one can still be unzipped by hand and imported as a plain file (MAX_FILE_BYTES).
MAX_UNZIPPED_BYTES = 512 * 1024**2
# Real exports compress 4-11 to 1 (ChatGPT, Claude and LoCoMo JSON, pretty-printed or not, measured
# with zlib -9); deflate can reach about 1,000 to 1, which only data made to be a bomb does.
MAX_ZIP_RATIO = safezip.MAX_ZIP_RATIO
RATIO_FROM_BYTES = safezip.RATIO_FROM_BYTES

# Control bytes that never occur in text (TAB, LF, FF, CR and ESC excepted).
_BINARY_BYTES = set(range(0, 9)) | {11} | set(range(14, 27)) | set(range(28, 32)) | {127}


def read_bytes(
    path: Path, *, max_unzipped: int = MAX_UNZIPPED_BYTES, max_ratio: float = MAX_ZIP_RATIO
) -> tuple[bytes, str]:
    """Return (bytes, display name). A ChatGPT or Claude export .zip gives its conversations.json,
    within `max_unzipped` bytes and `max_ratio` to 1 compression."""
    name = path.name
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ImportFatalError(f"{path}: no such file") from None
    except OSError as exc:
        raise ImportFatalError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if path.is_dir():
        raise ImportFatalError(f"{path}: is a folder; give the file (e.g. conversations.json)")
    if size > MAX_FILE_BYTES:
        raise ImportFatalError(f"{name}: {size / 1024**3:.1f} GiB is larger than the 2 GiB import limit")
    try:
        with path.open("rb") as fh:
            if fh.read(4) == b"PK\x03\x04":
                return _from_zip(fh, name, max_unzipped, max_ratio)
            fh.seek(0)
            return fh.read(), name
    except OSError as exc:
        raise ImportFatalError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _from_zip(fh: Any, name: str, max_unzipped: int, max_ratio: float) -> tuple[bytes, str]:
    try:
        with zipfile.ZipFile(fh) as zf:
            members = [m for m in zf.infolist() if m.filename.rsplit("/", 1)[-1] == "conversations.json"]
            if not members:
                raise ImportFatalError(
                    f"{name}: a zip file without conversations.json (is it a ChatGPT or Claude data export?)"
                )
            member = min(members, key=lambda m: len(m.filename))
            shown = f"{name}/{_printable(member.filename)}"
            return _read_member(zf, member, shown, max_unzipped, max_ratio), shown
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise ImportFatalError(f"{name}: damaged zip file ({exc})") from None
    except RuntimeError as exc:  # zipfile's "File ... is encrypted, password required"
        raise ImportFatalError(f"{name}: {exc}; export it again without a password") from None
    except NotImplementedError as exc:  # a compression method zipfile cannot read
        raise ImportFatalError(f"{name}: {exc}; unzip it and import conversations.json itself") from None


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, shown: str, max_bytes: int, max_ratio: float) -> bytes:
    """The member's bytes, refused before anything is inflated when its header says it is bigger than
    `max_bytes` or compressed more than `max_ratio` to 1, and inflated in steps of a MiB, so what
    it really holds never takes more memory than the header said (memory_core.cubes.safezip)."""
    return safezip.read_member(
        zf,
        info,
        shown,
        max_bytes=max_bytes,
        max_ratio=max_ratio,
        error=ImportFatalError,
        too_large_hint="; unzip it and import the .json file itself",
    )


_size = safezip.size_text
_printable = safezip.printable


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, col


def decode_text(data: bytes, name: str) -> str:
    """Strict UTF-8 (a BOM is allowed); binary files and invalid bytes are fatal, with positions.
    The first 64 KiB are sniffed for binary bytes; a NUL byte anywhere is fatal too, so a file damaged
    past its head never brings a NUL into memory."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ImportFatalError(f"{name}: invalid UTF-16 text ({exc.reason})") from None
        if "\x00" in text:
            line = text.count("\n", 0, text.index("\x00")) + 1
            raise ImportFatalError(
                f"{name}: line {line}: a NUL character (U+0000), which text never holds; "
                f"the file is damaged or not text: remove it and import the file again"
            )
        return text
    head = data[:65536]
    nul = head.find(b"\x00")
    odd = sum(1 for b in head if b in _BINARY_BYTES)
    if nul >= 0 or (head and odd / len(head) > 0.01):
        where = nul if nul >= 0 else next(i for i, b in enumerate(head) if b in _BINARY_BYTES)
        raise ImportFatalError(
            f"{name}: this is a binary file, not a text or JSON export "
            f"(control byte 0x{data[where]:02x} at byte {where})"
        )
    nul = data.find(b"\x00", len(head))  # past the sniffed head: a text file damaged there
    if nul >= 0:
        line, col = _line_col(data, nul)
        raise ImportFatalError(
            f"{name}: line {line}, column {col} (byte {nul}): a NUL byte (0x00), which text never holds; "
            f"the file is damaged or not text: remove that byte and import the file again"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_col(data, exc.start)
        raise ImportFatalError(
            f"{name}: line {line}, column {col} (byte {exc.start}): invalid UTF-8 "
            f"(byte 0x{data[exc.start]:02x}); re-save the file as UTF-8"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def parse_json(text: str, name: str) -> Any:
    """json.loads with an error that says where, and whether the file looks cut short."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # cut short: the error sits in the last few characters (e.g. '"end_turn": nul'),
        # or a string never ends
        truncated = len(text.rstrip()) - exc.pos <= 16 or exc.msg.startswith("Unterminated string")
        hint = " — the file looks truncated (did the download or copy finish?)" if truncated else ""
        raise ImportFatalError(
            f"{name}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg}){hint}"
        ) from None
    except RecursionError:
        raise ImportFatalError(f"{name}: JSON nested too deeply to read") from None
