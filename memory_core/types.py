"""Record types, parameters and protocols of the memory engine (plain dataclasses, no Qt, no models)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeVar

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


# A memory parameter is declared once, on its field (`param`): its default, its bounds, and the group,
# label and help the settings dialog shows. app.settings_schema checks settings.json against the bounds,
# ui.param_help and the dialog show the rest, and docs/settings.md is generated from it, so the four
# cannot drift apart (they did: max_knowledge once had no help and showed under "Other").
PARAM = "param"  # the dataclass field metadata key that holds a parameter's ParamInfo

# the groups of Settings ▸ Memory (Developer settings on), in the order the dialog shows them
RECENT = "Recent chat and topics"
HEAT = "Heat: when a topic is read for your profile"
PROFILE = "Your profile"
RANKING = "Recall: how pages are ranked"
QUOTING = "What the prompt quotes"
BACKGROUND = "Background work"
PARAM_SECTIONS: tuple[str, ...] = (RECENT, HEAT, PROFILE, RANKING, QUOTING, BACKGROUND)

_T = TypeVar("_T")


@dataclass(frozen=True)
class ParamInfo:
    """What a memory parameter's field says besides its default: the range the engine can compute with
    (`low`, `high`; None: no bound), and where and how Settings ▸ Memory shows it."""

    low: float | None
    high: float | None
    group: str  # one of PARAM_SECTIONS
    label: str  # the dialog's row label, in words
    help: str  # the row's tooltip: what the knob changes and which way


def param(default: _T, *, low: float | None, high: float | None = None, group: str, label: str, help: str) -> _T:
    """A memory parameter's dataclass field (typed as its default, as `field` is). `low` must be written,
    None included, so that no number is left without a thought about its range; a group the dialog does
    not show is refused here, at import, rather than leaving the parameter out of Settings."""
    if group not in PARAM_SECTIONS:
        raise ValueError(f"unknown parameter group {group!r}")
    return field(default=default, metadata={PARAM: ParamInfo(low, high, group, label, help)})


@dataclass
class TierParams:
    """How many pages and segments each tier holds."""

    # tiers
    stm_capacity: int = param(  # pages of short-term memory per conversation
        10,
        low=1,
        group=RECENT,
        label="Recent pages per chat (STM)",
        help="How many exchanges of a chat stay in recent chat, read with every reply; older ones move into topics.",
    )
    mtm_capacity: int = param(  # mid-term segments before the coldest is archived
        200,
        low=1,
        group=RECENT,
        label="Topics kept in use (MTM)",
        help="How many topics stay in use; past this, the least used topic moves to the archive (still searchable).",
    )


@dataclass
class SegmentParams:
    """How pages join segments and dialogue chains, and what a segment keeps (the LLM-free path)."""

    # segmenting: join the best segment when cos + keyword Jaccard >= theta
    theta: float = param(
        0.6,
        low=-1.0,
        high=2.0,  # cosine + Jaccard
        group=RECENT,
        label="Join a topic at (θ)",
        help="How alike in meaning and words a page must be to a topic to join it; higher makes more, narrower topics.",
    )
    # dialogue chain: link a moved page to the previous one when cos + Jaccard >= chain_theta
    chain_theta: float = param(
        0.45,
        low=-1.0,
        high=2.0,
        group=RECENT,
        label="Link to the page before at",
        help="How alike a page must be to the one before it to be linked as the same thread.",
    )
    chain_max_gap_s: float = param(  # never link across a pause longer than this
        6 * 3600.0,
        low=0,
        group=RECENT,
        label="Longest pause in a thread (s)",
        help="Pages further apart in time are not linked as a thread.",
    )
    # keywords / summaries (LLM-free path)
    page_keywords: int = param(
        10,
        low=0,
        group=RECENT,
        label="Keywords per page",
        help="How many keywords a page keeps for matching topics.",
    )
    segment_keywords: int = param(
        15,
        low=0,
        group=RECENT,
        label="Keywords shown per topic",
        help="How many of its most frequent keywords a topic shows.",
    )
    summary_chars: int = param(
        300,
        low=0,
        group=RECENT,
        label="Topic summary length",
        help="Characters of the summary a topic keeps.",
    )


@dataclass
class HeatParams:
    """Heat: what promotes a segment into the persona and what the archive takes first."""

    # heat = alpha*N_visit + beta*L_interaction + gamma*exp(-dt/mu)
    alpha: float = param(
        1.0,
        low=0,
        group=HEAT,
        label="Weight of uses (α)",
        help="How much each reply that used a topic adds to its heat.",
    )
    beta: float = param(
        1.0,
        low=0,
        group=HEAT,
        label="Weight of new messages (β)",
        help="How much each new message in a topic adds to its heat.",
    )
    gamma: float = param(
        1.0,
        low=0,
        group=HEAT,
        label="Weight of recent use (γ)",
        help="How much having been used recently adds to a topic's heat.",
    )
    # recency's time scale in seconds: 2 days (decision 0024): a topic of today's chat ~1, of yesterday's
    # 0.61, of last week's 0.03 (the paper's 1e7 s kept it at 0.94 after a week)
    mu: float = param(
        2 * 86400.0,
        low=1.0,  # seconds; heat divides by it
        group=HEAT,
        label="Fading time (μ, s)",
        help="Seconds over which the recent-use part of heat fades (1e7 s: about 4 months).",
    )
    tau: float = param(  # promotion threshold on heat
        5.0,
        low=0,
        group=HEAT,
        label="Read for your profile at (τ)",
        help="The heat at which a topic's new messages are read for facts and traits about you; lower learns sooner.",
    )


@dataclass
class PersonaParams:
    """How a new trait or fact joins the persona (embedding cosines) and how many traits it keeps."""

    # LPM updating: similarity of a new fact to an existing one (embedding cosine)
    duplicate_threshold: float = param(  # same fact restated -> confirm (new version, higher confidence)
        0.92,
        low=-1.0,
        high=1.0,
        group=PROFILE,
        label="Same fact at",
        help="How alike a new fact must be to one already kept to count as saying it again (it becomes surer).",
    )
    update_threshold: float = param(  # same subject, new content -> update, archive the old version
        0.75,
        low=-1.0,
        high=1.0,
        group=PROFILE,
        label="Newer version of a fact at",
        help="How alike a new fact must be to an old one to replace it (the old text is kept as a version).",
    )
    trait_update_threshold: float = param(
        0.75,
        low=-1.0,
        high=1.0,
        group=PROFILE,
        label="Newer version of a trait at",
        help="The same, for traits.",
    )
    max_traits: int = param(
        200,
        low=0,
        group=PROFILE,
        label="Most traits kept",
        help="Past this, the least certain trait is set aside.",
    )
    # facts kept active per owner (the user's, the assistant's, other people's), as MemoryOS keeps 100
    # user and 100 assistant knowledge items: past it the fact confirmed or changed least recently is set
    # aside (archived, with an event); a pinned fact or one the user wrote never is
    max_knowledge: int = param(
        100,
        low=0,
        group=PROFILE,
        label="Most facts kept of each kind",
        help="How many facts about you, about the assistant and about other people are each kept in use; past "
        "this, the fact confirmed or changed least recently is set aside (never one you pinned or wrote).",
    )


@dataclass
class RankingParams:
    """How pages are ranked for a query (memory_core/recall/ranking.py; each stage names what it reads)."""

    # retrieval (memory_core/recall/ranking.py): score = w_dense*cos + w_keyword*min(1, bm25/sum(idf of query
    # terms)) + w_tokens*word-by-word + date boost,
    # then a page also inherits neighbor_prev * (score of the page before it in its conversation)
    # and neighbor_next * (score of the page after it): answers often follow the turn that matched;
    # then every page adds neighbor_context * (the better of its two neighbours' scores): a page in a
    # passage of the dialogue that is on the topic beats an equally scored page in passing talk.
    segment_candidates: int = param(  # top MTM segments considered per query
        8,
        low=1,
        group=RANKING,
        label="Topics listed",
        help="How many topics of the recalled pages a reply's trace lists.",
    )
    # candidates: the nearest pages by cosine and the best by BM25, at least these many, and more for a
    # longer list (`dense_limit`, `keyword_limit`): each candidate costs every later stage its share
    dense_candidates: int = param(  # direct page KNN candidates
        40,
        low=1,
        group=RANKING,
        label="Pages compared by meaning",
        help="At least this many of the closest pages in meaning are ranked (four per page recalled, if more).",
    )
    keyword_candidates: int = param(  # FTS5 BM25 candidates
        40,
        low=1,
        group=RANKING,
        label="Pages compared by words",
        help="At least this many of the best keyword matches are ranked (two per page recalled, if more).",
    )
    w_dense: float = param(
        1.0,
        low=0,
        group=RANKING,
        label="Weight of meaning",
        help="How much closeness in meaning counts in a page's score.",
    )
    w_keyword: float = param(
        0.8,
        low=0,
        group=RANKING,
        label="Weight of keywords",
        help="How much shared keywords count in a page's score.",
    )
    # word-by-word match (token_match.maxsim: each query word's best cosine among the page's words,
    # averaged), added w_tokens x to the score of every candidate page; needs a TokenEmbedFn.
    # Why: docs/decisions/0001-pages-keep-their-word-vectors.md
    w_tokens: float = param(
        1.0,
        low=0,
        group=RANKING,
        label="Weight of word-by-word match",
        help="How much matching your words one by one counts.",
    )
    # a query word found in at least `common_word_df` of the pages (and 20 pages or more) tells no page
    # from another: the speakers' names of an imported dialogue are on every page ("Melanie: …"). The
    # query vector is then the mean of the query's and the query's without those words
    # (`common_word_mix` of the latter; 0: off). Why: docs/decisions/0008-common-words-weigh-half.md
    common_word_df: float = param(
        0.5,
        low=0.0,
        high=1.0,
        group=RANKING,
        label="Common word at",
        help="A word on at least this share of pages (a name in an imported dialogue) counts half in meaning.",
    )
    common_word_mix: float = param(
        0.5,
        low=0.0,
        high=1.0,
        group=RANKING,
        label="Weight of a common word",
        help="How much such a common word still counts.",
    )
    date_boost: float = param(  # pages inside a date the query names ("on 13 May 2023", "in June 2023")
        0.5,
        low=0,
        group=RANKING,
        label="Bonus for a named date",
        help="Added to pages from a date your message names.",
    )
    neighbor_prev: float = param(
        0.8,
        low=0,
        group=RANKING,
        label="Score passed to the next page",
        help="Share of a page's score the page after it inherits.",
    )
    neighbor_next: float = param(
        0.5,
        low=0,
        group=RANKING,
        label="Score passed to the page before",
        help="Share of a page's score the page before it inherits.",
    )
    neighbor_context: float = param(
        0.1,
        low=0,
        group=RANKING,
        label="Bonus from neighbours",
        help="Share of the better neighbour's score a page adds.",
    )
    neighbor_max_gap_s: float = param(
        6 * 3600.0,
        low=0,
        group=RANKING,
        label="Neighbours within (s)",
        help="Pages further apart in time are not each other's neighbours.",
    )
    # a page of Mnemo's own chats whose user side only asks a question (T.only_asks) holds a question
    # and the model's reply, not something the user said: its score is multiplied by this, so earlier
    # askings on a topic do not crowd out what the user told (imported dialogues are the record: exempt)
    asked_weight: float = param(
        0.5,
        low=0,
        group=RANKING,
        label="Weight of a question you asked before",
        help="A page where you only asked a short question counts this much (its reply is no evidence).",
    )
    # a page's two turns are ranked one by one (Retrieval.sides): the side closer to the query in meaning
    # (its side vector, token_match.pack_sides) keeps the page's score, the other scores
    # `other_side_drop` + `other_side_spread` x the two sides' cosine gap less. So a budget of turns takes
    # the better side of more pages before the other side of few (docs/decisions/0007-turns-ranked-one-by-one.md)
    other_side_drop: float = param(
        0.2,
        low=0,
        group=RANKING,
        label="Other side's drop",
        help="How much lower a page's other side (your message or the reply) ranks than its better side.",
    )
    other_side_spread: float = param(
        1.0,
        low=0,
        group=RANKING,
        label="Other side's spread",
        help="How much the two sides' difference in meaning lowers it more.",
    )
    rrf_k: float = param(  # knowledge ranking fuses dense and keyword ranks (reciprocal rank)
        60.0,
        low=1.0,  # reciprocal rank fusion divides by k + rank
        group=RANKING,
        label="Fact ranking constant",
        help="Smooths how facts found by meaning and by words are combined.",
    )

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
    recall_min_score: float = param(
        0.4,
        low=None,  # a ranking score: any finite number
        group=QUOTING,
        label="Quote a page from score",
        help="Pages scoring less are never quoted, however much room.",
    )
    # ...but in a small memory one shared word is worth a lot to BM25 ("What game do I play at night?"
    # matched "I've been learning to play the violin" at cos 0.07): a page over that floor must also be
    # this close in meaning (its own cosine; a page ranked for its dialogue neighbour is exempt)
    recall_keyword_min_similarity: float = param(
        0.2,
        low=-1.0,
        high=1.0,
        group=QUOTING,
        label="…and at least this close in meaning",
        help="A page over the score must still be this close in meaning.",
    )
    # and a page that shares no word with the message is quoted when its meaning alone matches: cosine
    # at least recall_min_similarity and recall_min_standout above the usual cosine of the memory's other
    # pages (retrieval.typical_cosine; "What is the name of my dog?" -> "I adopted a beagle called
    # Pepper": cos 0.47, the usual 0.07)
    recall_min_similarity: float = param(
        0.3,
        low=-1.0,
        high=1.0,
        group=QUOTING,
        label="Quote for meaning alone from",
        help="A page this close in meaning is quoted without shared words (if it stands out, below).",
    )
    recall_min_standout: float = param(
        0.22,
        low=-2.0,  # a cosine over the usual one
        high=2.0,
        group=QUOTING,
        label="…standing out by",
        help="How far above the memory's usual closeness such a page must be.",
    )
    # the conversation's own pages are recalled like any other page, except those of its last
    # `recall_own_after` exchanges: they are the dialogue right above the new message. A fact said
    # many messages back is then quoted again beside the question (the bundled 135M model lost the
    # name of a dog said eight exchanges earlier: tests.bench.long_chat)
    recall_own_after: int = param(
        2,
        low=0,
        group=QUOTING,
        label="Not quoting the last exchanges",
        help="The chat's last exchanges are right above your message: they are not quoted again.",
    )
    # a reply's prompt quotes at most this many turns of recalled pages, taken side by side in the order
    # of Retrieval.sides (a page's better side first), from the best `recall_turns` pages. 14 keeps the
    # prompt as long as when it quoted up to ten whole pages (docs/decisions/0007-turns-ranked-one-by-one.md)
    recall_turns: int = param(
        14,
        low=0,
        group=QUOTING,
        label="Turns quoted at most",
        help="How many recalled turns (messages or replies) a prompt quotes.",
    )


@dataclass
class JobParams:
    """Background jobs and housekeeping."""

    # jobs / housekeeping
    job_max_attempts: int = param(
        3,
        low=1,
        group=BACKGROUND,
        label="Tries per memory update",
        help="A memory update that fails is tried this many times.",
    )
    events_keep: int = param(
        20000,
        low=0,
        group=BACKGROUND,
        label="Log entries kept",
        help="The newest entries of the memory log that are kept.",
    )
    import_batch: int = param(
        64,
        low=1,
        group=BACKGROUND,
        label="Import batch",
        help="Pages written per step of an import.",
    )


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
    def info(cls, name: str) -> ParamInfo:
        """The bounds, group, label and help declared on the field of the parameter `name` (`param`);
        KeyError for a name that is none."""
        info: ParamInfo = _FIELD_OF[name].metadata[PARAM]
        return info

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
_FIELD_OF: dict[str, Field] = {f.name: f for _, f in MemoryParams.flat_fields()}


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
    """What memory holds from one conversation (see `store.curation.conversation_memory`)."""

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
