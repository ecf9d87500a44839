"""Compose the chat prompt from memory within a token budget.

Order, most stable first, so llama.cpp can reuse the KV cache of the longest common
prefix between turns (docs/architecture.md, "Memory kinds: plaintext and activation"): system prompt and the persona
traits (change only when memory is promoted; sorted) → recent dialogue (only grows) →
what was recalled for this message (knowledge and pages, which change with every
question; a system message of its own) → the new message.

The first design put the recalled pages before the dialogue; but then each question's recall
invalidates the cached dialogue behind it, and the whole conversation is processed again
at every turn. On a chat of 8 long exchanges (~1,650-token prompts) with the bundled model,
the first token comes after 3.6 s instead of 8.8 s (`tests/bench/prompt_cache.py`); LoCoMo
QA quality is the same (docs/decisions/0004-recall-after-the-dialogue.md).
Chat templates that accept a system message only at the start get that first layout
(`recall_at_end=False`; the agent falls back by itself).
Nothing time-of-now is put in the stable part. Memory is quoted as data inside <memory> tags: what
was recalled cannot close them (`quote_as_data`), and the chat backend tokenises every message's text
as plain text, so a remembered `<|im_start|>system` is words, not a turn (models.prompt_tokens).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Protocol

from app.chat import prompts
from memory_core.text import content_words, stem

if TYPE_CHECKING:
    from memory_core.types import KnowledgeHit, MemoryParams, Page, PageHit, Retrieval, TraitHit

CountFn = Callable[[str], int]
QUERY_TRUNCATION_NOTE = "\n[… message truncated to fit the model's context …]\n"
MEMORY_TAGS = ("<memory>", "</memory>")  # resources/prompts/memory_context.txt wraps recalled memory in them
# the "<" of anything in recalled text that reads as one of those tags ("</memory>", "< MEMORY >", "</memory")
_TAG_LOOKALIKE = re.compile(r"<(?=\s*/?\s*memory\b)", re.IGNORECASE)
QUOTED_TAG_OPENER = "\u2039"  # "‹": "‹/memory>" reads the same to a person and closes nothing
# how recalled memory is laid out for the model (app.chat.quoted_turns keeps this notation out of replies)
ROLE_LABELS = ("User:", "Assistant:")  # the two sides of a quoted page
FACTS_HEADING = "Known facts:"  # its lines: "- (user) …", "- (assistant) …"
PAGES_HEADING = "Earlier conversations:"  # each page: "[2023-11-15 04:48] (page 6)", then its sides
# the quoting rules that `compose_prompt(off=…)` switches off by name, so a benchmark can measure what each
# is worth (docs/decisions/0015-quoting-rules-kept-by-ablation.md):
QUOTING_RULES = (
    "score_floor",  # QuoteFloor.min_score
    "keyword_closeness",  # QuoteFloor.keyword_min_similarity: a page over the score floor must be this close
    "standout",  # QuoteFloor.min_similarity + min_standout: a page quoted for its meaning alone
    "neighbour_exemption",  # a page ranked for its dialogue neighbour needs the score floor only
    "neighbours_as_answers",  # quotable_pages: such a page quoted only as the answer to its question
    "requote_after",  # the dialogue's last exchanges' pages are not quoted again
    "sides",  # a budget of turns takes each page's better side first (Retrieval.sides); off: whole pages
    "turn_budget",  # at most `max_turns` turns quoted; off: as many as fit the tokens
)


class MarkupFilter:
    """Passes a streaming reply on without the prompt's own memory tags. The bundled model sometimes
    writes "<memory>" into its reply: as a header before its answer ("Here's the correct answer:
    <memory> My grandmother grew up in Porto."), or before a made-up block of quoted pages. Ending
    the reply at the tag lost such answers (`python -m tests.bench.reply_quality`, the same seeds: 3
    of 64 recall questions), so only the tag goes. An ending that could begin a tag ("<", "</mem")
    is held back until it is clear, so neither the window nor the terminal shows the markup."""

    def __init__(self) -> None:
        self.pending = ""  # received, not yet passed on: it may begin a tag
        self.removed = 0  # tags taken out

    def feed(self, chunk: str) -> str:
        """Add a chunk; return what can be shown now."""
        text = self.pending + chunk
        for tag in MEMORY_TAGS:
            self.removed += text.count(tag)
            text = text.replace(tag, "")
        hold = _partial_tag(text)
        self.pending = text[len(text) - hold :] if hold else ""
        return text[: len(text) - hold] if hold else text

    def rest(self) -> str:
        """At the end of the stream: what was held back (it began no tag after all)."""
        out, self.pending = self.pending, ""
        return out


def _partial_tag(text: str) -> int:
    """The length of the longest ending of `text` that begins a memory tag without completing it."""
    for n in range(min(len(text), max(map(len, MEMORY_TAGS)) - 1), 0, -1):
        if any(tag.startswith(text[-n:]) for tag in MEMORY_TAGS):
            return n
    return 0


def quote_as_data(text: str) -> str:
    """Recalled or imported text as it goes between the <memory> tags: a tag-like part of it
    ("</memory>") loses its "<", so the quote block ends only where the prompt ends it."""
    return _TAG_LOOKALIKE.sub(QUOTED_TAG_OPENER, text)


def switched_off(names: Iterable[str]) -> frozenset[str]:
    """`names` as a set of QUOTING_RULES; a name that is none of them is an error (a typo would measure nothing)."""
    off = frozenset(names)
    unknown = off - set(QUOTING_RULES)
    if unknown:
        raise ValueError(f"unknown quoting rule(s) {sorted(unknown)}; the rules: {', '.join(QUOTING_RULES)}")
    return off


@dataclass
class ComposedPrompt:
    messages: list[dict[str, str]]
    prompt_tokens: int
    budget_tokens: int
    included: dict[str, list[int]] = field(default_factory=dict)  # what went in: page/knowledge/trait/message ids
    dropped: dict[str, int] = field(default_factory=dict)  # how many of each did not fit
    query_truncated: bool = False
    # the quoted pages of which one side only went in: page id -> "user" or "assistant"
    half_pages: dict[int, str] = field(default_factory=dict)
    # the prompt's parts as the model reads them (SECTIONS order), for the window's prompt view
    sections: dict[str, str] = field(default_factory=dict)

    def half_pages_trace(self) -> dict[str, str]:
        """`half_pages` as a reply's trace keeps it (JSON: string keys)."""
        return {str(pid): side for pid, side in self.half_pages.items()}

    def section_tokens(self, count_tokens: CountFn) -> dict[str, int]:
        """Tokens of each part of the prompt (SECTIONS; the chat template's own markers not counted), as a
        reply's trace keeps them for the prompt view."""
        return {name: count_tokens(self.sections[name]) if self.sections.get(name) else 0 for name in SECTIONS}


# the parts of a prompt, as the window's prompt view names them (`ComposedPrompt.sections`)
SECTIONS = ("system", "profile", "recalled", "dialogue", "message")
INSTRUCTIONS_HEADING = "The user's custom instructions for your replies:"


def with_instructions(system: str, instructions: str) -> str:
    """The system prompt and the user's custom instructions (Settings ▸ Chat), which go with it in the
    stable, cached beginning of every prompt."""
    instructions = (instructions or "").strip()
    return f"{system}\n\n{INSTRUCTIONS_HEADING}\n{instructions}" if instructions else system


def format_date(ts: float | None) -> str:
    if not ts:
        return "unknown date"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def _page_header(page: Page) -> str:
    return f"[{format_date(page.timestamp)}] (page {page.id})"


def _side_line(page: Page, side: str) -> str:
    """A quoted side of a page ("user" or "assistant"), or "" when that side is empty."""
    text = (page.user_text if side == "user" else page.assistant_text) or ""
    return f"{ROLE_LABELS[0 if side == 'user' else 1]} {quote_as_data(text.strip())}" if text.strip() else ""


def _trait_line(hit: TraitHit) -> str:
    return f"- {quote_as_data(hit.item.dimension)}: {quote_as_data(hit.item.value)}"


def _fact_line(hit: KnowledgeHit) -> str:
    return f"- ({hit.item.owner}) {quote_as_data(hit.item.text)}"


def _page_block(page: Page, sides: Sequence[str] = ("user", "assistant")) -> str:
    """A quoted page: its date and id, then the `sides` quoted of it (user side first)."""
    lines = [_page_header(page)] + [_side_line(page, s) for s in ("user", "assistant") if s in sides]
    return "\n".join(line for line in lines if line)


def _side_units(retrieval: Retrieval | None, pages: list[PageHit]) -> list[tuple[PageHit, tuple[str, ...]]]:
    """The quotable pages' turns in the order a budget of turns takes them: (hit, sides) pairs from the
    ranking of sides (`Retrieval.sides`: a page's better side first, its other side lower); a page the
    ranking did not split, or a retrieval without sides, is one unit of both."""
    by_id = {h.page.id: h for h in pages}
    units: list[tuple[PageHit, tuple[str, ...]]] = []
    seen: set[int] = set()
    for u in retrieval.sides if retrieval is not None else []:
        h = by_id.get(u.hit.page.id)
        if h is not None:
            units.append((h, ("user", "assistant") if u.side == "page" else (u.side,)))
            seen.add(h.page.id)
    units += [(h, ("user", "assistant")) for h in pages if h.page.id not in seen]
    return units


def _truncate_middle(text: str, count: CountFn, max_tokens: int) -> str:
    """Cut the middle of `text` until it fits `max_tokens` (keeps its start and end)."""
    if count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    best = text[: max(1, max_tokens)]
    while lo < hi:  # binary search on the kept length
        mid = (lo + hi + 1) // 2
        half = mid // 2
        candidate = text[:half] + QUERY_TRUNCATION_NOTE + text[len(text) - (mid - half) :]
        if count(candidate) <= max_tokens:
            best, lo = candidate, mid
        else:
            hi = mid - 1
    return best


def _asks(page: Page) -> bool:
    """The page's last words are a question ("Guess which team I signed with!" / "Which team?")."""
    last = (page.assistant_text or page.user_text or "").rstrip()
    return last.endswith("?")


class RankedPage(Protocol):
    """What `QuoteFloor` reads of a recalled page: a `PageHit`, or one rebuilt from a reply's trace
    (ui.inspector.tracing)."""

    @property
    def score(self) -> float: ...
    @property
    def match_score(self) -> float | None: ...
    @property
    def similarity(self) -> float | None: ...
    @property
    def standout(self) -> float | None: ...
    @property
    def inherited_from(self) -> int | None: ...


@dataclass(frozen=True)
class QuoteFloor:
    """Which recalled pages are worth quoting at all, whatever the room (MemoryParams.recall_*).

    The ranking's score adds a cosine and a keyword match; its floor (`min_score`) was set on LoCoMo,
    where the speakers' names in every message lift every cosine. In a person's own chats the page
    that answers a reworded question often shares no word with it and scores its cosine alone
    ("What is the name of my dog?" / "I adopted a beagle called Pepper": 0.47 in a small memory,
    0.33 with a wordy reply), under the floor; while a page with one rare shared word cleared it
    ("What game do I play at night?" / "…learning to play the violin", cos 0.07). So a page is
    quoted when its meaning stands out (cosine ≥ `min_similarity` and ≥ `min_standout` above the
    usual cosine of the memory's other pages, `PageHit.standout`), or when it clears `min_score` and is
    at least `keyword_min_similarity` close.
    A page ranked for its dialogue neighbour (it has no match of its own) needs `min_score` only.
    Why: docs/decisions/0011-quote-floor-by-standout.md.
    """

    min_score: float = float("-inf")
    keyword_min_similarity: float | None = None
    min_similarity: float | None = None
    min_standout: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> QuoteFloor:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

    @classmethod
    def from_params(cls, params: MemoryParams) -> QuoteFloor:
        return cls(
            params.quoting.recall_min_score,
            params.quoting.recall_keyword_min_similarity,
            params.quoting.recall_min_similarity,
            params.quoting.recall_min_standout,
        )

    def without(self, off: Iterable[str]) -> QuoteFloor:
        """This floor with the rules named in `off` (QUOTING_RULES) switched off, for the ablation."""
        off = set(off) & {"score_floor", "keyword_closeness", "standout"}
        if not off:
            return self  # the usual case (every reply's prompt): no copy
        return replace(
            self,
            min_score=float("-inf") if "score_floor" in off else self.min_score,
            keyword_min_similarity=None if "keyword_closeness" in off else self.keyword_min_similarity,
            min_similarity=None if "standout" in off else self.min_similarity,
            min_standout=None if "standout" in off else self.min_standout,
        )

    def admits(self, hit: RankedPage, *, exempt_neighbours: bool = True) -> bool:
        return self.refusal(hit, exempt_neighbours=exempt_neighbours) is None

    def refusal(self, hit: RankedPage, *, exempt_neighbours: bool = True) -> str | None:
        """Why `hit` is not quoted, in words for the trace; None when it is admitted. `exempt_neighbours`
        False judges a page ranked for its neighbour by its own match too (the ablation)."""
        sim, standout = hit.similarity, hit.standout
        # the floor reads the score without the word-by-word match (PageHit.match_score)
        score = hit.score if hit.match_score is None else hit.match_score
        if sim is None or (exempt_neighbours and hit.inherited_from is not None):
            if score >= self.min_score:
                return None
            return f"scored {score:.2f}, under the quoting floor of {self.min_score:g}"
        if (
            self.min_similarity is not None
            and self.min_standout is not None
            and standout is not None
            and sim >= self.min_similarity
            and standout >= self.min_standout
        ):
            return None
        if score >= self.min_score:
            if self.keyword_min_similarity is None or sim >= self.keyword_min_similarity:
                return None
            return (
                f"scored {score:.2f}, over the quoting floor of {self.min_score:g} (words, date or segment), "
                f"but its meaning is too far from the message (cos {sim:.2f} < {self.keyword_min_similarity:g})"
            )
        return (
            f"scored {score:.2f}, under the quoting floor of {self.min_score:g}, and its meaning does not "
            f"stand out (cos {sim:.2f}" + (f", {standout:+.2f} over the usual)" if standout is not None else ")")
        )


def quotable_pages(hits: list) -> list:
    """The recalled pages worth quoting to the model.

    A page ranked only for its dialogue neighbour's score (`PageHit.inherited_from`: it came
    before or after a page that matched) is quoted only with that page, and only when the earlier
    of the two ends with a question, so the pair is a question and its answer. Otherwise it is
    context that helped the ranking, and to a small model a distraction: with every such page
    quoted, the bundled 135M model named the remembered detail in 54.7 % of 256 replies, with this
    rule in 68.0 % (`tests/bench/reply_quality.py --recall-only --seeds 16 --first-seed 3000`), at
    the same LoCoMo QA scores (docs/decisions/0012-neighbour-pages-quoted-only-as-answers.md).
    """
    by_id = {h.page.id: h for h in hits}
    kept = []
    for h in hits:
        src = by_id.get(h.inherited_from) if h.inherited_from is not None else None
        if h.inherited_from is None or (src is not None and _asks(min(h.page, src.page, key=lambda p: p.id))):
            kept.append(h)
    return kept


def quoted_facts(hits: list, query: str, floor: QuoteFloor, off: Iterable[str] = ()) -> list:
    """The recalled facts a prompt may quote: those relevant to the message by the pages' floor, read on a
    fact's own cosine to the message (`KnowledgeHit.score`): one whose meaning is close (≥
    `min_similarity`), or one that shares a content word with the message and is at least
    `keyword_min_similarity` close. Retrieval always brings its best facts, however far ("Hi!" brought
    five, every one of them quoted): small talk quotes none now. `off` "score_floor" quotes them all."""
    if "score_floor" in switched_off(off) or floor.min_similarity is None:
        return list(hits)
    asked = {stem(w) for w in content_words(query)}
    kept = []
    for h in hits:
        sim = float(h.score or 0.0)
        shares = bool(asked & {stem(w) for w in content_words(h.item.text)})
        if sim >= floor.min_similarity or (
            shares and sim >= (floor.keyword_min_similarity if floor.keyword_min_similarity is not None else 0.0)
        ):
            kept.append(h)
    return kept


def quoted_pages(hits: list, floor: QuoteFloor, off: Iterable[str] = ()) -> list:
    """The recalled pages a prompt may quote: those `floor` admits, then `quotable_pages`; `off` names
    QUOTING_RULES switched off (the floor's own, "neighbour_exemption", "neighbours_as_answers")."""
    off = switched_off(off)
    floor = floor.without(off)
    admitted = [h for h in hits if floor.admits(h, exempt_neighbours="neighbour_exemption" not in off)]
    return admitted if "neighbours_as_answers" in off else quotable_pages(admitted)


def _fit(hits: Sequence, render: Callable, count_tokens: CountFn, remaining: int) -> tuple[list, int, int]:
    """The hits whose lines fit, best first: (chosen, tokens remaining, how many did not fit)."""
    chosen, dropped = [], 0
    for hit in hits:
        c = count_tokens(render(hit)) + 2
        if c <= remaining:
            chosen.append(hit)
            remaining -= c
        else:
            dropped += 1
    return chosen, remaining, dropped


def _choose_turns(
    units: list[tuple[PageHit, tuple[str, ...]]], count_tokens: CountFn, remaining: int, max_turns: int | None
) -> tuple[dict[int, list[str]], int]:
    """Which sides of which pages are quoted: `_side_units` taken best first while they fit the tokens
    left and `max_turns` (a page's header is paid with its first side; a whole page that the turns left
    cannot hold gives its user side, as the evaluation cuts its last unit). Returns page id -> its quoted
    sides, and the tokens remaining."""
    page_sides: dict[int, list[str]] = {}
    turns_left = float("inf") if max_turns is None else max_turns
    for hit, sides in units:
        pid = hit.page.id
        new = [s for s in sides if s not in page_sides.get(pid, []) and _side_line(hit.page, s)]
        new = new[: int(min(len(new), turns_left))]  # the last turns of the budget: a whole page's first side
        if not new:
            continue
        c = sum(count_tokens(_side_line(hit.page, s)) + 1 for s in new)
        c += 0 if pid in page_sides else count_tokens(_page_header(hit.page)) + 2
        if c <= remaining:
            page_sides.setdefault(pid, []).extend(new)
            remaining -= c
            turns_left -= len(new)
    return page_sides, remaining


def _fit_query(
    query: str, system: str, cost: CountFn, count_tokens: CountFn, budget_tokens: int, template_overhead: int
) -> tuple[str, bool, int]:
    """The query as it fits beside the system prompt (cut in the middle when it alone takes more than half
    of what is left), whether it was cut, and the tokens remaining after both."""
    remaining = budget_tokens - cost(system) - template_overhead
    query_budget = max(32, remaining // 2) if cost(query) > remaining // 2 else remaining
    truncated = False
    if cost(query) > query_budget:
        query = _truncate_middle(query, count_tokens, query_budget - template_overhead)
        truncated = True
    return query, truncated, remaining - cost(query)


def _last_exchange(turns: list, cost: CountFn, remaining: int) -> tuple[list, int]:
    """The dialogue's last two turns that fit, in order, and the tokens remaining."""
    recent: list = []
    for msg in reversed(turns[-2:]):
        c = cost(msg.content)
        if c <= remaining:
            recent.insert(0, msg)
            remaining -= c
    return recent, remaining


def _recallable(
    retrieval: Retrieval | None,
    turns: list,
    floor: QuoteFloor,
    requote_after: int,
    off: frozenset[str],
    query: str = "",
) -> tuple[list, list, list]:
    """The retrieval's traits, quotable pages and knowledge: pages of `quoted_pages`, not of the
    dialogue's last `requote_after` exchanges (right above the message); facts of `quoted_facts`."""
    if retrieval is None:
        return [], [], []
    recent_ids = (
        {m.id for m in turns[-2 * requote_after :]} if requote_after > 0 and "requote_after" not in off else set()
    )
    # the last exchanges are right above the message: their pages are not quoted again
    pages = [
        h
        for h in retrieval.pages
        if h.page.user_message_id not in recent_ids and h.page.assistant_message_id not in recent_ids
    ]
    return list(retrieval.traits), quoted_pages(pages, floor, off), quoted_facts(retrieval.knowledge, query, floor, off)


def _messages(
    system: str,
    recent: list,
    query: str,
    traits: list,
    knowledge: list,
    pages: list,
    page_sides: dict[int, list[str]],
    recall_at_end: bool,
) -> tuple[list[dict], dict[str, str]]:
    """The chat messages: the system prompt with the persona (the cached prefix), the dialogue, the
    recalled facts and turns (a system message before the query, or inside the first one), the query;
    and the text of each of those parts (SECTIONS)."""
    system_text = system
    profile = ""
    if traits:  # the persona: stable between turns, so it belongs to the cached prefix
        persona = "About the user:\n" + "\n".join(_trait_line(h) for h in traits)
        profile = prompts.load("memory_context").format(sections=persona)
        system_text += "\n\n" + profile
    recalled = []  # recalled for this message: placed with it, after the cached dialogue
    if knowledge:
        recalled.append(FACTS_HEADING + "\n" + "\n".join(_fact_line(h) for h in knowledge))
    if pages:
        recalled.append(PAGES_HEADING + "\n" + "\n\n".join(_page_block(h.page, page_sides[h.page.id]) for h in pages))
    recall_text = prompts.load("memory_context").format(sections="\n\n".join(recalled)) if recalled else ""
    if recall_text and not recall_at_end:  # for chat templates that allow one system message only
        system_text += "\n\n" + recall_text
    messages = [{"role": "system", "content": system_text}]
    messages += [{"role": m.role, "content": m.content} for m in recent]
    if recall_text and recall_at_end:
        # a system message of its own just before the question: in the question's own text the
        # bundled 135M model started answering about "the memory" instead (LoCoMo QA F1 3.8 vs 7.9)
        messages.append({"role": "system", "content": recall_text})
    messages.append({"role": "user", "content": query})
    dialogue = "\n\n".join(f"{m.role}: {m.content}" for m in recent)
    parts = dict(zip(SECTIONS, (system, profile, recall_text, dialogue, query)))
    return messages, parts


def compose_prompt(
    query: str,
    *,
    retrieval: Retrieval | None = None,
    history: Sequence = (),
    count_tokens: CountFn,
    budget_tokens: int,
    template_overhead: int = 8,
    system_prompt: str | None = None,
    recall_at_end: bool = True,
    floor: QuoteFloor | None = None,
    requote_after: int = 2,
    max_turns: int | None = None,
    off: Iterable[str] = (),
    instructions: str = "",
) -> ComposedPrompt:
    """Build chat messages for `query` within `budget_tokens` (n_ctx minus the reply reserve).

    `history` is the conversation's current branch before `query`, as objects with
    `.role`, `.content`, `.id` (memory_core Messages). Priorities when space is short:
    the query (cut in the middle if it alone is too long), the system prompt, the last
    exchange, persona traits, retrieved pages a turn at a time (`Retrieval.sides`: each page's better
    side at the page's place, its other side lower; at most `max_turns` turns, None: as many as fit),
    knowledge, then older dialogue. Pages the `floor` does not admit are left out whatever the
    space (QuoteFloor; None: every page). A page of
    the dialogue's last `requote_after` exchanges is not quoted again (it is right above the message);
    an older one is, beside the message, where a small model still sees it
    (`MemoryParams.quoting.recall_own_after`). `off`: QUOTING_RULES switched off, for the ablation.
    `instructions`: the user's custom instructions, after the system prompt.
    """
    off = switched_off(off)
    if "turn_budget" in off:
        max_turns = None
    system = with_instructions(system_prompt if system_prompt is not None else prompts.load("system"), instructions)

    def cost(text: str) -> int:
        return count_tokens(text) + template_overhead

    query, truncated, remaining = _fit_query(query, system, cost, count_tokens, budget_tokens, template_overhead)
    dropped: dict[str, int] = {"pages": 0, "knowledge": 0, "traits": 0, "messages": 0}

    turns = [m for m in history if m.role in ("user", "assistant") and m.content]
    # the last exchange first (so a reply to "and then?" has its context)
    recent, remaining = _last_exchange(turns, cost, remaining)
    older = turns[:-2]

    traits, pages, knowledge = _recallable(retrieval, turns, floor or QuoteFloor(), requote_after, off, query)
    if traits or pages or knowledge:  # the <memory> wrappers (persona; recalled) and headings cost tokens too
        remaining -= 2 * count_tokens(prompts.load("memory_context").format(sections="")) + 3 * 6
    chosen_traits, remaining, dropped["traits"] = _fit(traits, _trait_line, count_tokens, remaining)
    page_sides, remaining = _choose_turns(
        _side_units(None if "sides" in off else retrieval, pages), count_tokens, remaining, max_turns
    )
    chosen_pages = [h for h in pages if h.page.id in page_sides]
    dropped["pages"] = len(pages) - len(chosen_pages)
    chosen_knowledge, remaining, dropped["knowledge"] = _fit(knowledge, _fact_line, count_tokens, remaining)
    recent, remaining, dropped["messages"] = _older_dialogue(older, recent, cost, remaining)

    _stable_order(chosen_traits, chosen_knowledge, chosen_pages)
    messages, sections = _messages(
        system, recent, query, chosen_traits, chosen_knowledge, chosen_pages, page_sides, recall_at_end
    )

    included = _included(chosen_traits, chosen_knowledge, chosen_pages, recent)
    used = sum(cost(m["content"]) for m in messages)
    return ComposedPrompt(
        messages, used, budget_tokens, included, dropped, truncated, _half_pages(chosen_pages, page_sides), sections
    )


def _stable_order(traits: list, knowledge: list, pages: list) -> None:
    """Sort each section in place by a stable key (ids), so the prompt's prefix is byte-identical between
    turns (the model's cache keeps it); pages by time, as a chronological account reads naturally."""
    traits.sort(key=lambda h: (h.item.dimension, h.item.id))
    knowledge.sort(key=lambda h: (h.item.owner, h.item.id))
    pages.sort(key=lambda h: (h.page.timestamp or 0, h.page.id))


def _included(traits: list, knowledge: list, pages: list, recent: list) -> dict[str, list[int]]:
    """The ids of what the prompt holds, by kind (a reply's trace lists them)."""
    return {
        "pages": [h.page.id for h in pages],
        "knowledge": [h.item.id for h in knowledge],
        "traits": [h.item.id for h in traits],
        "messages": [m.id for m in recent],
    }


def _older_dialogue(older: list, recent: list, cost: Callable[[str], int], remaining: int) -> tuple[list, int, int]:
    """The dialogue before the last exchange, newest first, as far as `remaining` tokens go: (the messages
    kept, oldest first, the last exchange after them; tokens left; how many older messages were dropped)."""
    kept = list(recent)
    for i in range(len(older) - 1, -1, -1):
        c = cost(older[i].content)
        if c > remaining:
            return kept, remaining, i + 1
        kept.insert(0, older[i])
        remaining -= c
    return kept, remaining, 0


def _half_pages(chosen_pages: list, page_sides: dict[int, list[str]]) -> dict[int, str]:
    """The quoted pages of which only one side was quoted (both sides have text): page id -> that side."""
    return {
        h.page.id: page_sides[h.page.id][0]
        for h in chosen_pages
        if len(page_sides[h.page.id]) == 1 and _side_line(h.page, "user") and _side_line(h.page, "assistant")
    }
