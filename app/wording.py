"""Words and figures for what the user reads, shared by the CLI and the window: counts ("1 page", "2 pages"),
a heat, the memory's parts in plain words, memory events as sentences, and why a reply recalled what it did.

The memory core names things as its papers do (STM, MTM, segments, N_visit, cos); a person reads "recent
chat", "topics", "used in 3 replies", "close in meaning". The words here are the plain ones; the core's own
stay one click away ("Details"), for whoever wants them. `INTERNAL_TERMS` lists the core's words that must
not reach a plain view (tests walk the inspector's texts for them).
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time

_IRREGULAR = {"memory": "memories", "reply": "replies", "entry": "entries"}


def count(n: int | None, noun: str, plural: str | None = None) -> str:
    """`n` with thousands separators and the noun in the number it needs."""
    n = int(n or 0)
    return f"{n:,} {noun if n == 1 else (plural or _IRREGULAR.get(noun, noun + 's'))}"


# ---------------------------------------------------------------------------------------------- the parts
# The memory's parts as a person names them (the Help page explains each: resources/help/memory.html)
TIERS = {"stm": "recent chat", "mtm": "topics", "archive": "archive"}
RECENT_CHAT, TOPICS, ARCHIVE = "Recent chat", "Topics", "Archive"
PROFILE = "What Mnemo knows about you"
TOPIC, PAGE = "topic", "page"

# the core's words that a plain view never shows (the Details view may)
INTERNAL_TERMS = ("STM", "MTM", "LPM", "τ", "N_visit", "L_interaction", "cos", "FIFO", "llm fallback", "llm_fallback")
_INTERNAL_RE = re.compile(
    "|".join(rf"(?<![\w]){re.escape(t)}(?![\w])" if t[0].isalnum() else re.escape(t) for t in INTERNAL_TERMS)
)


def internal_terms_in(text: str) -> list[str]:
    """The internal terms (INTERNAL_TERMS) that `text` uses: "cos" the word, not "cost" or "close"."""
    return _INTERNAL_RE.findall(text or "")


def tier(name: str | None) -> str:
    """A tier's plain name ("recent chat", "topics", "archive")."""
    return TIERS.get(name or "", name or "—")


def when(ts: float | None, now: float | None = None) -> str:
    """When something happened, as a chat says it: "14:05" today, "Yesterday 14:05", "3 May 14:05" this
    year, "3 May 2023" before; "" when not known."""
    if not ts:
        return ""
    try:
        d = dt.datetime.fromtimestamp(float(ts))
    except (OverflowError, OSError, ValueError):
        return ""
    today = dt.datetime.fromtimestamp(now if now is not None else time.time()).date()
    hm = d.strftime("%H:%M")
    if d.date() == today:
        return hm
    if d.date() == today - dt.timedelta(days=1):
        return f"Yesterday {hm}"
    if d.year == today.year:
        return f"{d.day} {d.strftime('%b')} {hm}"
    return f"{d.day} {d.strftime('%b %Y')}"


# ---------------------------------------------------------------------------------------------- heat
def heat(value: float) -> str:
    """A segment's heat to two decimals, cut rather than rounded: a heat of 4.999 against τ = 5 is not
    promoted, and "5.00" would say it had reached τ."""
    return f"{math.floor(float(value) * 100 + 1e-9) / 100:.2f}"


def heat_gap(to_go: float) -> str:
    """How far a heat is below τ ("0.35"), never "0.00" for a heat just short of it."""
    return f"{to_go:.2f}" if to_go >= 0.01 else "less than 0.01"


def heat_in_words(n_visit: int, l_interaction: int, heat_value: float, tau: float, promotions: int = 0) -> str:
    """What a topic's heat means for the user: "Used in 3 recent replies, 2 new messages — will be added to
    your profile soon". A topic whose heat reaches the threshold is read for facts about the user."""
    used = "Not used in a reply yet" if not n_visit else f"Used in {count(n_visit, 'reply')}"
    new = "no new messages" if not l_interaction else count(l_interaction, "new message")
    if not l_interaction:
        outlook = (
            f"read for your profile {count(promotions, 'time')}; nothing new to read since"
            if promotions
            else "nothing new to read for your profile"
        )
    elif heat_value >= tau:
        outlook = "its new messages will be read for your profile soon"
    elif tau > 0 and heat_value >= 0.6 * tau:
        outlook = "read for your profile once it is a little busier"
    else:
        outlook = "not busy enough yet to be read for your profile"
    return f"{used}, {new} — {outlook}"


# ---------------------------------------------------------------------------------------------- jobs
# what each kind of memory job does, for a user wondering what "3 pending" is waiting on
_JOB_WORK = {
    "add_page": lambda n: f"{count(n, 'reply')} to save as memory pages",
    "promote_segment": lambda n: f"{count(n, 'busy topic')} to learn about you from, when the chat model is free",
    "title_segment": lambda n: f"{count(n, 'topic')} to name, when the chat model is free",
    "index_tokens": lambda n: "indexing the words of older pages",
    "read_in_context": lambda n: "re-reading older pages, each after the one before it",
    "reembed": lambda n: "re-reading memory with the new embedding model",
}


def pending_work(by_kind: dict[str, int] | None) -> str:
    """The memory's queued jobs (`MemoryStore.stats()["pending_by_kind"]`) in words, most numerous first."""
    parts = []
    for kind, n in sorted((by_kind or {}).items(), key=lambda kv: (-kv[1], kv[0])):
        if n:
            parts.append(_JOB_WORK[kind](n) if kind in _JOB_WORK else f"{count(n, 'memory update')} ({kind})")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------- events
def item_name(kind: str | None, iid: int | None) -> str:
    """An item as a person names it: "fact 3", "topic 12", "page" (no id)."""
    name = {"knowledge": "fact", "segment": "topic", "conversation": "chat"}.get(kind or "", kind or "item")
    return f"{name} {iid}" if iid is not None else name


def _pages(d: dict) -> str:
    pages = d.get("pages")
    return f" ({count(len(pages), 'page')})" if isinstance(pages, list) and pages else ""


def _event_page_moved(item: str, d: dict) -> str:
    topic = f"topic {d.get('segment_id')}"
    if d.get("how") == "created":
        return f"{item.capitalize()} started a new topic ({topic})"
    if d.get("how") == "continued":
        return f"{item.capitalize()} joined {topic}, the conversation it continues"
    return f"{item.capitalize()} joined {topic}, a related topic"


def _event_promoted(item: str, d: dict) -> str:
    learned = []
    if d.get("knowledge"):
        learned.append(count(d["knowledge"], "fact"))
    if d.get("traits"):
        learned.append(count(d["traits"], "trait"))
    if not learned:
        return f"Read {item} for your profile: nothing new"
    return f"Learned {' and '.join(learned)} about you from {item}"


def _event_knowledge_added(item: str, d: dict) -> str:
    return (
        f"New fact about you ({item})" if d.get("owner", "user") == "user" else f"New note on what Mnemo said ({item})"
    )


def _event_edited(item: str, d: dict) -> str:
    if "from_version" in d:
        return f"{item.capitalize()} went back to its earlier version (what changed it was forgotten)"
    return f"You edited {item}"


def _event_forgotten(item: str, d: dict, kind: str | None) -> str:
    if kind == "conversation":
        n = d.get("pages")
        return "Forgot what Mnemo learned from a chat" + (f" ({count(n, 'page')})" if isinstance(n, int) else "")
    return f"{item.capitalize()} removed from memory"


_EVENTS = {
    "page_added": lambda item, d: f"{item.capitalize()} saved from your chat (recent chat)",
    "page_moved": _event_page_moved,
    "segment_created": lambda item, d: f"New {item}",
    "segment_archived": lambda item, d: f"{item.capitalize()} moved to the archive: the least used topic",
    "segment_restored": lambda item, d: f"{item.capitalize()} brought back from the archive",
    "segment_visited": lambda item, d: f"{item.capitalize()} used in a reply",
    "promoted": _event_promoted,
    "llm_fallback": lambda item, d: (
        f"The chat model's reading of {item} could not be used: Mnemo kept facts from your own words instead"
    ),
    "knowledge_added": _event_knowledge_added,
    "knowledge_updated": lambda item, d: f"{item.capitalize()} updated with something newer{_pages(d)}",
    "knowledge_confirmed": lambda item, d: f"{item.capitalize()} said again: now more certain",
    "trait_added": lambda item, d: f"New trait about you ({item})",
    "trait_updated": lambda item, d: f"{item.capitalize()} updated with something newer{_pages(d)}",
    "trait_confirmed": lambda item, d: f"{item.capitalize()} said again: now more certain",
    "trait_archived": lambda item, d: f"{item.capitalize()} set aside",
    "knowledge_archived": lambda item, d: f"{item.capitalize()} set aside",
    "trait_active": lambda item, d: f"{item.capitalize()} back in use",
    "knowledge_active": lambda item, d: f"{item.capitalize()} back in use",
    "update_skipped": lambda item, d: f"{item.capitalize()} is pinned: a different version was not applied",
    "edited": _event_edited,
    "pinned": lambda item, d: f"You pinned {item}",
    "unpinned": lambda item, d: f"You unpinned {item}",
    "wiped": lambda item, d: "All memory wiped",
    "paused": lambda item, d: "Memory paused: nothing new is remembered",
    "resumed": lambda item, d: "Memory resumed",
    "job_failed": lambda item, d: "A memory update failed; it is tried again later",
    "embed_model_changed": lambda item, d: "New embedding model: memory is re-read with it in the background",
    "reembedded": lambda item, d: (
        "Memory re-read" + (f" ({count(d['pages'], 'page')})" if isinstance(d.get("pages"), int) else "")
    ),
}


def event_sentence(
    kind: str, item_kind: str | None, item_id: int | None, detail: dict | None, summary: str = ""
) -> str:
    """A memory event (memory_core.types.Event) as a sentence a person reads: "Learned 2 facts about you
    from topic 3", "Page 224 removed from memory" (its stored summary is the technical one)."""
    d = detail or {}
    item = item_name(item_kind, item_id)
    if kind == "forgotten":
        return _event_forgotten(item, d, item_kind)
    make = _EVENTS.get(kind)
    if make is not None:
        return make(item, d)
    said = plain_words(summary or kind.replace("_", " "))
    return said[:1].upper() + said[1:]


def event_kind(kind: str) -> str:
    """The event's kind as a short label ("learned", "forgotten") for a narrow column."""
    return {
        "page_added": "saved",
        "page_moved": "sorted",
        "segment_created": "new topic",
        "segment_archived": "archived",
        "segment_restored": "restored",
        "segment_visited": "used",
        "promoted": "learned",
        "llm_fallback": "learned",
    }.get(kind, kind.replace("_", " ").replace("knowledge", "fact").replace("segment", "topic"))


# ---------------------------------------------------------------------------------------------- words
_WORDS = [  # the core's words in a sentence it wrote (an event summary, a reason), as a person says them
    (re.compile(r"\bshort-term memory\b", re.I), "recent chat"),
    (re.compile(r"\bmid-term memory\b", re.I), "topics"),
    (re.compile(r"\blong-term (?:memory|persona)\b", re.I), "your profile"),
    (re.compile(r"\bpersona\b", re.I), "profile"),
    (re.compile(r"\bsegments\b"), "topics"),
    (re.compile(r"\bsegment\b"), "topic"),
    (re.compile(r"\bSegment\b"), "Topic"),
    (re.compile(r"\bknowledge\b"), "fact"),
    (re.compile(r"\bSTM\b"), "recent chat"),
    (re.compile(r"\bMTM\b"), "topics"),
    (re.compile(r"\bLPM\b"), "your profile"),
    (re.compile(r"\bFIFO\b"), "oldest first"),
    (re.compile(r"\bN_visit\b"), "uses"),
    (re.compile(r"\bL_interaction\b"), "new messages"),
    (re.compile(r"\bllm[ _]fallback\b", re.I), "Mnemo's own reading"),
    (re.compile(r"\s*\(cos -?[\d.]+[^)]*\)"), ""),
    (re.compile(r"\bcos -?[\d.]+"), "meaning match"),
    (re.compile(r"\bcos\b"), "meaning"),
    (re.compile(r"\s*(?:heat )?[≥<>=]+ ?τ(?: ?= ?[\d.]+)?"), ""),
    (re.compile(r"τ"), "the threshold"),
]


def plain_words(text: str) -> str:
    """A sentence the memory core wrote, with its words made plain (a fallback for one this module has no
    sentence of its own for)."""
    for pattern, plain in _WORDS:
        text = pattern.sub(plain, text)
    return text


def meaning(cos: float | None) -> str:
    """How close in meaning a cosine of the query's and a page's vectors says they are."""
    if cos is None:
        return "meaning not compared"
    if cos >= 0.6:
        return "very close in meaning"
    if cos >= 0.45:
        return "close in meaning"
    if cos >= 0.3:
        return "somewhat close in meaning"
    return "weak match in meaning"


def _word_match(score: float) -> str:
    return (
        "your words match closely"
        if score >= 0.7
        else "your words match in part"
        if score >= 0.5
        else "your words match weakly"
    )


def _matched(words: str | None) -> str:
    found = re.findall(r"'([^']+)'", words or "")
    if not found:
        return "Matched your words"
    return f"Matched the word{'s' if len(found) > 1 else ''} " + ", ".join(f"“{w}”" for w in found)


_REASONS: list[tuple[re.Pattern, object]] = [
    (
        re.compile(r"short-term memory \(recent dialogue of this conversation\)"),
        "From the recent messages of this chat",
    ),
    (re.compile(r"cos (-?[\d.]+)(?: \(([+-][\d.]+) over the usual\))?"), lambda m: meaning(float(m[1])).capitalize()),
    (re.compile(r"similar \(cos (-?[\d.]+)\)"), lambda m: meaning(float(m[1])).capitalize()),
    (re.compile(r"keyword match(?: (.*))?"), lambda m: _matched(m[1])),
    (re.compile(r"word by word (-?[\d.]+)"), lambda m: _word_match(float(m[1])).capitalize()),
    (re.compile(r"date named in the question"), "From the date you named"),
    (re.compile(r"follows page (\d+)"), lambda m: f"The reply after page {m[1]}, which matched"),
    (re.compile(r"precedes page (\d+)"), lambda m: f"The message before page {m[1]}, which matched"),
    (re.compile(r"from the archive"), "From the archive"),
    (re.compile(r"said earlier in this conversation"), "Said earlier in this chat"),
    (re.compile(r"a question asked in a chat.*"), "You asked this in a chat before: counted lower"),
    (re.compile(r"meaning not compared yet.*"), "Meaning not compared yet (memory is being re-read)"),
    (
        re.compile(r"the same question, asked before: its reply is not evidence"),
        "You asked the same question before: that reply is not evidence",
    ),
    (re.compile(r"pinned persona trait"), "Part of your profile (pinned)"),
    (re.compile(r"persona trait \(confidence [\d.]+\)"), "Part of your profile"),
    (re.compile(r"pinned"), "Pinned by you"),
    (
        re.compile(r"segment (\d+) \(cos (-?[\d.]+)(?:, keywords ([\d.]+))?\)"),
        lambda m: f"Topic {m[1]}: {meaning(float(m[2]))}" + (", shares words" if m[3] else ""),
    ),
]


def _reason_part(part: str) -> str:
    part = part.strip()
    for pattern, plain in _REASONS:
        m = pattern.fullmatch(part)
        if m is not None:
            said = plain(m) if callable(plain) else str(plain)
            return said if said.startswith("Topic") else said[:1].lower() + said[1:]
    return plain_words(part)


def plain_reason(reason: str | None) -> str:
    """Why a page, fact or trait was recalled (the ranking's "cos 0.05 (+0.04 over the usual) + word by
    word 0.60 + keyword match 'live'") in words: "Weak match in meaning; your words match in part; matched
    the word “live”"."""
    parts = [p for p in (reason or "").split(" + ") if p.strip()]
    said = "; ".join(dict.fromkeys(o for o in (_reason_part(p) for p in parts) if o))
    return said[:1].upper() + said[1:] if said else "—"


_LEFT_OUT = [
    (re.compile(r"scored .*under the quoting floor.*does not stand out.*"), "Too weak a match to quote"),
    (
        re.compile(r"scored .*over the quoting floor.*too far from the message.*"),
        "Matched words, but its meaning is too far from your message",
    ),
    (re.compile(r"scored .*under the quoting floor.*"), "Too weak a match to quote"),
    (re.compile(r"already in the dialogue shown to the model"), "Already in the chat above your message"),
    (re.compile(r"ranked for the page next to it.*"), "Came up only because the page next to it matched"),
    (re.compile(r"did not fit the prompt's budget.*"), "No room left in the prompt"),
    (re.compile(r"in the prompt as dialogue"), "In the prompt, as recent chat"),
    (re.compile(r"older dialogue, cut for the budget"), "Older chat, left out for room"),
    (re.compile(r"not used"), "Not needed"),
]


def plain_left_out(why: str | None) -> str:
    """Why a recalled page was not quoted in the prompt, in words (the trace keeps the rule's own)."""
    why = (why or "").strip()
    if not why:
        return ""
    for pattern, plain in _LEFT_OUT:
        if pattern.fullmatch(why):
            return plain
    return plain_reason(why)


# ---------------------------------------------------------------------------------------------- origins
def origin(model: str | None, source_pages: int = 0, chat: str | None = None) -> str:
    """Where a fact or trait came from, for the Saved memories list: "You added this", "Learned from your chat
    “Trip”", "From ChatGPT custom instructions", "Added via MCP: Cursor"."""
    model = (model or "").strip()
    if source_pages:
        return f"Learned from your chat “{chat}”" if chat else "Learned from your chats"
    if model in ("", "user"):
        return "You added this"
    if model.startswith("via "):
        return f"Added {model}"
    return f"From {model}"
