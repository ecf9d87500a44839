"""Telling Mnemo something to remember, directly: a fact about the user or the assistant, or a trait.

The persona otherwise grows only from conversations (a segment is analysed when it gets hot), which
can take many turns; a user who wants "I'm allergic to peanuts" kept should be able to say so once.
The same path serves a chat message that asks ("Remember that …", "…, so please remember that.":
`remember_request`, used by the agent), the inspector's **Add…**, `mnemo memory add` and `/remember` in `mnemo chat`.
What the user writes goes through memory_core's usual rules: a fact that repeats one already held
confirms it, one close to an earlier fact (a new city, a new job) updates it and keeps the old text
as a version, and a pinned item is never changed. `Remembered.describe()` says which happened.

And the other way: a message that opens "Forget that …" (`forget_request`) forgets the user's facts
that say it and the pages that hold it (`forget_statement`), so it can be undone in the words it was
said in, without the inspector.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.wording import count

if TYPE_CHECKING:
    from memory_core import MemoryStore

OWNERS = ("user", "assistant")


def _request(verbs: str, joiners: str) -> re.Pattern:
    """A message that opens by asking something of Mnemo: a greeting, "please" or "can you" may come
    first (`ask`), then one of `verbs`, then one of `joiners` ("that", ":"), then what it asks about (`rest`)."""
    return re.compile(
        r"^\s*(?:(?:hey|hi|ok|okay)\s+mnemo\s*[,:!.]?\s*)?(?:please\s*,?\s*)?"
        r"(?P<ask>(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
        rf"(?:{verbs})\b\s*(?:{joiners})?\s*(?P<rest>.+)$",
        re.IGNORECASE | re.DOTALL,
    )


# "Remember that I'm vegetarian.", "Please don't forget: my locker code is 4312", "Can you keep in mind that
# I have two kids?" — a message that opens by asking to be remembered
_REQUEST = _request(
    r"remember|don'?t\s+forget|do\s+not\s+forget|keep\s+in\s+mind|make\s+a\s+note", r",|:|-|that\b|this\s*:"
)
# what follows "remember" that is not a fact: a question about the past ("remember when we…?"), a
# reminder ("don't forget to call Sam": Mnemo does not schedule), or a pronoun alone ("remember me?")
_NOT_A_FACT = re.compile(
    r"^(?:when|what|who|whom|where|why|how|if|whether|to|me|us|it|this|that|them|him|her)\b"
    r"(?!\s+(?:is|are|was|were|has|have|had)\b)",
    re.IGNORECASE,
)
_POLITE_END = re.compile(r"[\s,]*(?:please|thanks|thank\s+you|for\s+me|ok|okay)?[\s,.!?]*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
MAX_FACT_CHARS = 300


def _first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0].split("\n\n", 1)[0].strip()


def _bare(sentence: str) -> str:
    """Without a polite ending ("…, thanks!") or quotes around it."""
    return _POLITE_END.sub("", sentence).strip(" \t\n\"'“”‘’")


# "I'm allergic to peanuts, so please remember that.", "My locker code is 4312. Don't forget it!",
# "I have two kids - keep that in mind" — the request comes last and points back at what was said
# before it. It must follow a clause boundary (punctuation, or "so"/"and"), so "I want you to remember
# that" asks nothing; "Remember that?" alone asks whether Mnemo recalls, "Can you remember that?" asks it to.
_TRAILING = re.compile(
    r"^(?P<fact>.*?\S)\s*(?:[.!;:,(\u2013\u2014-]+\s*(?:(?:so|and)\s+)?|\s+(?:so|and)\s+)"
    r"(?:(?:hey|ok|okay)\s+mnemo\s*,?\s*)?(?:please\s*,?\s*)?"
    r"(?P<ask>(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:(?:remember|don'?t\s+forget|do\s+not\s+forget)\s+(?:it|that|this)"
    r"|(?:keep|bear)\s+(?:it|that|this)\s+in\s+mind"
    r"|(?:make\s+a\s+note|take\s+note)\s+of\s+(?:it|that|this)"
    r"|(?:note|write|jot)\s+(?:it|that|this)\s+down)\b"
    r"(?:\s*,?\s*(?:please|thanks|thank\s+you|for\s+me|for\s+later|ok|okay|mnemo))*"
    r"(?P<end>[\s.!?)]*)$",
    re.IGNORECASE | re.DOTALL,
)

# words that lead into a fact without being part of it: "By the way, my son is called Leo"
_LEAD_IN = re.compile(
    r"^(?:(?:by\s+the\s+way|btw|fyi|just\s+so\s+you\s+know|oh|also|and|so|anyway|ok|okay|well)"
    r"\b\s*[,:]?\s*)+",
    re.IGNORECASE,
)


def _trailing_request(message: str) -> str | None:
    """The fact before a request that ends the message ("I'm vegetarian, so remember that." → "I'm
    vegetarian"): everything said before it, as long as that is one fact's length and not a question,
    less a short opening sentence ("Thanks!", "Hi Mnemo.")."""
    m = _TRAILING.match(message or "")
    if m is None or ("?" in m.group("end") and not m.group("ask")):
        return None
    sentences = _SENTENCE_END.split(m.group("fact").strip())
    while len(sentences) > 1 and len(sentences[0].split()) < 3:  # "Thanks! My son is called Leo, …"
        sentences.pop(0)
    fact = _bare(_LEAD_IN.sub("", " ".join(sentences)))
    if not fact or fact.endswith("?") or _NOT_A_FACT.match(fact) or _REQUEST.match(fact):
        return None
    if len(fact.split()) < 2 or len(fact) > MAX_FACT_CHARS:
        return None
    return fact


def _opening_request(text: str) -> str | None:
    """The first sentence after a request that opens `text` ("Remember that I'm vegetarian. …")."""
    m = _REQUEST.match(text)
    if m is None:
        return None
    sentence = _first_sentence(m.group("rest"))
    if sentence.endswith("?") and not m.group("ask"):
        return None  # "Remember that epic block in game 7?" recalls; "Can you remember that …?" asks
    fact = _bare(sentence)
    if _NOT_A_FACT.match(fact) or len(fact.split()) < 2 or len(fact) > MAX_FACT_CHARS:
        return None
    return fact


def remember_request(message: str) -> str | None:
    """The fact a chat message asks Mnemo to remember ("Remember that I'm vegetarian." → "I'm
    vegetarian"), or None when the message asks no such thing. The request may open the message
    (its first sentence is kept: "Remember that I'm vegetarian. What should I cook?" keeps "I'm
    vegetarian" and the question is answered as usual), open its last sentence ("What should I cook?
    Remember that I'm vegetarian."), or end it pointing back ("I'm vegetarian, so please remember
    that."). Only a short message is read beyond its opening: a long paste that happens to end in
    "Remember that …" is not a request to Mnemo."""
    message = (message or "").strip()
    fact = _opening_request(message)
    if fact is not None or len(message) > 2 * MAX_FACT_CHARS:
        return fact
    sentences = _SENTENCE_END.split(message)
    if len(sentences) > 1:
        fact = _opening_request(sentences[-1])
        if fact is not None:
            return fact
    return _trailing_request(message)


@dataclass
class Remembered:
    kind: str  # "knowledge" | "trait"
    id: int
    text: str  # the item as it now reads ("dimension: value" for a trait)
    version: int
    outcome: str  # "added" | "confirmed" | "updated" | "kept" (pinned: not changed)
    before: str | None = None  # the previous text, when an earlier item was updated

    def describe(self) -> str:
        what = f"{'fact' if self.kind == 'knowledge' else 'trait'} {self.id}"
        if self.outcome == "added":
            return f"Remembered as {what}: {self.text}"
        if self.outcome == "confirmed":
            return f"Already remembered as {what} (now v{self.version}): {self.text}"
        if self.outcome == "updated":
            return f"Updated {what} (v{self.version}): {self.text} — it was: {self.before}"
        return f"{what.capitalize()} is pinned and was not changed: {self.text}"


def footnote(kept: dict) -> str:
    """The few words under a reply whose message asked to remember something (the chat view's link,
    `mnemo chat`): `kept` is the dict the agent stores in the reply's stats."""
    what = f"{'fact' if kept.get('kind') == 'knowledge' else 'trait'} {kept.get('id')}"
    outcome = kept.get("outcome")
    phrases = {
        "confirmed": f"already remembered ({what})",
        "updated": f"updated {what}",
        "kept": f"{what} is pinned, not changed",
    }
    phrase = phrases.get(outcome) if isinstance(outcome, str) else None
    return phrase or f"remembered as {what}"


def _outcome(store: MemoryStore, kind: str, item_id: int, since_event: int) -> Remembered:
    """What adding did, from the event the store logged for it (added, confirmed, updated, or the
    update skipped because the item is pinned)."""
    kinds = [f"{kind}_added", f"{kind}_confirmed", f"{kind}_updated", "update_skipped"]
    events = store.event_log.events(since_id=since_event, limit=10, kinds=kinds, item_kind=kind, item_id=item_id)
    versions = store.persona.item_versions(kind, item_id)
    cur = versions[-1]
    text = f"{cur.detail.get('dimension')}: {cur.text}" if kind == "trait" else cur.text
    what = events[-1].kind.removeprefix(f"{kind}_") if events else "confirmed"
    if what == "update_skipped":
        return Remembered(kind, item_id, text, cur.version, "kept")
    before = versions[-2].text if what == "updated" and len(versions) > 1 else None
    return Remembered(kind, item_id, text, cur.version, what, before)


# "Forget that my locker code is 4312", "Please forget what I said about my sister", "Can you stop
# remembering that I smoke?" — a message that opens by asking for something to be forgotten
_FORGET = _request(
    r"forget|stop\s+remembering|don'?t\s+remember|do\s+not\s+remember",
    r",|:|-|that\b|about\b|what\s+i\s+(?:said|told\s+you|wrote)\s+about\b",
)
# what follows "forget" that names nothing to look for: "forget it", "forget about it", "forget
# everything" (wiping memory is the inspector's, behind a typed confirmation), "forget to …", "forget me"
_NOTHING_NAMED = re.compile(
    r"^(?:it|this|that|them|him|her|me|us|everything|all|anything|to|about\s+it|"
    r"what\s+i\s+(?:just\s+)?said)\b[\s.!?]*$|^to\b",
    re.IGNORECASE,
)


def forget_request(message: str) -> str | None:
    """What a chat message asks Mnemo to forget ("Forget that my locker code is 4312." → "my locker code
    is 4312"), or None when it does not open with such a request (first sentence only, as for
    `remember_request`). "I forgot my keys" or "Don't forget to…" are not requests."""
    m = _FORGET.match(message or "")
    return None if m is None else statement_to_forget(m.group("rest"))


def statement_to_forget(what: str) -> str | None:
    """What to look for when asked to forget `what` (its first sentence, without a polite ending), or
    None when it names nothing to look for: "it", "everything" (wiping memory is the inspector's,
    behind a typed confirmation), one word, or more than a fact's length. The rule of "Forget that …"
    in chat, and of the MCP server's forget tool."""
    what = _bare(_first_sentence(what or ""))
    if _NOTHING_NAMED.match(what) or len(what.split()) < 2 or len(what) > MAX_FACT_CHARS:
        return None
    return what


@dataclass
class Forgot:
    """What a request to forget took: facts (id, text), the pages that said it, and how many replies
    that said it were still waiting to become pages."""

    what: str
    facts: list[tuple[int, str]]
    pages: list[int]
    waiting: int = 0

    def to_stats(self) -> dict:
        """What the reply keeps of it: the facts' ids, never their text (it was forgotten)."""
        return {"what": self.what, "facts": [[kid] for kid, _ in self.facts], "pages": len(self.pages) + self.waiting}


def forget_note(forgot: dict) -> str:
    """The few words under a reply whose message asked to forget something (`forgot`: the dict the
    agent stores in the reply's stats)."""
    facts, pages = forgot.get("facts") or [], forgot.get("pages") or 0
    if not facts and not pages:
        return "nothing in memory said it"
    bits = [count(len(facts), "fact")] if facts else []
    if pages:
        bits.append(count(pages, "page"))
    return "forgot " + " and ".join(bits)


def forget_statement(store: MemoryStore, what: str, *, spaces: frozenset[int] | None = None) -> Forgot:
    """Forget the user's facts that say `what` and the pages that hold every content word of it
    (`store.retrieval.memory_saying`), and the replies holding them still waiting to become pages, in one
    transaction. `spaces`: only what is in these memory spaces (the spaces the chat asking reads, so
    "forget that …" in a Work chat leaves the same words in Personal); None: every space."""
    with store.transaction():
        facts, pages = store.retrieval.memory_saying(what, spaces=spaces)
        store.curation.forget("knowledge", [k.id for k, _ in facts])
        store.curation.forget("page", pages)
        waiting = store.curation.forget_waiting_pages(what)  # not yet a page: it would come back as one
    return Forgot(what, [(k.id, k.text) for k, _ in facts], pages, waiting)


def remember_fact(
    store: MemoryStore,
    text: str,
    *,
    about: str = "user",
    pin: bool = False,
    source: str = "user",
    space_id: int | None = None,
) -> Remembered:
    """Keep `text` as a fact about the user (or the assistant). `source` says who wrote it ("user": the
    user in Mnemo; "via MCP: Claude Desktop": a tool of theirs), kept as the fact's origin and shown in
    the inspector. `space_id`: the memory space it goes to (the chat's, when asked in a chat; default
    Personal); it confirms or updates only facts of that space. Raises ValueError for an empty fact."""
    if about not in OWNERS:
        raise ValueError("a fact is about 'user' or 'assistant'")
    since = store.event_log.latest_event_id()
    kid = store.persona.add_knowledge(about, text, pinned=pin, source=source, space_id=space_id)
    assert kid is not None  # None only with skip_existing (the upsert logs an event naming the fact)
    return _outcome(store, "knowledge", kid, since)


def remember_trait(
    store: MemoryStore, dimension: str, value: str, *, pin: bool = False, space_id: int | None = None
) -> Remembered:
    """Keep a trait (`likes: jazz`, `occupation: nurse`), in space `space_id` as for `remember_fact`.
    Raises ValueError when either part is empty."""
    since = store.event_log.latest_event_id()
    tid = store.persona.add_trait(dimension, value, pinned=pin, space_id=space_id)
    assert tid is not None  # None only with skip_existing (a full persona raises)
    return _outcome(store, "trait", tid, since)
