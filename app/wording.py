"""Counted nouns for messages the user reads ("1 page", "2 pages"), shared by the CLI and the window."""
from __future__ import annotations

_IRREGULAR = {"memory": "memories", "reply": "replies", "entry": "entries"}


def count(n: int | None, noun: str, plural: str | None = None) -> str:
    """`n` with thousands separators and the noun in the number it needs."""
    n = int(n or 0)
    return f"{n:,} {noun if n == 1 else (plural or _IRREGULAR.get(noun, noun + 's'))}"
