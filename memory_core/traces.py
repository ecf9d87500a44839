"""Replies' traces without the text of forgotten memory.

A reply keeps, in `message.meta`, the trace of what was recalled for it: the facts with their text, the
traits with their value, the pages with their meta (their text is read from the page when shown), and,
for a message that asked to remember something, the fact it kept (`stats.remembered`). Once an item is
forgotten its words must not survive there: each trace entry that names it keeps its id, score and
reason (the inspector still says a page or fact was recalled, and that it has been forgotten since)
and loses its text, marked `"forgotten": true`.

Finding the replies: only a reply written after an item was made can name it (`since`), and its
meta is matched by the entry's JSON (`"knowledge_id":12,`; memory_core writes compact, key-sorted JSON,
`codec.to_json`) before it is parsed. These functions only rewrite the JSON: `Conversations`, the owner of
the message table, reads and writes the rows, in the forget's transaction (`Purge.at_seal`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .storage.codec import from_json, to_json

# a trace entry's id as it is written: '"page_id":12,' (hits and sides), '"knowledge_id":12,',
# '"trait_id":12,', and a kept fact '"id":12,"kind":"knowledge"'
_REF = re.compile(r'"(page_id|knowledge_id|trait_id)":(\d+)[,}]|"id":(\d+),"kind":"(knowledge|trait)"')
_ID_KEY = {"page_id": "page", "knowledge_id": "knowledge", "trait_id": "trait"}
# what each kind of entry says of its item, dropped when the item is forgotten
_TEXT_KEYS = {"page": ("meta",), "knowledge": ("text",), "trait": ("value",)}


def scrubbed(meta_s: str, gone: set[tuple[str, int]]) -> str | None:
    """A reply's meta (JSON) without the text of the forgotten items `gone` ((kind, id): "page", "knowledge",
    "trait"), or None when it names none of them."""
    if not any(_ref(m) in gone for m in _REF.finditer(meta_s)):
        return None
    meta = from_json(meta_s, {})
    return to_json(meta) if _scrub_meta(meta, lambda kind, iid: (kind, iid) in gone) else None


def scrubbed_all(meta_s: str) -> str | None:
    """A reply's meta without the text of any recalled item (memory was wiped), or None when it has none."""
    if _REF.search(meta_s) is None and '"forgot"' not in meta_s:
        return None
    meta = from_json(meta_s, {})
    return to_json(meta) if _scrub_meta(meta, lambda kind, iid: True) else None


IsGone = Callable[[str, int], bool]  # (kind, id): whether that item was forgotten


def _ref(m: re.Match) -> tuple[str, int]:
    if m.group(1):
        return _ID_KEY[m.group(1)], int(m.group(2))
    return m.group(4), int(m.group(3))


def _scrub_meta(meta: Any, is_gone: IsGone) -> bool:
    """Scrub one reply's meta in place; whether anything changed."""
    if not isinstance(meta, dict):
        return False
    changed = False
    trace = meta.get("trace")
    if isinstance(trace, dict):
        for key, kind, id_key in (
            ("stm", "page", "page_id"),
            ("pages", "page", "page_id"),
            ("skipped", "page", "page_id"),
            ("knowledge", "knowledge", "knowledge_id"),
            ("traits", "trait", "trait_id"),
        ):
            for entry in trace.get(key) or []:
                if isinstance(entry, dict) and _gone(entry.get(id_key), kind, is_gone):
                    changed |= _drop_text(entry, kind)
    stats = meta.get("stats")
    forgot = stats.get("forgot") if isinstance(stats, dict) else None
    if isinstance(forgot, dict) and any(isinstance(f, list) and len(f) > 1 for f in forgot.get("facts") or []):
        # a request to forget once kept the forgotten facts' text ([id, text]): their ids stay
        forgot["facts"] = [f[:1] if isinstance(f, list) else f for f in forgot["facts"]]
        changed = True
    kept = stats.get("remembered") if isinstance(stats, dict) else None
    if isinstance(kept, dict) and kept.get("kind") in ("knowledge", "trait"):
        if _gone(kept.get("id"), kept["kind"], is_gone) and ("text" in kept or not kept.get("forgotten")):
            kept.pop("text", None)
            kept["forgotten"] = True
            changed = True
    return changed


def _gone(iid: Any, kind: str, is_gone: IsGone) -> bool:
    return isinstance(iid, int) and is_gone(kind, iid)


def _drop_text(entry: dict, kind: str) -> bool:
    if entry.get("forgotten") and not any(entry.get(k) for k in _TEXT_KEYS[kind]):
        return False
    for key in _TEXT_KEYS[kind]:
        if key in entry:
            entry[key] = {} if key == "meta" else ""
    entry["forgotten"] = True
    return True
