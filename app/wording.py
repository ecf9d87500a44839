"""Words and figures for messages the user reads ("1 page", "2 pages", a heat), shared by the CLI and the window."""

from __future__ import annotations

import math

_IRREGULAR = {"memory": "memories", "reply": "replies", "entry": "entries"}


def count(n: int | None, noun: str, plural: str | None = None) -> str:
    """`n` with thousands separators and the noun in the number it needs."""
    n = int(n or 0)
    return f"{n:,} {noun if n == 1 else (plural or _IRREGULAR.get(noun, noun + 's'))}"


# what each kind of memory job does, for a user wondering what "3 pending" is waiting on
_JOB_WORK = {
    "add_page": lambda n: f"{count(n, 'reply')} to file as memory pages",
    "promote_segment": lambda n: f"{count(n, 'hot segment')} to learn persona facts from, when the chat model is free",
    "index_tokens": lambda n: "indexing the words of older pages",
    "read_in_context": lambda n: "re-embedding pages, each read after the one before it",
    "reembed": lambda n: "re-embedding memory with the new embedding model",
}


def pending_work(by_kind: dict[str, int] | None) -> str:
    """The memory's queued jobs (`MemoryStore.stats()["pending_by_kind"]`) in words, most numerous first."""
    parts = []
    for kind, n in sorted((by_kind or {}).items(), key=lambda kv: (-kv[1], kv[0])):
        if n:
            parts.append(_JOB_WORK[kind](n) if kind in _JOB_WORK else f"{count(n, 'job')} of kind {kind}")
    return "; ".join(parts)


def heat(value: float) -> str:
    """A segment's heat to two decimals, cut rather than rounded: a heat of 4.999 against τ = 5 is not
    promoted, and "5.00" would say it had reached τ."""
    return f"{math.floor(float(value) * 100 + 1e-9) / 100:.2f}"


def heat_gap(to_go: float) -> str:
    """How far a heat is below τ ("0.35"), never "0.00" for a heat just short of it."""
    return f"{to_go:.2f}" if to_go >= 0.01 else "less than 0.01"
