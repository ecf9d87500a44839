"""Turn a reply's stored retrieval trace (message.meta["trace"]) or a test query into `TraceData`,
what the Recall tab (ui.inspector.tabs.trace) shows.

These functions run on the inspector's worker thread: they read a handful of rows through the
memory core's API (get_message, get_page, get_segment, retrieve) and never touch the UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from app.chat.prompting import QuoteFloor
from memory_core import RetrievalBudget


def finite(x, default: float = 0.0) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


@dataclass
class TraceData:
    """What the trace view shows, prepared on the worker thread."""

    source: str  # "reply" | "query"
    query: str
    message_id: int | None = None
    conversation_id: int | None = None
    in_prompt: list[dict] = field(default_factory=list)
    not_in_prompt: list[dict] = field(default_factory=list)
    stm: list[dict] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # of those, already in the model's KV cache (warmed, reused)
    restored_prompt_tokens: int = 0  # of those, loaded from a state saved before (activation memory)
    timings_ms: dict = field(default_factory=dict)
    common_words: list = field(default_factory=list)  # query words on most pages (MemoryParams.ranking.common_word_df)
    included: dict = field(default_factory=dict)
    dropped: dict = field(default_factory=dict)
    note: str = ""


# a stored trace's page hit as QuoteFloor reads it (traces written before similarities were kept lack them)
_HIT_DEFAULTS = {"score": 0.0, "similarity": None, "standout": None, "inherited_from": None, "match_score": None}


# what of a page the prompt quoted (its other side ranked lower than the turns that filled the budget)
QUOTED = {None: "both sides", "user": "user side", "assistant": "reply"}


def _page_text(page, sides=("user", "assistant")) -> str:
    parts = []
    if page.user_text and "user" in sides:
        parts.append(f"User: {page.user_text.strip()}")
    if page.assistant_text and "assistant" in sides:
        parts.append(f"Assistant: {page.assistant_text.strip()}")
    return "\n".join(parts)


def _pages(store, ids) -> dict[int, Any]:
    out = {}
    for pid in dict.fromkeys(ids):
        if pid is None:
            continue
        p = store.pages.get(int(pid))
        if p is not None:
            out[int(pid)] = p
    return out


def _topics(store, rows: list[dict]) -> None:
    """Each recalled page's context: its topic's title and summary as they are now (read here, not kept in
    the trace: a forgotten page's words must not stay in a reply's trace through its topic's summary)."""
    _space_names(store, rows)
    seen: dict[int, Any] = {}
    for row in rows:
        sid = row.get("segment_id")
        if sid is None or row.get("missing"):
            continue
        if sid not in seen:
            seen[sid] = store.segments.get(int(sid))
        seg = seen[sid]
        if seg is not None:
            row["topic_title"] = seg.title
            row["topic_summary"] = seg.summary


def _space_names(store, rows: list[dict]) -> None:
    """Each recalled page's memory space by name (`space_name`; the trace's `space_id`, else the page's),
    only when the memory has more than one space: with one, naming it says nothing."""
    names = {sp.id: sp.name for sp in store.spaces.list()}
    if len(names) < 2:
        return
    for row in rows:
        page = row.get("page")
        sid = row.get("space_id") if row.get("space_id") is not None else getattr(page, "space_id", None)
        if sid is not None:
            row["space_name"] = names.get(int(sid), "a deleted space")


def _row(hit: dict, rank: int, pages: dict) -> dict:
    pid = int(hit["page_id"])
    page = pages.get(pid)
    row = {
        "rank": rank,
        "page_id": pid,
        "score": finite(hit.get("score")),
        "reason": hit.get("reason") or "",
        "tier": hit.get("tier"),
        "segment_id": hit.get("segment_id"),
        "timestamp": hit.get("timestamp"),
        "conversation_id": hit.get("conversation_id"),
        "meta": hit.get("meta") or {},
        "space_id": hit.get("space_id"),  # the memory space it was recalled from (traces since spaces)
    }
    if page is None:
        row["text"] = "(this page has been forgotten since)"
        row["missing"] = True
    else:
        row["text"] = _page_text(page)
        row["page"] = page
        row["tier_now"] = page.tier
    return row


def _skipped_rows(skipped: list[dict], pages: dict) -> list[dict]:
    """Pages the ranking passed over (an earlier asking of the same question), unranked, with why."""
    rows = []
    for h in skipped:
        row = _row(h, 0, pages)
        row["left_out"] = row["reason"]
        rows.append(row)
    return rows


def _items(trace: dict, included: dict | None) -> list[dict]:
    inc_t = set((included or {}).get("traits", []))
    inc_k = set((included or {}).get("knowledge", []))
    prompt = included is not None
    rows = []
    for t in trace.get("traits", []) or []:
        rows.append(
            {
                "kind": f"trait: {t.get('dimension', '')}",
                "key": ("trait", t.get("trait_id")),
                "text": "(forgotten since)"
                if t.get("forgotten")
                else f"{t.get('dimension', '')}: {t.get('value', '')}",
                "score": finite(t.get("score")),
                "reason": t.get("reason") or "",
                "in_prompt": ("yes" if t.get("trait_id") in inc_t else "no") if prompt else "—",
            }
        )
    for k in trace.get("knowledge", []) or []:
        rows.append(
            {
                "kind": "fact about you" if k.get("owner", "user") == "user" else "fact about Mnemo",
                "key": ("knowledge", k.get("knowledge_id")),
                "text": "(forgotten since)" if k.get("forgotten") else k.get("text", ""),
                "score": finite(k.get("score")),
                "reason": k.get("reason") or "",
                "in_prompt": ("yes" if k.get("knowledge_id") in inc_k else "no") if prompt else "—",
            }
        )
    return rows


def _segments(store, trace: dict, hits: list[dict]) -> list[dict]:
    used: dict[int, int] = {}
    for h in hits:
        if h.get("segment_id") is not None:
            used[h["segment_id"]] = used.get(h["segment_id"], 0) + 1
    rows = []
    for s in trace.get("segments", []) or []:
        sid = s.get("segment_id")
        seg = store.segments.get(int(sid)) if sid is not None else None
        rows.append(
            {
                "segment_id": sid,
                "score": finite(s.get("score")),
                "reason": s.get("reason") or "",
                "summary": seg.summary if seg is not None else "(forgotten since)",
                "pages_used": used.get(sid, 0),
            }
        )
    return rows


def _why_left_out(h: dict, page, floor: QuoteFloor, msg, dropped: dict | None) -> str:
    """Why a ranked page did not reach the reply's prompt."""
    # the floor first: an older page of this chat may be quoted again (MemoryParams.quoting.recall_own_after)
    if (refused := floor.refusal(SimpleNamespace(**{**_HIT_DEFAULTS, **h}))) is not None:
        return refused
    if (
        page is not None
        and page.conversation_id == msg.conversation_id
        and page.assistant_message_id
        and page.assistant_message_id < msg.id
    ):
        return "already in the dialogue shown to the model"
    if h.get("inherited_from") is not None:
        return "ranked for the page next to it in its conversation; quoted with it only as a question and its answer"
    if (dropped or {}).get("pages"):
        return "did not fit the prompt's budget (its tokens, or the turns it quotes of recalled pages)"
    return "not used"


def _stm_rows(stm: list, pages: dict, inc_msgs: set) -> list[dict]:
    """The chat's recent pages, each said to be in the prompt as dialogue or cut for the budget."""
    rows = []
    for i, h in enumerate(stm):
        row = _row(h, i + 1, pages)
        page = pages.get(row["page_id"])
        in_dialogue = page is not None and (page.user_message_id in inc_msgs or page.assistant_message_id in inc_msgs)
        row["left_out"] = "in the prompt as dialogue" if in_dialogue else "older dialogue, cut for the budget"
        rows.append(row)
    return rows


def trace_for_message(store, message_id: int) -> TraceData:
    msg = store.conversations.get_message(int(message_id))
    if msg is None:
        return TraceData("reply", "", message_id=message_id, note=f"Message {message_id} does not exist.")
    trace = (msg.meta or {}).get("trace")
    data = TraceData("reply", "", message_id=msg.id, conversation_id=msg.conversation_id)
    if msg.role != "assistant":
        data.note = f"Message {msg.id} is a {msg.role} message; select an assistant reply to see what it recalled."
        return data
    if not isinstance(trace, dict):
        data.note = "This reply has no retrieval trace (it was imported, or written before traces were kept)."
        return data
    data.query = trace.get("query", "")
    if trace.get("memory") == "off":
        data.note = "Memory was off for this reply (incognito conversation): nothing was recalled."
        return data
    included = trace.get("included") or {}
    data.included = included
    data.dropped = trace.get("dropped") or {}
    data.prompt_tokens = trace.get("prompt_tokens")
    data.cached_prompt_tokens = ((msg.meta or {}).get("stats") or {}).get("cached_prompt_tokens")
    data.restored_prompt_tokens = int(((msg.meta or {}).get("stats") or {}).get("restored_prompt_tokens") or 0)
    data.timings_ms = trace.get("timings_ms") or {}
    data.common_words = list(trace.get("common_words") or [])
    hits = list(trace.get("pages") or [])
    stm = list(trace.get("stm") or [])
    inc_pages = [int(p) for p in included.get("pages", [])]
    skipped = list(trace.get("skipped") or [])
    pages = _pages(store, inc_pages + [h.get("page_id") for h in hits + stm + skipped])
    rank_of = {int(h["page_id"]): i + 1 for i, h in enumerate(hits)}
    hit_of = {int(h["page_id"]): h for h in hits}
    # pages quoted by one side only (a budget of turns: the other side ranked lower)
    half = {int(k): v for k, v in (trace.get("half_pages") or {}).items()}
    for pid in inc_pages:  # prompt order (chronological), as the model read them
        hit = hit_of.get(pid) or {"page_id": pid, "score": 0.0, "reason": "(not in the ranked list)"}
        row = _row(hit, rank_of.get(pid, 0), pages)
        row["quoted"] = QUOTED.get(half.get(pid), QUOTED[None])
        if pid in half and row.get("page") is not None:
            row["text"] = _page_text(row["page"], (half[pid],))
        data.in_prompt.append(row)
    inc_set = set(inc_pages)
    # the rule the reply was composed under; a trace from before it was stored: the current settings
    floor = (
        QuoteFloor.from_dict(trace["quote_floor"])
        if isinstance(trace.get("quote_floor"), dict)
        else QuoteFloor.from_params(store.params)
    )
    for h in hits:
        pid = int(h["page_id"])
        if pid in inc_set:
            continue
        row = _row(h, rank_of[pid], pages)
        row["left_out"] = _why_left_out(h, pages.get(pid), floor, msg, data.dropped)
        data.not_in_prompt.append(row)
    data.not_in_prompt.extend(_skipped_rows(skipped, pages))
    data.stm = _stm_rows(stm, pages, set(included.get("messages", [])))
    data.items = _items(trace, included)
    data.segments = _segments(store, trace, hits)
    _topics(store, data.in_prompt + data.not_in_prompt)
    return data


def trace_for_query(
    store, query: str, conversation_id: int | None = None, budget: RetrievalBudget | None = None
) -> TraceData:
    """Run retrieval without chatting (and without counting it as a visit)."""
    # the agent's budget: the best `recall_turns` pages, whose turns a reply's prompt quotes from
    r = store.retrieve(
        query,
        conversation_id=conversation_id,
        budget=budget or RetrievalBudget(pages=store.params.quoting.recall_turns),
        record_visits=False,
    )
    trace = r.to_trace()
    data = TraceData(
        "query",
        query,
        conversation_id=conversation_id,
        timings_ms=trace.get("timings_ms") or {},
        common_words=list(trace.get("common_words") or []),
    )
    pages = {h.page.id: h.page for h in list(r.pages) + list(r.stm) + list(r.skipped)}
    for i, h in enumerate(trace.get("pages") or []):
        row = _row(h, i + 1, pages)
        row["left_out"] = ""
        data.not_in_prompt.append(row)
    data.not_in_prompt.extend(_skipped_rows(trace.get("skipped") or [], pages))
    for i, h in enumerate(trace.get("stm") or []):
        row = _row(h, i + 1, pages)
        row["left_out"] = ""
        data.stm.append(row)
    data.items = _items(trace, None)
    data.segments = _segments(store, trace, trace.get("pages") or [])
    _topics(store, data.not_in_prompt)
    return data
