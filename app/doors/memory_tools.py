"""What another program may ask of the memory, as plain functions over a store: search, remember,
forget, the persona, what is recent, one page.

The MCP server (`app.doors.mcp_server`) offers these as its tools and resources; they are kept apart from
it so the rules are read in one place and tested without a protocol. The rules are the app's own:
a fact goes through `app.operations.remember` (a repeat confirms, a newer value updates, a pinned fact is kept)
and says who wrote it (`source`, "via MCP: Claude Desktop", shown in the inspector); a paused memory
learns nothing new; forgetting by a statement follows "Forget that …" in chat and never wipes. What
comes back is JSON-ready dicts of the memory's own words: data for the other program's model to read,
with dates, scores and the reason each item was chosen.

Memory spaces (memory_core.spaces.component): `space` names the one a fact is kept in and the one a search or a
"forget that …" reads, as a chat of that space would; None keeps a fact in Personal and searches and
forgets in every space. A name the memory does not hold is refused, naming the spaces it does.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from app.operations import memory as memory_verbs
from app.operations.remember import OWNERS, forget_statement, remember_fact, statement_to_forget
from memory_core import RetrievalBudget
from memory_core.spaces.component import SpaceError

if TYPE_CHECKING:
    from memory_core import MemoryStore
    from memory_core.types import Knowledge, Page, Trait

MAX_RESULTS = 50
FORGET_KINDS = {"fact": "knowledge", "trait": "trait", "page": "page"}


class Refused(Exception):
    """A request the memory's rules turn down (paused, nothing named, no such item): its message
    says why in one line, for the other program's user."""


def iso(ts: float | None) -> str | None:
    """A timestamp as local ISO 8601 with its offset (what a model reads as a date), or None."""
    if not ts:
        return None
    return dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def _fact(k: Knowledge, score: float | None = None, why: str | None = None) -> dict:
    row: dict[str, Any] = {
        "id": k.id,
        "about": k.owner,
        "text": k.text,
        "updated": iso(k.updated_at),
        "source": _source(k),
        "pinned": k.pinned,
    }
    if score is not None:
        row.update(score=round(float(score), 4), why=why)
    return row


def _trait(t: Trait, score: float | None = None, why: str | None = None) -> dict:
    row: dict[str, Any] = {
        "id": t.id,
        "dimension": t.dimension,
        "value": t.value,
        "updated": iso(t.updated_at),
        "source": _source(t),
    }
    if score is not None:
        row.update(score=round(float(score), 4), why=why)
    return row


def _source(item: Trait | Knowledge) -> str:
    """Where a trait or fact came from, as the inspector says it: its pages, or who wrote it."""
    if item.source_page_ids:
        return "pages " + ", ".join(str(p) for p in item.source_page_ids[:6])
    return "the user" if item.model in ("", "user") else item.model


def _page(p: Page, score: float | None = None, why: str | None = None) -> dict:
    row: dict[str, Any] = {
        "id": p.id,
        "date": iso(p.timestamp),
        "conversation_id": p.conversation_id,
        "tier": p.tier,
        "user": p.user_text,
        "assistant": p.assistant_text,
    }
    if score is not None:
        row.update(score=round(float(score), 4), why=why)
    return row


def space_id(store: MemoryStore, name: str | None) -> int | None:
    """The id of the memory space named `name` (None for None). Refused, naming the memory's spaces,
    when it holds none of that name."""
    if name is None:
        return None
    try:
        return store.spaces.resolve(name)
    except SpaceError:
        names = ", ".join(store.spaces.names().values())
        raise Refused(f"memory holds no space named {name!r}; its spaces are: {names}") from None


def search(store: MemoryStore, query: str, limit: int = 10, *, space: str | None = None) -> dict:
    """What memory recalls for `query`: the best `limit` pages and facts, and the persona's traits,
    each with its score, why it was chosen and its space (the retrieval trace of a chat turn, without
    a chat); from space `space` only, else from every space. A search by another program is no visit:
    it heats nothing, so it writes nothing."""
    limit = max(1, min(MAX_RESULTS, int(limit)))
    sid = space_id(store, space)
    spaces = None if sid is None else frozenset({sid})
    r = store.retrieve(query, None, RetrievalBudget(pages=limit, knowledge=limit), record_visits=False, spaces=spaces)
    names = store.spaces.names()
    return {
        "query": query,
        "space": None if sid is None else names.get(sid),
        "facts": [_spaced(_fact(h.item, h.score, h.reason), h.item, names) for h in r.knowledge],
        "traits": [_trait(h.item, h.score, h.reason) for h in r.traits],
        "pages": [_spaced(_page(h.page, h.score, h.reason), h.page, names) for h in r.pages],
        "timings_ms": {k: round(v, 2) for k, v in r.timings_ms.items()},
    }


def _spaced(row: dict, item: Knowledge | Page, names: dict[int, str]) -> dict:
    row["space"] = names.get(item.space_id, str(item.space_id))
    return row


def remember(store: MemoryStore, text: str, *, about: str = "user", source: str, space: str | None = None) -> dict:
    """Keep `text` as a fact about the user or the assistant, marked as written by `source`, in space
    `space` (default Personal; a repeat or a newer value there confirms or updates the fact it holds).
    Refused while memory is paused, for a space it does not hold, or when there is no fact in `text`."""
    if about not in OWNERS:
        raise Refused("a fact is about 'user' or 'assistant'")
    if store.is_paused():
        raise Refused("memory is paused in Mnemo: nothing new is remembered until it is resumed")
    sid = space_id(store, space)
    try:
        done = remember_fact(store, text, about=about, source=source, space_id=sid)
    except ValueError as exc:
        raise Refused(f"nothing remembered: {exc}") from exc
    kept = store.persona.get_knowledge(done.id)
    return {
        "kind": "fact",
        "id": done.id,
        "text": done.text,
        "outcome": done.outcome,
        "said": done.describe(),
        "space": store.spaces.name_of(kept.space_id) if kept is not None else None,
    }


def forget(
    store: MemoryStore,
    *,
    kind: str | None = None,
    item_id: int | None = None,
    statement: str | None = None,
    space: str | None = None,
) -> dict:
    """Forget one item by its id (a fact, trait or page; what was drawn only from a page goes with it),
    or the facts and pages that say `statement`, by the rules of "Forget that …" in chat: in space
    `space` only when given (the same words in another space stay), else in every space. Forgetting
    everything is not offered: it is the inspector's Wipe all…, behind a typed confirmation."""
    if (statement is None) == (item_id is None):
        raise Refused("give either a statement to forget, or a kind and an id")
    if statement is not None:
        what = statement_to_forget(statement)
        if what is None:
            raise Refused(
                'say what to forget in a few words ("my locker code is 4312"); forgetting everything is done '
                "in Mnemo's inspector, not from here"
            )
        sid = space_id(store, space)
        gone = forget_statement(store, what, spaces=None if sid is None else frozenset({sid}))
        return {
            "statement": what,
            "facts": [{"id": kid, "text": text} for kid, text in gone.facts],
            "pages": gone.pages,
            "forgot_anything": bool(gone.facts or gone.pages),
        }
    if kind not in FORGET_KINDS:
        raise Refused(f"kind is one of {', '.join(FORGET_KINDS)}")
    assert item_id is not None
    if not memory_verbs.forget(store, FORGET_KINDS[kind], int(item_id)).removed:
        raise Refused(f"memory holds no {kind} {item_id}")
    return {"kind": kind, "id": int(item_id), "forgot_anything": True}


def persona(store: MemoryStore) -> dict:
    """The long-term persona: the active traits and the facts about the user and the assistant."""
    return {
        "traits": [_trait(t) for t in store.persona.list_traits(limit=1000)],
        "facts_about_user": [_fact(k) for k in store.persona.list_knowledge("user", limit=1000)],
        "facts_about_assistant": [_fact(k) for k in store.persona.list_knowledge("assistant", limit=1000)],
        "paused": store.is_paused(),
    }


def persona_text(store: MemoryStore) -> str:
    """The persona as Markdown (the MCP resource): what a model reads at the start of a chat."""
    p = persona(store)
    out = ["# What Mnemo knows", ""]
    sections = (
        ("Traits", [f"{t['dimension']}: {t['value']}" for t in p["traits"]]),
        ("About the user", [k["text"] for k in p["facts_about_user"]]),
        ("About the assistant", [k["text"] for k in p["facts_about_assistant"]]),
    )
    for title, lines in sections:
        out += [f"## {title}", *(f"- {line}" for line in lines or ["(nothing yet)"]), ""]
    return "\n".join(out).rstrip() + "\n"


def recent(store: MemoryStore, limit: int = 10) -> dict:
    """The newest pages and facts of the memory, of every space."""
    limit = max(1, min(MAX_RESULTS, int(limit)))
    return {
        "pages": [_page(p) for p in store.pages.list_pages(order_by="timestamp", descending=True, limit=limit)],
        "facts": [
            _fact(k) for k in store.persona.list_knowledge(None, order_by="updated_at", descending=True, limit=limit)
        ],
    }


def page(store: MemoryStore, page_id: int) -> dict:
    """One page by its id. Refused when memory holds no such page."""
    p = store.pages.get(int(page_id))
    if p is None:
        raise Refused(f"memory holds no page {page_id}")
    return _page(p)
