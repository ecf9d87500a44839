"""Page ranking as named stages over one `Candidates` object.

`rank_pages` runs STAGE_ORDER in turn; each stage reads the `ParsedQuery` and what earlier stages left in
`Candidates`, and adds its own part. A stage named in `RankingDeps.off` is switched off (the ablation of
`mnemo eval locomo --ablate`): it adds nothing, and the ranking goes on without it. The stages that can be
switched off are SWITCHABLE; each one's docstring lists the MemoryParams fields it reads.

Nothing here holds store state: the store's helpers come in as `RankingDeps`, built in one place
(`Retriever._ranking_deps`).

The MemoryParams each stage reads:
    dense        dense_candidates
    (the trace)  segment_candidates: how many topics of the recalled pages it lists
    keyword      keyword_candidates (and, in parsing, the keyword query: memory_core.recall.query)
    trigram      keyword_candidates
    tokens       w_tokens
    fuse         w_dense, w_keyword, w_tokens, date_boost ("date")
    neighbours   neighbor_prev, neighbor_next, neighbor_max_gap_s (and neighbours_ahead, while embedding:
                 neighbor_prev, neighbor_next)
    finalize     neighbor_prev, neighbor_next, neighbor_context ("neighbour_context")
    askings      asked_weight, w_keyword, w_tokens
    select       none ("repeats" passes over earlier askings; "others" weighs other people's pages)
    rank_sides   other_side_drop, other_side_spread ("sides")
    (parsing)    common_word_df, common_word_mix ("common_words")
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .. import text as T
from ..pages import token_match
from ..storage.vecindex import MatrixCache
from ..types import MemoryParams, Page, PageHit, SideHit
from .query import ParsedQuery
from .space_filter import SpaceScope

# What an unrelated page's cosine to a query usually is with the bundled all-MiniLM-L6-v2 (0.02-0.12
# over the pages of tests/bench/quote_floor.py): counted as this many pages beside the memory's own, so a
# memory of a few pages, one of them an earlier asking of the same question, still has a sensible usual
UNRELATED_COSINE = 0.1
UNRELATED_PRIOR_PAGES = 5

# share of a query's candidate pages that may lack token vectors (computed on the spot); above
# it the word-by-word match waits for the "index_tokens" job, so no page is ranked on it alone
TOKEN_MISSING_MAX = 0.1


def typical_cosine(others: np.ndarray) -> float:
    """The usual cosine of a query to the memory's other pages: their median, with
    UNRELATED_PRIOR_PAGES pages at UNRELATED_COSINE beside them. A median, because the pages on the
    query's topic (earlier askings of it above all) must not raise what "usual" means."""
    return float(np.median(_with_prior(others)))


def _with_prior(cosines: np.ndarray) -> np.ndarray:
    return np.concatenate([cosines, np.full(UNRELATED_PRIOR_PAGES, UNRELATED_COSINE)])


def typical_cosine_without(ordered: np.ndarray, value: float) -> float:
    """`typical_cosine` of a sample less one of its pages, from the sample with its prior sorted once
    (`ordered`) and that page's cosine `value`: the same median, without a new array per page."""
    r = int(np.searchsorted(ordered, value))  # an occurrence of value: the rest lie on either side

    def at(i: int) -> np.float64:
        return ordered[i] if i < r else ordered[i + 1]

    m = len(ordered) - 1
    return float(at(m // 2)) if m % 2 else float((at(m // 2 - 1) + at(m // 2)) / 2)


@dataclass
class RankingDeps:
    """The store's helpers that ranking calls (see `Retriever._ranking_deps`).

    execute(sql, params) -> cursor; pages_by_ids(ids) -> {id: Page}; page_cache: the in-memory page
    matrix (synced by the caller); embed_page_tokens(rows of (id, user, assistant)) -> [(token blob,
    sides blob)] or None without a token embedder; stale: (last page done, last to do) while a changed
    model re-embeds (those pages' cosines mean nothing); off: the stages switched off."""

    execute: Callable[[str, Any], Any]
    pages_by_ids: Callable[[Sequence[int]], dict[int, Page]]
    page_cache: MatrixCache
    params: MemoryParams
    dim: int
    embed_page_tokens: Callable[[Sequence[tuple[int, str, str]]], list[tuple[bytes, bytes]]] | None = None
    stale: tuple[int, int] | None = None
    off: frozenset[str] = frozenset()
    scope: SpaceScope | None = None  # the memory spaces read (None: every page may be recalled)
    # runs a function on another thread (the retriever's embedding thread, idle by then) and gives its
    # future: the word-by-word match splits its work in two with it. None: everything on this thread
    beside: Callable[[Callable[[], Any]], Future] | None = None

    def in_scope(self, pid: int) -> bool:
        return self.scope is None or self.scope.allows(pid)

    def is_stale(self, pid: int) -> bool:
        return self.stale is not None and self.stale[0] < pid <= self.stale[1]

    def fresh(self, scores: dict[int, float]) -> dict[int, float]:
        """`scores` without the pages whose vectors are still the old model's."""
        return scores if self.stale is None else {i: c for i, c in scores.items() if not self.is_stale(i)}


@dataclass
class Candidates:
    """The pages under consideration and every stage's part of their scores."""

    n: int  # pages asked for
    exclude: set[int]  # pages never returned (the dialogue above the message)
    conversation_id: int | None
    cos_of: dict[int, float] = field(default_factory=dict)  # page -> cosine to the query
    sample_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sample_cos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    usual: float = UNRELATED_COSINE  # typical_cosine of the sample
    sample_sorted: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the sample and its prior, sorted
    kw_of: dict[int, float] = field(default_factory=dict)  # page -> scaled BM25 (0..1)
    tok_rows: dict[int, bytes] = field(default_factory=dict)  # page -> its token rows, read while embedding
    tok_early: dict[int, float] = field(default_factory=dict)  # word-by-word scores of `tok_rows`' pages
    tok_of: dict[int, float] = field(default_factory=dict)  # page -> word-by-word score
    pool: set[int] = field(default_factory=set)
    info: dict[int, tuple] = field(default_factory=dict)  # page -> (id, segment_id, tier, conversation_id, ts)
    score: dict[int, float] = field(default_factory=dict)  # fused base score
    # page -> (the page before it, the page after it) in its conversation, read while the query is embedded
    # for the keyword matches (`neighbours_ahead`), and by `neighbours` for the rest of the strong pages
    adjacent: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    info_ahead: dict[int, tuple] = field(default_factory=dict)  # page rows of those neighbours, read ahead
    prev_of: dict[int, int] = field(default_factory=dict)  # dialogue neighbours within neighbor_max_gap_s
    next_of: dict[int, int] = field(default_factory=dict)
    via: dict[int, int] = field(default_factory=dict)  # page -> the neighbour whose score it inherited
    final: dict[int, float] = field(default_factory=dict)
    askings: set[int] = field(default_factory=set)  # pages demoted as askings
    others: set[int] = field(default_factory=set)  # pages of other people's dialogues, weighed less
    chosen: list[int] = field(default_factory=list)
    repeats: list[int] = field(default_factory=list)  # earlier askings of this question, passed over
    pages: dict[int, Page] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- stages
def dense(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """Dense KNN over every page (the in-memory matrix), so segmentation never hides a page. Pages whose
    vectors are the old model's are left out (keywords and word rows still find them). Reads
    dense_candidates."""
    if "dense" in d.off:
        return
    k = d.params.ranking.dense_limit(c.n)
    with d.page_cache.lock:  # the mask is of the rows as they are now
        mask = d.scope.row_mask(d.page_cache) if d.scope is not None else None
        ids, scores = d.page_cache.search(pq.vec, k, c.exclude, mask)
    c.cos_of = d.fresh({int(i): float(s) for i, s in zip(ids, scores)})


def usual(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The cosine of a sample of pages: what "usual" is, for each page's standout (the quoting floor).
    Judged among the pages the chat reads, and those the query can be compared with. Reads no parameter."""
    sample_ids, sample_cos = d.page_cache.sample_scores(pq.vec)
    if d.scope is not None:  # what pages usually score is judged among the pages the chat reads
        keep = d.scope.allowed(sample_ids)
        sample_ids, sample_cos = sample_ids[keep], sample_cos[keep]
    if d.stale is not None:  # the usual cosine of pages the query can be compared with
        keep = ~((sample_ids > d.stale[0]) & (sample_ids <= d.stale[1]))
        sample_ids, sample_cos = sample_ids[keep], sample_cos[keep]
    c.sample_ids, c.sample_cos = sample_ids, sample_cos
    c.usual = typical_cosine(sample_cos)
    c.sample_sorted = np.sort(_with_prior(sample_cos))


def keyword(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """BM25 over the query's OR query of content words (porter). BM25 is scaled by the summed IDF of
    the query's terms (the score of a page that holds each term once), so a page matching only a common
    word stays low, whatever the best page scored. Reads keyword_candidates."""
    kq = pq.keyword
    if "keyword" in d.off or not (kq.fts or kq.recent):
        return
    sql = "SELECT rowid, -bm25(page_fts) FROM page_fts WHERE page_fts MATCH ? {} ORDER BY rank LIMIT ?"
    if kq.recent is None:
        rows = d.execute(sql.format(""), (kq.fts, _keyword_limit(c, d))).fetchall()
    else:
        # the frequent terms among the newest pages (query.KEYWORD_POSTINGS): BM25 adds up over terms
        summed: dict[int, float] = {}
        searches = [(kq.fts, "", ()), (kq.recent, "AND rowid >= ?", (kq.since,))]
        for match, where, args in searches:
            if match:
                for pid, sc in d.execute(sql.format(where), (match, *args, _keyword_limit(c, d))).fetchall():
                    summed[pid] = summed.get(pid, 0.0) + sc
        rows = sorted(summed.items(), key=lambda r: (-r[1], r[0]))[: _keyword_limit(c, d)]
    rows = _in_scope(rows, c, d)
    if rows:
        scale = pq.keyword.scale or max(sc for _, sc in rows)
        for pid, sc in rows:
            c.kw_of[pid] = min(1.0, max(0.0, sc) / scale) if scale > 0 else 0.0


def trigram(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The trigram table for CJK text (unicode61 keeps a CJK run as one token): scaled by the best
    match, it adds to the keyword score (max). Reads keyword_candidates."""
    if "trigram" in d.off or not pq.trigram:
        return
    rows = d.execute(
        "SELECT rowid, -bm25(page_tri) FROM page_tri WHERE page_tri MATCH ? ORDER BY rank LIMIT ?",
        (pq.trigram, _keyword_limit(c, d)),
    ).fetchall()
    rows = _in_scope(rows, c, d)
    top = max((sc for _, sc in rows), default=0.0)
    if top > 0:
        for pid, sc in rows:
            c.kw_of[pid] = max(c.kw_of.get(pid, 0.0), sc / top)


# a chat that reads some of the memory's spaces asks the keyword index for this many times
# the keyword matches it ranks, and keeps the first of its spaces
SCOPED_KEYWORD_FACTOR = 4


def _keyword_limit(c: Candidates, d: RankingDeps) -> int:
    n = d.params.ranking.keyword_limit(c.n)
    return n if d.scope is None else SCOPED_KEYWORD_FACTOR * n


def _in_scope(rows: list[tuple[int, float]], c: Candidates, d: RankingDeps) -> list[tuple[int, float]]:
    """Keyword rows (page, score) less the excluded pages and those of spaces not read."""
    kept = [(pid, sc) for pid, sc in rows if pid not in c.exclude and d.in_scope(pid)]
    return kept[: d.params.ranking.keyword_limit(c.n)]


def prefetch(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The keyword matches' page rows and token rows, read while the query is being embedded (they need
    no vector), so `pool` and `tokens` read only the dense matches'. Reads no parameter."""
    page_info(c.kw_of, c.info, d)
    if _tokens_on(d):
        c.tok_rows.update(token_rows(c.kw_of, d))


def pool(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The candidates: dense and keyword matches, with their page rows (segment, tier, conversation,
    time). Reads no parameter."""
    c.pool = set(c.cos_of) | set(c.kw_of)
    page_info((i for i in c.pool if i not in c.info), c.info, d)


def _tokens_on(d: RankingDeps) -> bool:
    return "tokens" not in d.off and d.params.ranking.w_tokens > 0


def tokens(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """Word by word: each content word of the query against the page's words (token_match). Reads w_tokens."""
    if pq.tokens is None or not _tokens_on(d):
        return
    c.tok_of = token_scores(pq.tokens, c.pool, d, c.tok_rows, c.tok_early)


def keyword_tokens(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The word-by-word match of the keyword matches, whose rows `prefetch` read: the retriever runs it while
    the dense stages may still run on the other thread; `tokens` then scores the rest of the pool."""
    if pq.tokens is None or not _tokens_on(d) or not c.tok_rows:
        return
    ids = list(c.tok_rows)
    sims = _maxsim(pq.tokens, [c.tok_rows[i] for i in ids], d)
    c.tok_early = {pid: float(v) for pid, v in zip(ids, sims)}


def fuse(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The base score of every candidate (see `base_scores`); the cosine of candidates the KNN did not
    return is read from the matrix. Reads w_dense, w_keyword, w_tokens, date_boost."""
    missing = [i for i in c.pool if i not in c.cos_of]
    if missing:
        c.cos_of.update(d.fresh(d.page_cache.scores_for(pq.vec, missing)))
    c.score = base_scores(c.info, c, pq, d)


def _neighbours_on(d: RankingDeps) -> bool:
    p = d.params.ranking
    return "neighbours" not in d.off and (p.neighbor_prev > 0 or p.neighbor_next > 0)


def _joining(ids: Iterable[int], c: Candidates, d: RankingDeps) -> set[int]:
    """The dialogue neighbours (`c.adjacent`) of these pages that are not candidates yet and may be recalled."""
    return {
        o
        for i in ids
        for o in c.adjacent[i]
        if o is not None and o not in c.info and o not in c.exclude and d.in_scope(o)
    }


def neighbours_ahead(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The dialogue neighbours of the keyword matches, read while the query is being embedded (the matches
    are known before the vector): which pages they are, their page rows and their token rows, so that
    `neighbours` reads only those of the strong pages the dense search alone found, and `keyword_tokens`
    scores these rows with the matches'. Reads neighbor_prev, neighbor_next (whether to read at all)."""
    if not _neighbours_on(d) or not c.kw_of:
        return
    c.adjacent.update(adjacent_pages([i for i in c.kw_of if i not in c.adjacent], d))
    ahead = _joining(c.kw_of, c, d)
    page_info(ahead, c.info_ahead, d)
    if _tokens_on(d):
        c.tok_rows.update(token_rows((i for i in ahead if i not in c.tok_rows), d))


def neighbours(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """Dialogue neighbours: the page before/after each strong page in the same conversation (within
    neighbor_max_gap_s) joins the candidates, so `finalize` can pass scores between them. Reads
    neighbor_prev, neighbor_next, neighbor_max_gap_s."""
    p = d.params
    if not _neighbours_on(d):
        return
    strong = sorted(c.score, key=lambda i: -c.score[i])[: max(30, 3 * c.n)]
    c.adjacent.update(adjacent_pages([i for i in strong if i not in c.adjacent], d))
    rows = [(pid, *c.adjacent[pid]) for pid in strong]
    new_ids = _joining(strong, c, d)
    if new_ids:
        c.info.update({i: c.info_ahead[i] for i in new_ids if i in c.info_ahead})
        page_info((i for i in new_ids if i not in c.info), c.info, d)

    def near(pid: int, other: int) -> bool:
        return (
            other in c.info
            and other not in c.exclude
            and d.in_scope(other)
            and abs(c.info[other][4] - c.info[pid][4]) <= p.ranking.neighbor_max_gap_s
        )

    for pid, pr, nx in rows:
        if pr is not None and near(pid, pr):
            c.prev_of[pid], c.next_of[pr] = pr, pid
        if nx is not None and near(pid, nx):
            c.next_of[pid], c.prev_of[nx] = nx, pid
    if new_ids:
        c.cos_of.update(d.fresh(d.page_cache.scores_for(pq.vec, [i for i in new_ids if i not in c.cos_of])))
        if c.tok_of and pq.tokens is not None:  # word scores exist only for a query with content-token rows
            c.tok_of.update(token_scores(pq.tokens, new_ids, d, c.tok_rows, c.tok_early))
        c.score.update(base_scores({pid: c.info[pid] for pid in new_ids if pid in c.info}, c, pq, d))


def finalize(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """Every candidate's final score from its base score and its neighbours' (`final_score`). Reads
    neighbor_prev, neighbor_next, neighbor_context."""
    c.final = final_scores(c, d)


def askings(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """Scale the askings among the best pages by `asked_weight`: a page of Mnemo's own chats that
    only asks a short question holds the model's reply, not something the user said. Its keyword
    match goes first (its score ranked without it): a question on the topic holds the new question's
    words because it asks the same thing, which says nothing of an answer. An earlier asking of the
    query itself keeps its score: `select` passes over it and lists it as skipped at its rank.
    Only pages that could still be among the best n (with a margin) are read; a page a demotion
    lets rise into them is read on the next pass. Reads asked_weight, w_keyword, w_tokens."""
    p = d.params
    if "askings" in d.off or p.ranking.asked_weight == 1.0:
        return
    checked: set[int] = set()
    while True:
        top = sorted(c.final, key=lambda i: (-c.final[i], i))[: c.n + 10]
        unread = [pid for pid in top if pid not in checked]
        if not unread:
            return
        checked.update(unread)
        for pid in asking_pages(unread, pq.text, d):
            unechoed = (
                c.score[pid] - p.ranking.w_keyword * c.kw_of.get(pid, 0.0) - p.ranking.w_tokens * c.tok_of.get(pid, 0.0)
            )
            c.final[pid] = max(0.0, final_score(pid, unechoed, c, d)) * p.ranking.asked_weight
            c.askings.add(pid)


# A question in the first person ("Where do I live?") is about the user: a page of a conversation
# between other people (an imported dialogue whose `people.me` is None, app.importers.people) weighs
# this much beside the user's own (rule "others", decision 0020, measured by tests/bench/whose_memory.py)
OTHERS_WEIGHT = 0.3
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|us|our|ours|ourselves)\b", re.IGNORECASE)


def first_person(text: str) -> bool:
    """Whether a question speaks of its asker ("Where do I live?", "what's my dog called"); "US" in
    capitals is the country ("Which US cities did John visit?")."""
    return any(m.group() != "US" for m in _FIRST_PERSON.finditer(text.replace("\u2019", "'")))


def weigh_others(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """Rule "others" (inside `select`): for a question in the first person, the final score of every
    candidate from a conversation of other people x OTHERS_WEIGHT, so what the user said in their own
    chats ranks first unless a stranger's line matches far better; other people's pages stay recallable
    (a memory with nothing of the user's on it still answers). A question without "I", "my", "we"...
    ("When did Caroline move?"), or one that names a speaker of the page's dialogue ("What did Caroline
    tell me?"), ranks as before, and a dialogue the user is in (`me` names a speaker) is theirs too."""
    if "others" in d.off or not c.final or not first_person(pq.text):
        return
    rows = d.execute(
        "SELECT id, json_extract(meta, '$.people.user_side'), json_extract(meta, '$.people.assistant_side') "
        "FROM page WHERE id IN (SELECT value FROM json_each(?)) AND "
        "CASE WHEN json_valid(meta) THEN json_type(meta, '$.people.me') END = 'null'",
        (json.dumps(list(c.final)),),
    ).fetchall()
    named: dict[str, bool] = {}
    for pid, *people in rows:
        if any(named.setdefault(p, _names(pq.text, p)) for p in people if isinstance(p, str)):
            continue
        c.final[pid] *= OTHERS_WEIGHT
        c.others.add(pid)


def _names(text: str, name: str) -> bool:
    return bool(name.strip()) and re.search(r"\b" + re.escape(name.strip()) + r"\b", text, re.IGNORECASE) is not None


def select(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> None:
    """The best n pages, passing over earlier askings of this same question in Mnemo's own chats
    (T.repeats_question; stage "repeats"): the reply there is what the model answered then. In an
    imported dialogue (a conversation with a source) the reply is the record, e.g. the other person's
    answer. Other people's pages weigh less first (`weigh_others`, rule "others"). Reads no parameter."""
    weigh_others(c, pq, d)
    ranked = sorted(c.final, key=lambda i: (-c.final[i], i))
    start = 0
    while len(c.chosen) < c.n and start < len(ranked):
        batch = ranked[start : start + c.n - len(c.chosen) + 4]
        start += len(batch)
        c.pages.update(d.pages_by_ids(batch))
        asked = (
            []
            if "repeats" in d.off
            else [pid for pid in batch if pid in c.pages and T.repeats_question(pq.text, c.pages[pid].user_text)]
        )
        imported = imported_conversations([c.pages[pid].conversation_id for pid in asked], d) if asked else set()
        for pid in batch:
            if pid not in c.pages or len(c.chosen) >= c.n:
                continue
            if pid in asked and c.pages[pid].conversation_id not in imported:
                c.repeats.append(pid)
            else:
                c.chosen.append(pid)


Stage = tuple[str, Callable[[Candidates, ParsedQuery, RankingDeps], None]]
# The stages in the order they run; "date", "neighbour_context" and "repeats" are rules inside
# fuse / finalize / select that can be switched off on their own, and "common_words" acts in parsing.
# TEXT_STAGES read only the query's text: the retriever runs them while the query is being embedded.
# DENSE_STAGES read only the vector and the in-memory page matrix (no SQL): the retriever runs them on the
# embedding thread straight after the embedding (the usual cosine there, or here if that thread is still
# busy), while this one finishes the text stages, ranks the facts and matches the keyword matches word by
# word (Retriever._recall). VECTOR_STAGES follow.
TEXT_STAGES: tuple[Stage, ...] = (
    ("keyword", keyword),
    ("trigram", trigram),
    ("prefetch", prefetch),
    ("neighbours_ahead", neighbours_ahead),
)
NEAREST_STAGES: tuple[Stage, ...] = (("dense", dense),)
USUAL_STAGES: tuple[Stage, ...] = (("usual", usual),)
DENSE_STAGES: tuple[Stage, ...] = NEAREST_STAGES + USUAL_STAGES
VECTOR_STAGES: tuple[Stage, ...] = (
    ("pool", pool),
    ("tokens", tokens),
    ("fuse", fuse),
    ("neighbours", neighbours),
    ("finalize", finalize),
    ("askings", askings),
    ("select", select),
)
STAGE_ORDER: tuple[Stage, ...] = TEXT_STAGES + DENSE_STAGES + VECTOR_STAGES
SWITCHABLE = (
    "common_words",
    "dense",
    "keyword",
    "trigram",
    "tokens",
    "date",
    "neighbours",
    "neighbour_context",
    "askings",
    "repeats",
    "sides",
    "others",
)
# which timing key each stage's time goes to (the keys `Retrieval.timings_ms` has always had)
_TIMING = {
    "dense": "dense",
    "usual": "usual",
    "keyword": "keyword",
    "trigram": "keyword",
    "prefetch": "candidates",
    "neighbours_ahead": "neighbours",
    "pool": "candidates",
    "tokens": "tokens",
    "fuse": "candidates",
    "neighbours": "neighbours",
    "finalize": "assemble",
    "askings": "askings",
    "select": "assemble",
}


def run_stages(
    c: Candidates, pq: ParsedQuery, d: RankingDeps, timings: dict[str, float], stages: Sequence[Stage] = STAGE_ORDER
) -> None:
    """These stages (default: all, STAGE_ORDER) in turn, each one's time added to its timing key (ms)."""
    for name, stage in stages:
        t = time.perf_counter()
        stage(c, pq, d)
        key = _TIMING[name]
        timings[key] = timings.get(key, 0.0) + (time.perf_counter() - t) * 1000


# ---------------------------------------------------------------------------------------------- scores
def base_scores(info: dict[int, tuple], c: Candidates, pq: ParsedQuery, d: RankingDeps) -> dict[int, float]:
    """Each page of `info` (page -> its page_info row): w_dense x cosine + w_keyword x keyword + w_tokens x
    word by word, + date_boost inside a date the query names (rule "date"). The parameters are read once: a
    few hundred candidates a query."""
    p = d.params.ranking
    wd = 0.0 if "dense" in d.off else p.w_dense
    wk, wt = p.w_keyword, p.w_tokens
    cos, kw, tok = c.cos_of, c.kw_of, c.tok_of
    dated = bool(pq.windows) and "date" not in d.off
    out: dict[int, float] = {}
    for pid, row in info.items():
        s = wd * cos.get(pid, 0.0) + wk * kw.get(pid, 0.0) + wt * tok.get(pid, 0.0)
        if dated and pq.in_window(row[4]):
            s += p.date_boost
        out[pid] = s
    return out


def _neighbour_weights(d: RankingDeps) -> tuple[float, float, float]:
    """(neighbor_prev, neighbor_next, neighbor_context or 0 with the rule "neighbour_context" off)."""
    p = d.params.ranking
    wc = p.neighbor_context if p.neighbor_context > 0 and "neighbour_context" not in d.off else 0.0
    return p.neighbor_prev, p.neighbor_next, wc


def _with_neighbours(
    own: float, pr: int | None, nx: int | None, score: dict[int, float], w: tuple[float, float, float]
) -> tuple[float, int | None]:
    """A page's final score from its own `own` and its neighbours' scores, and the neighbour it inherited
    from (None: its own). See `final_score`."""
    best, ctx, via = own, 0.0, None
    for o, weight in ((pr, w[0]), (nx, w[1])):  # the page before first
        if o is not None and o in score:
            so = score[o]
            ctx = max(ctx, so)
            if weight * so > best:
                best, via = weight * so, o
    return best + w[2] * ctx, via


def final_scores(c: Candidates, d: RankingDeps) -> dict[int, float]:
    """`final_score` of every candidate from the base scores (`c.score`), recording in `c.via` which
    neighbour each inherited from; the weights read once."""
    w = _neighbour_weights(d)
    out: dict[int, float] = {}
    for pid, own in c.score.items():
        out[pid], via = _with_neighbours(own, c.prev_of.get(pid), c.next_of.get(pid), c.score, w)
        if via is None:
            c.via.pop(pid, None)
        else:
            c.via[pid] = via
    return out


def final_score(
    pid: int, own: float, c: Candidates, d: RankingDeps, score: dict[int, float] | None = None, track: bool = True
) -> float:
    """A page's score from its own base score `own` and its dialogue neighbours' (`score`, default the
    base scores): it inherits neighbor_prev / neighbor_next of a neighbour's score when that is more
    (`track` records in `c.via` which neighbour), adds neighbor_context of the better neighbour's score
    (rule "neighbour_context": pages inside an on-topic passage rank above isolated look-alikes). An
    archive page ranks as any other: a penalty for the tier showed no worth in the benchmarks."""
    score = c.score if score is None else score
    best, via = _with_neighbours(own, c.prev_of.get(pid), c.next_of.get(pid), score, _neighbour_weights(d))
    if track:
        if via is None:
            c.via.pop(pid, None)
        else:
            c.via[pid] = via
    return best


# ---------------------------------------------------------------------------------------------- hits
def assemble(c: Candidates, pq: ParsedQuery, d: RankingDeps) -> tuple[list[PageHit], list[int], list[PageHit]]:
    """The chosen pages as PageHits with the reasons they were chosen; the segments that supplied them
    (to be visited) and the earlier askings passed over (skipped)."""
    p = d.params
    # the same scores without the word-by-word match: what the quoting floor was measured on
    # (every page matches a query's words somewhat, so the match says how alike, not whether)
    wordless = (
        {pid: s - p.ranking.w_tokens * c.tok_of.get(pid, 0.0) for pid, s in c.score.items()} if c.tok_of else c.score
    )
    word_re = {w: re.compile(r"\b" + re.escape(w), re.IGNORECASE) for w in pq.stems}
    # where the chosen pages that are in the sample sit in it (their standout leaves their own cosine out)
    in_sample = np.flatnonzero(np.isin(c.sample_ids, np.asarray(c.chosen, dtype=np.int64)))
    sampled = {int(c.sample_ids[k]): int(k) for k in in_sample[::-1]}  # reversed: the first of a repeat wins
    hits: list[PageHit] = []
    visited: list[int] = []
    for pid in c.chosen:
        page = c.pages.get(pid)
        if page is None:
            continue
        cos, standout, parts = _similarity(pid, c, d, sampled)
        if pid in c.kw_of:
            matched = [w for w in word_re if word_re[w].search(page.text)][:4]
            parts.append("keyword match " + ", ".join(f"'{m}'" for m in matched) if matched else "keyword match")
        parts.extend(_reasons(pid, page, c, pq, d))
        match = (
            c.final[pid] if pid in c.askings or not c.tok_of else final_score(pid, wordless[pid], c, d, wordless, False)
        )
        hits.append(
            PageHit(
                page,
                c.final[pid],
                " + ".join(parts),
                page.tier,
                inherited_from=c.via.get(pid),
                similarity=cos,
                standout=standout,
                match_score=match,
            )
        )
        if page.segment_id is not None and page.segment_id not in visited:
            visited.append(page.segment_id)
    skipped = [
        PageHit(
            c.pages[pid], c.final[pid], "the same question, asked before: its reply is not evidence", c.pages[pid].tier
        )
        for pid in c.repeats
    ]
    return hits, visited, skipped


def _similarity(
    pid: int, c: Candidates, d: RankingDeps, sampled: dict[int, int]
) -> tuple[float | None, float | None, list[str]]:
    """A chosen page's cosine, its standout over the usual cosine, and the reason's first part (`sampled`:
    page -> its place in the usual cosine's sample)."""
    if d.is_stale(pid):
        # its vector is still the old model's: its meaning is not known yet, not 0 (the quoting
        # floor then goes by the score alone, as for a page with no cosine of its own)
        return None, None, ["meaning not compared yet (re-embedding)"]
    cos = c.cos_of.get(pid, 0.0)
    # An earlier asking gets no standout: it is like the question because it asks the same
    # thing, which says nothing of the answer (it is quoted only on its demoted score)
    if pid in c.askings:
        standout = None
    elif pid in sampled:
        own = c.sample_cos[sampled[pid]]
        standout = cos - typical_cosine_without(c.sample_sorted, float(own))
    else:
        standout = cos - c.usual
    return cos, standout, [f"cos {cos:.2f}" + (f" ({standout:+.2f} over the usual)" if standout is not None else "")]


def _reasons(pid: int, page: Page, c: Candidates, pq: ParsedQuery, d: RankingDeps) -> list[str]:
    parts = []
    if pid in c.tok_of:
        parts.append(f"word by word {c.tok_of[pid]:.2f}")
    if pq.windows and "date" not in d.off and pq.in_window(page.timestamp):
        parts.append("date named in the question")
    if pid in c.via:
        parts.append(f"{'follows' if c.via[pid] < pid else 'precedes'} page {c.via[pid]}")
    if page.tier == "archive":
        parts.append("from the archive")
    if c.conversation_id is not None and page.conversation_id == c.conversation_id:
        parts.append("said earlier in this conversation")
    if pid in c.others:
        parts.append(f"said by other people, and the question is about you (× {OTHERS_WEIGHT:g})")
    if pid in c.askings:
        parts.append(f"a question asked in a chat (its keyword match not counted, × {d.params.ranking.asked_weight:g})")
    return parts


def rank_sides(hits: list[PageHit], q: np.ndarray, d: RankingDeps) -> list[SideHit]:
    """The turns of the ranked pages one by one: a page's side nearer the query keeps the page's score,
    the other scores `other_side_drop` + `other_side_spread` x their cosine gap less; a page without side
    vectors (or with the stage "sides" off) stays whole. Sets each hit's `side_similarity`.
    Reads other_side_drop, other_side_spread."""
    p = d.params
    ids = [h.page.id for h in hits]
    blobs = (
        dict(
            d.execute(
                "SELECT page_id, sides FROM page_tok WHERE page_id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),),
            ).fetchall()
        )
        if ids and "sides" not in d.off
        else {}
    )
    units: list[tuple[float, int, SideHit]] = []
    cosines = token_match.side_cosines([blobs.get(i) for i in ids], q, d.dim)
    for rank, (h, sides) in enumerate(zip(hits, cosines)):
        if sides is None:
            units.append((h.score, 2 * rank, SideHit(h, "page", h.score)))
            continue
        cu, ca = sides
        h.side_similarity = (cu, ca)
        better, other = ("user", "assistant") if cu >= ca else ("assistant", "user")
        lower = h.score - p.ranking.other_side_drop - p.ranking.other_side_spread * abs(cu - ca)
        units.append((h.score, 2 * rank, SideHit(h, better, h.score)))
        units.append((lower, 2 * rank + 1, SideHit(h, other, lower)))
    units.sort(key=lambda u: (-u[0], u[1]))
    return [u for _, _, u in units]


# ---------------------------------------------------------------------------------------------- reads
def page_info(ids: Iterable[int], info: dict[int, tuple], d: RankingDeps) -> None:
    """(id, segment_id, tier, conversation_id, timestamp) of these pages, into `info`."""
    ids = sorted(ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for r in d.execute(
            f"SELECT id, segment_id, tier, conversation_id, timestamp FROM page WHERE id IN ({marks})", chunk
        ).fetchall():
            info[r[0]] = r


def adjacent_pages(ids: Sequence[int], d: RankingDeps) -> dict[int, tuple[int | None, int | None]]:
    """(the page before, the page after) each of these pages in its conversation; none for a page outside one."""
    if not ids:
        return {}
    out: dict[int, tuple[int | None, int | None]] = dict.fromkeys(ids, (None, None))
    for pid, before, after in d.execute(
        "SELECT p.id, (SELECT q.id FROM page q WHERE q.conversation_id = p.conversation_id AND q.id < p.id "
        "ORDER BY q.id DESC LIMIT 1), (SELECT q.id FROM page q WHERE q.conversation_id = p.conversation_id "
        "AND q.id > p.id ORDER BY q.id LIMIT 1) FROM page p WHERE p.id IN (SELECT value FROM json_each(?)) "
        "AND p.conversation_id IS NOT NULL",
        (json.dumps(list(ids)),),
    ).fetchall():
        out[pid] = (before, after)
    return out


def token_rows(ids: Iterable[int], d: RankingDeps) -> dict[int, bytes]:
    """The stored token rows (`page_tok`) of these pages; a page without one is left out."""
    ids = sorted(ids)
    rows: dict[int, bytes] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows.update(d.execute(f"SELECT page_id, vecs FROM page_tok WHERE page_id IN ({marks})", chunk).fetchall())
    return rows


def token_scores(
    q_tokens: np.ndarray,
    ids: Iterable[int],
    d: RankingDeps,
    known_rows: dict[int, bytes] | None = None,
    scored: dict[int, float] | None = None,
) -> dict[int, float]:
    """token_match.maxsim of the query for these pages, from `page_tok` (`known_rows`: those already
    read; `scored`: those already scored). Pages without a row (indexing still running) are embedded now
    when they are few; when they are many, none is scored (every page is ranked without the match alike)."""
    ids = sorted(ids)
    if not ids:
        return {}
    known_rows = known_rows or {}
    scored = {i: scored[i] for i in ids if i in scored} if scored else {}
    rows = {i: known_rows[i] for i in ids if i in known_rows and i not in scored}
    rows.update(token_rows((i for i in ids if i not in rows and i not in scored), d))
    missing = [i for i in ids if i not in rows and i not in scored]
    if missing:
        if d.embed_page_tokens is None or len(missing) > TOKEN_MISSING_MAX * len(ids):
            return {}
        texts = d.execute(
            "SELECT id, user_text, assistant_text FROM page WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(missing),),
        ).fetchall()
        rows.update(zip([pid for pid, _, _ in texts], [b for b, _ in d.embed_page_tokens(texts)]))
    known = [i for i in ids if i in rows]
    sims = _maxsim(q_tokens, [rows[i] for i in known], d)
    return {**scored, **{pid: float(v) for pid, v in zip(known, sims)}}


# the word-by-word match of at least this many pages is split between two threads (`RankingDeps.beside`)
SPLIT_MATCH_PAGES = 64


def _maxsim(q_tokens: np.ndarray, blobs: list[bytes], d: RankingDeps) -> np.ndarray:
    """token_match.maxsim_packed of these blobs, half of them on the other thread when there is one:
    numpy releases the GIL for the unpacking and the products, so the two halves run side by side. When
    the other thread has not started its half by the time this one is done with its own (it is still
    busy, e.g. with the dense stages), this one takes it back and does it too."""
    if d.beside is None or len(blobs) < SPLIT_MATCH_PAGES:
        return token_match.maxsim_packed(q_tokens, blobs, d.dim)
    half = len(blobs) // 2
    rest = partial(token_match.maxsim_packed, q_tokens, blobs[half:], d.dim)
    other = d.beside(rest)
    first = token_match.maxsim_packed(q_tokens, blobs[:half], d.dim)
    return np.concatenate([first, taken_back(other, rest)])


def taken_back(pending: Future, work: Callable[[], Any]) -> Any:
    """The result of work handed to another thread (`pending`): waited for once that thread has started it;
    if it has not (still busy with something else), cancelled there and done here (`work`) instead."""
    return work() if pending.cancel() else pending.result()


def asking_pages(ids: Sequence[int], query: str, d: RankingDeps) -> set[int]:
    """Of these pages, those of Mnemo's own chats (not imported: there a question and its reply
    are the record) whose user side only asks a short question (`T.only_asks`). A page the user
    pinned keeps its score; a long message is more than a question, so its text is not read."""
    rows = d.execute(
        "SELECT p.id, p.user_text FROM page p JOIN conversation c ON c.id = p.conversation_id "
        "WHERE c.source IS NULL AND p.pinned = 0 AND length(p.user_text) <= 400 "
        "AND p.id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(ids)),),
    ).fetchall()
    return {pid for pid, text in rows if T.only_asks(text) and not T.repeats_question(query, text)}


def imported_conversations(conversation_ids: Sequence[int | None], d: RankingDeps) -> set[int]:
    """Which of these conversations were imported (have a source)."""
    return {
        cid
        for (cid,) in d.execute(
            "SELECT id FROM conversation WHERE source IS NOT NULL AND id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(conversation_ids)),),
        )
    }


def finish_ranking(
    c: Candidates, pq: ParsedQuery, d: RankingDeps, timings: dict[str, float]
) -> tuple[list[PageHit], list[dict], list[int], list[PageHit]]:
    """VECTOR_STAGES over the candidates of TEXT_STAGES and DENSE_STAGES, then the hits: the best `n` pages
    (hits), the topics they came from (trace rows), the segments that supplied a hit (to be visited) and the
    earlier askings passed over."""
    run_stages(c, pq, d, timings, VECTOR_STAGES)
    t = time.perf_counter()
    hits, visited, skipped = assemble(c, pq, d)
    timings["assemble"] = timings.get("assemble", 0.0) + (time.perf_counter() - t) * 1000
    return hits, recalled_topics(hits, d.params.ranking.segment_candidates), visited, skipped


def recalled_topics(hits: list[PageHit], k: int) -> list[dict]:
    """The trace's topics: the segments the recalled pages belong to (at most `k`), best page first, each with
    how many of the pages it held. Segments do not weigh in the ranking (decision 0014): searching their
    centroids for the trace cost as much as a ranking stage and said less than the pages' own topics."""
    best: dict[int, float] = {}
    held: dict[int, int] = {}
    for h in hits:
        sid = h.page.segment_id
        if sid is not None:
            best[sid] = max(best.get(sid, h.score), h.score)
            held[sid] = held.get(sid, 0) + 1
    order = sorted(best, key=lambda sid: (-best[sid], sid))[: max(1, k)]
    return [
        {
            "segment_id": sid,
            "score": round(best[sid], 4),
            "reason": f"topic of {held[sid]} recalled page{'s' if held[sid] != 1 else ''}",
        }
        for sid in order
    ]


def rank_pages(
    pq: ParsedQuery,
    exclude: set[int],
    n: int,
    d: RankingDeps,
    timings: dict[str, float],
    conversation_id: int | None = None,
) -> tuple[list[PageHit], list[dict], list[int], list[PageHit]]:
    """Every stage in one go, for a query already embedded (the retriever runs them on two threads)."""
    c = Candidates(n=n, exclude=exclude, conversation_id=conversation_id)
    run_stages(c, pq, d, timings, TEXT_STAGES + DENSE_STAGES)
    return finish_ranking(c, pq, d, timings)
