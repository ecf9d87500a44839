"""Reading a member of an untrusted zip in place, never extracting it: refused from its header when it
would expand past a size limit or compress more than a ratio (a zip bomb), and inflated in small steps
so a header that lies never makes it take more than the header said.

Shared by the conversation importers (app.importers.reading: a ChatGPT or Claude export's
conversations.json) and memory cubes (memory_core.cubes). Each caller raises its own error type, so
the message reaches the user in the words of what they were doing.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from typing import Any

# Real exports compress 4-11 to 1 (ChatGPT, Claude and LoCoMo JSON, memory cubes' JSON Lines); deflate
# can reach about 1,000 to 1, which only data made to be a bomb does.
MAX_ZIP_RATIO = 100
RATIO_FROM_BYTES = 1024**2  # a small member's ratio says nothing (and costs nothing)
CHUNK = 1024**2


def size_text(n: int) -> str:
    """A byte count as a person reads it: "512 MiB", "1.5 GiB", "300 bytes"."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"


def printable(member_name: str) -> str:
    """A member's name as it may be shown in one line: the archive's own, so any characters."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in member_name)
    return clean if len(clean) <= 120 else clean[:117] + "..."


def check_size(
    size: int,
    packed: int,
    shown: str,
    *,
    max_bytes: int,
    max_ratio: float = MAX_ZIP_RATIO,
    error: type[Exception] = ValueError,
    too_large_hint: str = "",
) -> None:
    """Raise `error` when `size` bytes inflated from `packed` compressed ones is over `max_bytes`, or
    (past RATIO_FROM_BYTES) over `max_ratio` to 1."""
    packed = max(packed, 1)
    if size >= RATIO_FROM_BYTES and size / packed > max_ratio:
        raise error(
            f"{shown}: refused as a likely zip bomb: {size_text(packed)} that expands to {size_text(size)} "
            f"({size / packed:,.0f} to 1, over the limit of {max_ratio:g} to 1)"
        )
    if size > max_bytes:
        raise error(
            f"{shown}: too large to import from a zip: it expands to {size_text(size)}, over the "
            f"{size_text(max_bytes)} limit{too_large_hint}"
        )


def iter_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    shown: str,
    *,
    max_bytes: int,
    max_ratio: float = MAX_ZIP_RATIO,
    error: type[Exception] = ValueError,
    too_large_hint: str = "",
) -> Iterator[bytes]:
    """The member's bytes in steps of at most CHUNK, refused before anything is inflated when its header
    says it is too big or too compressed, and checked again after every step against what it really
    holds. In small steps: zipfile inflates as much as one read asks for before it cuts the data to the
    size the header gave, so one big read of a member lying about its size could take gigabytes."""

    def check(size: int) -> None:
        check_size(
            size,
            info.compress_size,
            shown,
            max_bytes=max_bytes,
            max_ratio=max_ratio,
            error=error,
            too_large_hint=too_large_hint,
        )

    check(info.file_size)
    done = 0
    with zf.open(info) as member:
        while chunk := member.read(CHUNK):
            done += len(chunk)
            check(done)
            yield chunk


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, shown: str, **limits: Any) -> bytes:
    """`iter_member`'s bytes in one piece (`limits`: its keyword arguments)."""
    return b"".join(iter_member(zf, info, shown, **limits))
