"""The terms an FTS5 index holds, read from its raw blocks rather than through SQL (which hides what
a delete only masked): the leak tests look for a forgotten word there."""

from __future__ import annotations


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """SQLite's varint at `i`: (value, next offset)."""
    v = 0
    for n in range(9):
        b = buf[i + n]
        if n == 8:
            return (v << 8) | b, i + 9
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v, i + n + 1
    raise AssertionError("unreachable")


def fts_terms(conn, table: str) -> set[bytes]:
    """Every term on every leaf page of an FTS5 table's segments, read from its raw `_data` blocks: live,
    deleted-but-not-merged and delete-marker entries alike (fts5_index.c: a leaf's footer lists the
    offsets of its terms; the first is whole, each next one shares a prefix with the one before)."""
    terms: set[bytes] = set()
    for rowid, block in conn.execute(f"SELECT id, block FROM {table}_data"):
        segid, dlidx, height = rowid >> 37, (rowid >> 36) & 1, (rowid >> 31) & 0x1F
        if not 0 < segid < 1 << 16 or dlidx or height or len(block) < 4:
            continue  # averages and structure records, tombstone pages, doclist indexes
        offsets: list[int] = []
        i, at = int.from_bytes(block[2:4], "big"), 0  # the page footer: where each term starts
        while i < len(block):
            delta, i = _varint(block, i)
            at += delta
            offsets.append(at)
        prev = b""
        for n, off in enumerate(offsets):
            if n == 0:
                size, j = _varint(block, off)
                term = block[j : j + size]
            else:
                shared, j = _varint(block, off)
                size, j = _varint(block, j)
                term = prev[:shared] + block[j : j + size]
            terms.add(term)
            prev = term
    return terms
