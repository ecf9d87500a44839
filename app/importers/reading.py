"""Reading an input file safely: size, binary sniffing, strict UTF-8, JSON with positions.

Every failure here is fatal (`ImportFatalError`) and happens before the store is touched.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from app.importers.base import ImportFatalError

MAX_FILE_BYTES = 2 * 1024**3  # refuse absurd inputs up front rather than exhaust memory

# Control bytes that never occur in text (TAB, LF, FF, CR and ESC excepted).
_BINARY_BYTES = set(range(0, 9)) | {11} | set(range(14, 27)) | set(range(28, 32)) | {127}


def read_bytes(path: Path) -> tuple[bytes, str]:
    """Return (bytes, display name). A ChatGPT or Claude export .zip gives its conversations.json."""
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
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFatalError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if data[:4] == b"PK\x03\x04":
        return _from_zip(data, name)
    return data, name


def _from_zip(data: bytes, name: str) -> tuple[bytes, str]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            members = [m for m in zf.namelist() if m.rsplit("/", 1)[-1] == "conversations.json"]
            if not members:
                raise ImportFatalError(
                    f"{name}: a zip file without conversations.json (is it a ChatGPT or Claude data export?)"
                )
            member = min(members, key=len)
            return zf.read(member), f"{name}/{member}"
    except zipfile.BadZipFile as exc:
        raise ImportFatalError(f"{name}: damaged zip file ({exc})") from None


def _line_col(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, col


def decode_text(data: bytes, name: str) -> str:
    """Strict UTF-8 (a BOM is allowed); binary files and invalid bytes are fatal, with positions."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ImportFatalError(f"{name}: invalid UTF-16 text ({exc.reason})") from None
    head = data[:65536]
    nul = head.find(b"\x00")
    odd = sum(1 for b in head if b in _BINARY_BYTES)
    if nul >= 0 or (head and odd / len(head) > 0.01):
        where = nul if nul >= 0 else next(i for i, b in enumerate(head) if b in _BINARY_BYTES)
        raise ImportFatalError(
            f"{name}: this is a binary file, not a text or JSON export "
            f"(control byte 0x{data[where]:02x} at byte {where})"
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
