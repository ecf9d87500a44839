"""Record types, parameters and protocols of the memory engine (plain dataclasses, no Qt, no models)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import Any

import numpy as np

# (n texts) -> (n, dim) float32 array with unit-norm rows.
EmbedFn = Callable[[Sequence[str]], np.ndarray]
# (n texts[, n contexts]) -> (the same (n, dim) array, and per text its token vectors (m, dim) with the m
# token strings, from the same encoder pass): lets retrieval match a query word by word (token_match).
# contexts[i] ("" for none) is read just before texts[i] and left out of both results (late chunking:
# a page's words are read after the end of the page before it, see `context_side`).
TokenEmbedFn = Callable[..., "tuple[np.ndarray, list[tuple[np.ndarray, list[str]]]]"]
# (chat messages, JSON schema) -> parsed JSON (dict/list); may raise on any failure.
CompleteJsonFn = Callable[[list[dict[str, str]], dict], Any]

TIERS = ("stm", "mtm", "archive")
ITEM_KINDS = ("page", "segment", "knowledge", "trait")


@dataclass
class TierParams:
    """How many pages and segments each tier holds."""

    # tiers
    stm_capacity: int = 10  # pages of short-term memory per conversation
    mtm_capacity: int = 200  # mid-term segments before the coldest is archived


@dataclass
class SegmentParams:
    """How pages join segments and dialogue chains, and what a segment keeps (the LLM-free path)."""

    # segmenting: join the best segment when cos + keyword Jaccard >= theta
    theta: float = 0.6
    # dialogue chain: link a moved page to the previous one when cos + Jaccard >= chain_theta
    chain_theta: float = 0.45
    chain_max_gap_s: float = 6 * 3600.0  # never link across a pause longer than this
    # keywords / summaries (LLM-free path)
    page_keywords: int = 10
    segment_keywords: int = 15
    summary_chars: int = 300


@dataclass
class HeatParams:
    """Heat: what promotes a segment into the persona and what the archive takes first."""

    # heat = alpha*N_visit + beta*L_interaction + gamma*exp(-dt/mu)
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    # recency's time scale in seconds: 2 days (decision 0024): a topic of today's chat ~1, of yesterday's
    # 0.61, of last week's 0.03 (the paper's 1e7 s kept it at 0.94 after a week)
    mu: float = 2 * 86400.0
    tau: float = 5.0  # promotion threshold on heat


@dataclass
class PersonaParams:
    """How a new trait or fact joins the persona (embedding cosines) and how many traits it keeps."""

    # LPM updating: similarity of a new fact to an existing one (embedding cosine)
    duplicate_threshold: float = 0.92  # same fact restated -> confirm (new version, higher confidence)
    update_threshold: float = 0.75  # same subject, new content -> update, archive the old version
    trait_update_threshold: float = 0.75
    max_traits: int = 200
    # facts kept active per owner (the user's, the assistant's, other people's), as MemoryOS keeps 100
    # user and 100 assistant knowledge items: past it the fact confirmed or changed least recently is set
    # aside (archived, with an event); a pinned fact or one the user wrote never is
    max_knowledge: int = 100


@dataclass
class RankingParams:
    """How pages are ranked for a query (memory_core/recall/ranking.py; each stage names what it reads)."""

    # retrieval (memory_core/recall/ranking.py): score = w_dense*cos + w_keyword*min(1, bm25/sum(idf of query
    # terms)) + w_tokens*word-by-word + date boost,
    # then a page also inherits neighbor_prev * (score of the page before it in its conversation)
    # and neighbor_next * (score of the page after it): answers often follow the turn that matched;
    # then every page adds neighbor_context * (the better of its two neighbours' scores): a page in a
    # passage of the dialogue that is on the topic beats an equally scored page in passing talk.
    segment_candidates: int = 8  # top MTM segments considered per query
    # candidates: the nearest pages by cosine and the best by BM25, at least these many, and more for a
    # longer list (`dense_limit`, `keyword_limit`): each candidate costs every later stage its share
    dense_candidates: int = 40  # direct page KNN candidates
    keyword_candidates: int = 40  # FTS5 BM25 candidates
    w_dense: float = 1.0
    # a query word found in at least `common_word_df` of the pages (and 20 pages or more) tells no page
    # from another: the speakers' names of an imported dialogue are on every page ("Melanie: …"). The
    # query vector is then the mean of the query's and the query's without those words
    # (`common_word_mix` of the latter; 0: off). Why: docs/decisions/0008-common-words-weigh-half.md
    common_word_df: float = 0.5
    common_word_mix: float = 0.5
    w_keyword: float = 0.8
    # word-by-word match (token_match.maxsim: each query word's best cosine among the page's words,
    # averaged), added w_tokens x to the score of every candidate page; needs a TokenEmbedFn.
    # Why: docs/decisions/0001-pages-keep-their-word-vectors.md
    w_tokens: float = 1.0
    # a page's two turns are ranked one by one (Retrieval.sides): the side closer to the query in meaning
    # (its side vector, token_match.pack_sides) keeps the page's score, the other scores
    # `other_side_drop` + `other_side_spread` x the two sides' cosine gap less. So a budget of turns takes
    # the better side of more pages before the other side of few (docs/decisions/0007-turns-ranked-one-by-one.md)
    other_side_drop: float = 0.2
    other_side_spread: float = 1.0
    date_boost: float = 0.5  # pages inside a date the query names ("on 13 May 2023", "in June 2023")
    neighbor_prev: float = 0.8
    neighbor_next: float = 0.5
    neighbor_context: float = 0.1
    neighbor_max_gap_s: float = 6 * 3600.0
    # a page of Mnemo's own chats whose user side only asks a question (T.only_asks) holds a question
    # and the model's reply, not something the user said: its score is multiplied by this, so earlier
    # askings on a topic do not crowd out what the user told (imported dialogues are the record: exempt)
    asked_weight: float = 0.5
    rrf_k: float = 60.0  # knowledge ranking fuses dense and keyword ranks (reciprocal rank)

    def dense_limit(self, n: int) -> int:
        """The nearest pages by cosine that a ranking of `n` pages takes: dense_candidates, or 4 x n."""
        return max(self.dense_candidates, 4 * n)

    def keyword_limit(self, n: int) -> int:
        """The best keyword matches that a ranking of `n` pages takes: keyword_candidates, or 2 x n."""
        return max(self.keyword_candidates, 2 * n)


@dataclass
class QuotingParams:
    """Which recalled pages a reply's prompt quotes, and how many turns (app/chat/prompting.py QuoteFloor)."""

    # pages scoring under this are not put in a reply's prompt: small talk ("Hi!", "Thanks") recalls
    # nothing instead of the least unrelated pages (LoCoMo dev: 0.1 % of the top-10 evidence pages
    # score under 0.4; on-topic pages score 1+)
    recall_min_score: float = 0.4
    # ...but in a small memory one shared word is worth a lot to BM25 ("What game do I play at night?"
    # matched "I've been learning to play the violin" at cos 0.07): a page over that floor must also be
    # this close in meaning (its own cosine; a page ranked for its dialogue neighbour is exempt)
    recall_keyword_min_similarity: float = 0.2
    # and a page that shares no word with the message is quoted when its meaning alone matches: cosine
    # at least recall_min_similarity and recall_min_standout above the usual cosine of the memory's other
    # pages (retrieval.typical_cosine; "What is the name of my dog?" -> "I adopted a beagle called
    # Pepper": cos 0.47, the usual 0.07)
    recall_min_similarity: float = 0.3
    recall_min_standout: float = 0.22
    # the conversation's own pages are recalled like any other page, except those of its last
    # `recall_own_after` exchanges: they are the dialogue right above the new message. A fact said
    # many messages back is then quoted again beside the question (the bundled 135M model lost the
    # name of a dog said eight exchanges earlier: tests.bench.long_chat)
    recall_own_after: int = 2
    # a reply's prompt quotes at most this many turns of recalled pages, taken side by side in the order
    # of Retrieval.sides (a page's better side first), from the best `recall_turns` pages. 14 keeps the
    # prompt as long as when it quoted up to ten whole pages (docs/decisions/0007-turns-ranked-one-by-one.md)
    recall_turns: int = 14


@dataclass
class JobParams:
    """Background jobs and housekeeping."""

    # jobs / housekeeping
    job_max_attempts: int = 3
    events_keep: int = 20000
    import_batch: int = 64


# the groups of MemoryParams, in order: (attribute, dataclass)
PARAM_GROUPS: tuple[tuple[str, type], ...] = (
    ("tiers", TierParams),
    ("segments", SegmentParams),
    ("heat", HeatParams),
    ("persona", PersonaParams),
    ("ranking", RankingParams),
    ("quoting", QuotingParams),
    ("jobs", JobParams),
)


@dataclass
class MemoryParams:
    """Every tunable of the memory engine, in groups (`params.heat.tau`, `params.ranking.w_dense`), with the
    defaults of docs/architecture.md (MemoryOS paper values where the paper has one).

    Each field's name is unique across the groups, so settings.json's "memory" object and tests keep naming
    them flat (`{"tau": 3}`): `MemoryParams.from_flat`, `flat`, `get` and `set` translate."""

    tiers: TierParams = field(default_factory=TierParams)
    segments: SegmentParams = field(default_factory=SegmentParams)
    heat: HeatParams = field(default_factory=HeatParams)
    persona: PersonaParams = field(default_factory=PersonaParams)
    ranking: RankingParams = field(default_factory=RankingParams)
    quoting: QuotingParams = field(default_factory=QuotingParams)
    jobs: JobParams = field(default_factory=JobParams)

    @staticmethod
    def flat_fields() -> list[tuple[str, Field]]:
        """(group attribute, field) of every parameter, group by group, in declaration order."""
        return [(attr, f) for attr, cls in PARAM_GROUPS for f in fields(cls)]

    @classmethod
    def group_of(cls, name: str) -> str:
        """The group attribute that holds the parameter `name`; KeyError for a name that is none."""
        return _GROUP_OF[name]

    @classmethod
    def from_flat(cls, values: Mapping[str, Any] | None = None, /, **more: Any) -> MemoryParams:
        """Parameters from flat names (settings.json, tests); an unknown name is a TypeError, as a
        dataclass constructor would say."""
        params = cls()
        for name, value in {**(values or {}), **more}.items():
            if name not in _GROUP_OF:
                raise TypeError(f"MemoryParams has no parameter {name!r}")
            params.set(name, value)
        return params

    def get(self, name: str) -> Any:
        return getattr(getattr(self, _GROUP_OF[name]), name)

    def set(self, name: str, value: Any) -> None:
        setattr(getattr(self, _GROUP_OF[name]), name, value)

    def flat(self) -> dict[str, Any]:
        """Every parameter by its flat name."""
        return {f.name: self.get(f.name) for _, f in self.flat_fields()}

    def to_dict(self) -> dict:
        return self.flat()


_GROUP_OF: dict[str, str] = {f.name: attr for attr, f in MemoryParams.flat_fields()}


@dataclass
class RetrievalBudget:
    pages: int = 10  # MTM/archive pages
    knowledge: int = 5
    traits: int = 20
    stm: int | None = None  # None = all of the conversation's STM pages


@dataclass
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    source: str | None = None
    external_id: str | None = None
    memory_paused: bool = False
    incognito: bool = False
    space_id: int = 1  # the memory space its pages are written to (memory_core.spaces.component)
    # the spaces it recalls from: None its own only, "all", or a list of space ids (Spaces.read_set)
    read_spaces: str | list[int] | None = None


@dataclass
class ConversationMemory:
    """What memory holds from one conversation (see `MemoryStore.conversation_memory`)."""

    conversation_id: int
    page_ids: list[int]  # its pages, every tier
    pinned_pages: int  # how many of them are pinned
    items: list[tuple[str, int]]  # ("trait" | "knowledge", id): drawn only from those pages
    pending_pages: int = 0  # replies not yet written as pages (queued memory jobs)

    @property
    def empty(self) -> bool:
        return not (self.page_ids or self.pending_pages)


@dataclass
class Message:
    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    created_at: float
    status: str = "complete"
    meta: dict = field(default_factory=dict)


@dataclass
class Page:
    id: int
    conversation_id: int | None
    user_text: str
    assistant_text: str
    timestamp: float
    tier: str
    segment_id: int | None = None
    prev_page_id: int | None = None
    next_page_id: int | None = None
    chain_id: int | None = None
    chain_summary: str = ""
    keywords: list[str] = field(default_factory=list)
    pinned: bool = False
    user_message_id: int | None = None
    assistant_message_id: int | None = None
    meta: dict = field(default_factory=dict)
    space_id: int = 1  # the memory space it belongs to (memory_core.spaces.component)

    @property
    def text(self) -> str:
        return page_text(self.user_text, self.assistant_text)


# How pages are read in context (`context_side`); a memory that records another (or none: pages embedded
# before this) is embedded again in the background when opened with a token embedder
PAGE_CONTEXT = "last-side-1"


def context_side(user_text: str, assistant_text: str) -> str:
    """What the page after this one is read after when it is embedded: this page's last side (its reply,
    or its message when it has none). "I've had them for 3 years now" means more after "Look how cute
    my turtles are!" (late chunking; docs/decisions/0002-pages-embedded-in-context.md)."""
    return (assistant_text or "").strip() or (user_text or "").strip()


def page_text(user_text: str, assistant_text: str) -> str:
    """The text a page is embedded and indexed as."""
    u, a = (user_text or "").strip(), (assistant_text or "").strip()
    if u and a:
        return f"{u}\n{a}"
    return u or a


@dataclass
class Segment:
    id: int
    tier: str
    summary: str
    keywords: list[str]
    n_visit: int
    l_interaction: int
    last_access: float
    created_at: float
    updated_at: float
    page_count: int
    pinned: bool
    promotions: int
    recency: float  # exp(-dt/mu) at read time
    heat: float  # alpha*n_visit + beta*l_interaction + gamma*recency at read time
    title: str = ""  # a readable name: the chat model's (decision 0026), else its first keywords (common words out)
    space_id: int = 1  # the memory space of its pages (a segment holds pages of one space)
    title_by: str = ""  # the model that wrote `title`; empty when it is the keywords' title


@dataclass
class Trait:
    id: int
    dimension: str
    value: str
    evidence: str
    confidence: float
    status: str  # 'active' | 'archived'
    version: int
    pinned: bool
    created_at: float
    updated_at: float
    source_page_ids: list[int] = field(default_factory=list)
    conversation_ids: list[int] = field(default_factory=list)
    model: str = ""
    space_id: int = 1  # the memory space it belongs to (memory_core.spaces.component)


@dataclass
class Knowledge:
    id: int
    owner: str  # 'user' | 'assistant' | 'person' (someone of an imported dialogue: `subject` names them)
    text: str
    confidence: float
    status: str  # 'active' | 'archived'
    version: int
    pinned: bool
    created_at: float
    updated_at: float
    source_page_ids: list[int] = field(default_factory=list)
    conversation_ids: list[int] = field(default_factory=list)
    model: str = ""
    subject: str | None = None  # the person a 'person' fact is about
    confirmations: int = 0  # how often it was said again (a confirmation is no new version)
    space_id: int = 1  # the memory space it belongs to (memory_core.spaces.component)


@dataclass
class ItemVersion:
    item_kind: str
    item_id: int
    version: int
    text: str
    created_at: float
    archived_at: float | None  # None for the current version
    reason: str
    detail: dict = field(default_factory=dict)


@dataclass
class Event:
    id: int
    at: float
    kind: str  # e.g. page_added, page_moved, segment_created, segment_archived, promoted, ...
    item_kind: str | None
    item_id: int | None
    summary: str
    detail: dict = field(default_factory=dict)


@dataclass
class Job:
    id: int
    kind: str
    payload: dict
    key: str | None
    status: str  # 'pending' | 'done' | 'failed'
    attempts: int
    created_at: float
    updated_at: float
    error: str | None = None


def _clean_float(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, 6) if math.isfinite(x) else 0.0


@dataclass
class PageHit:
    page: Page
    score: float
    reason: str
    tier: str
    # the dialogue neighbour whose score this page inherited (it ranks as context of that page, not for
    # its own words); None when it ranks on its own
    inherited_from: int | None = None
    # the page's own cosine to the query, and how far that lies above the usual cosine of the memory's
    # other pages (retrieval.typical_cosine: what any page scores against it): a page that stands out is
    # on the topic even when it shares no word with the query (app.chat.prompting.QuoteFloor); no standout
    # for an earlier asking
    similarity: float | None = None
    standout: float | None = None
    # the score without the word-by-word match (token_match): every page matches a query's words
    # somewhat, so the quoting floor (QuoteFloor.min_score) reads this; None: the same as `score`
    match_score: float | None = None
    # the cosines of the page's user side and reply to the query (token_match side vectors); None for a
    # page with one side, or whose side vectors are not made yet
    side_similarity: tuple[float, float] | None = None

    def to_trace(self) -> dict:
        p = self.page
        return {
            "page_id": p.id,
            "conversation_id": p.conversation_id,
            "tier": self.tier,
            "segment_id": p.segment_id,
            "space_id": p.space_id,  # the memory space it was recalled from
            "timestamp": p.timestamp,
            "score": _clean_float(self.score),
            "reason": self.reason,
            "inherited_from": self.inherited_from,
            "meta": p.meta,
            "similarity": _clean_float(self.similarity),
            "standout": _clean_float(self.standout),
            "match_score": _clean_float(self.match_score),
            "side_similarity": None
            if self.side_similarity is None
            else [_clean_float(c) for c in self.side_similarity],
        }


@dataclass
class SideHit:
    """One turn of a recalled page, ranked on its own (Retrieval.sides): `side` is "user" (what the user
    said), "assistant" (the reply) or "page" (a page that is not split: one side only, or no side
    vectors yet). Its score is the page's for the page's better side and lower for the other."""

    hit: PageHit
    side: str
    score: float

    @property
    def text(self) -> str:
        p = self.hit.page
        return {"user": p.user_text, "assistant": p.assistant_text}.get(self.side) or page_text(
            p.user_text, p.assistant_text
        )

    def to_trace(self) -> dict:
        return {"page_id": self.hit.page.id, "side": self.side, "score": _clean_float(self.score)}


@dataclass
class KnowledgeHit:
    item: Knowledge
    score: float
    reason: str

    def to_trace(self) -> dict:
        return {
            "knowledge_id": self.item.id,
            "owner": self.item.owner,
            "text": self.item.text,
            "score": _clean_float(self.score),
            "reason": self.reason,
        }


@dataclass
class TraitHit:
    item: Trait
    score: float
    reason: str

    def to_trace(self) -> dict:
        return {
            "trait_id": self.item.id,
            "dimension": self.item.dimension,
            "value": self.item.value,
            "score": _clean_float(self.score),
            "reason": self.reason,
        }


@dataclass
class Retrieval:
    query: str
    stm: list[PageHit] = field(default_factory=list)
    pages: list[PageHit] = field(default_factory=list)
    knowledge: list[KnowledgeHit] = field(default_factory=list)
    traits: list[TraitHit] = field(default_factory=list)
    timings_ms: dict = field(default_factory=dict)
    segments: list[dict] = field(default_factory=list)  # top segments considered: id, score, reason
    skipped: list[PageHit] = field(default_factory=list)  # pages ranked among the best but left out, and why
    common_words: list[str] = field(default_factory=list)  # query words on most pages, half left out of its vector
    # the turns of `pages` ranked one by one, best first (SideHit): what a budget of turns quotes
    sides: list[SideHit] = field(default_factory=list)

    def to_trace(self) -> dict:
        """A JSON-serialisable record of what was recalled and why (stored with the reply)."""
        return {
            "query": self.query,
            "stm": [h.to_trace() for h in self.stm],
            "pages": [h.to_trace() for h in self.pages],
            "knowledge": [h.to_trace() for h in self.knowledge],
            "traits": [h.to_trace() for h in self.traits],
            "segments": [dict(s) for s in self.segments],
            "skipped": [h.to_trace() for h in self.skipped],
            "common_words": list(self.common_words),
            "sides": [h.to_trace() for h in self.sides],
            "timings_ms": {k: _clean_float(v) for k, v in self.timings_ms.items()},
        }


class MemoryError_(Exception):
    """Base class of memory_core errors."""


class EmbeddingMismatchError(MemoryError_, ValueError):
    """The store was built with another embedding dimension than the embedder offered now."""


class LLMDeferred(MemoryError_):
    """Raised by an LLM completion function to say "not now" (the model is needed for a chat
    reply, or the app is closing): the memory job that asked stays pending, its attempt is not
    counted, and it runs again later. Any other exception from the LLM means bad output and
    falls back to the LLM-free path."""


class StoreClosedError(MemoryError_, RuntimeError):
    pass


class DamagedDatabaseError(MemoryError_, RuntimeError):
    """The file is not a SQLite database or SQLite finds it damaged. It is left exactly as it was."""
