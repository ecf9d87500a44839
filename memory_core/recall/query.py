"""A query parsed once for retrieval (`ParsedQuery`): what every ranking stage reads of the question.

The text is read here and nowhere else in ranking: its content words, keywords, the dates it names,
its keyword (FTS5) queries and the words they search for, its common words (words on most pages), and
its embedding. Parsing needs a few facts of the store (how many pages hold a term, the keyword index's
own stemmer); they come in as plain callables (`TermStats`), so this module holds no store state.

MemoryParams read here: common_word_df, common_word_mix (common words and the query vector mix),
keyword_candidates (the keyword query's last resort).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .. import text as T
from ..pages import token_match
from ..types import MemoryParams

# Terms beyond this are left out of the keyword query (FTS5's OR of a whole paragraph is slow and says little)
MAX_KEYWORD_TERMS = 24
# Above this many pages, a term on more than RARE_SHARE of them leaves the keyword query (see keyword_query)
RARE_FROM_PAGES = 5000
RARE_SHARE = 0.2
# A memory smaller than this has no common words (too few pages to tell what is on most of them)
COMMON_MIN_PAGES = 20
# FTS5 scores every page that holds a query term before it keeps the best (~1.5 µs a match): the terms of a
# keyword query may match about this many pages in all. Past it the most frequent terms (a word on thousands
# of pages: only in a memory of tens of thousands) are searched among the newest pages only, in a window of
# ids that holds about the rest of this many of their matches (see `keyword_query`)
KEYWORD_POSTINGS = 4000


@dataclass
class TermStats:
    """The keyword index's view of terms, for one query: `stems(word)` as the porter tokenizer writes it,
    `doc_count(term)` the pages holding a term (memoised in `counts` for the query), `pages` the page count."""

    stems: Callable[[str], list[str]]
    lookup: Callable[[str], int]
    pages: int
    counts: dict[str, int] = field(default_factory=dict)
    last_id: Callable[[], int] = lambda: 0  # the newest page's id (the window of frequent terms)

    def doc_count(self, term: str) -> int:
        if term not in self.counts:
            self.counts[term] = self.lookup(term)
        return self.counts[term]


@dataclass
class KeywordQuery:
    """The FTS5 OR query over the porter table (None: no keyword search), the summed BM25 IDF of its
    terms (0: scale by the best match instead), and the words it searches for (what a trace names)."""

    fts: str | None = None
    scale: float = 0.0
    words: list[str] = field(default_factory=list)
    # the most frequent terms, searched only among pages of id `since` or more (KEYWORD_POSTINGS)
    recent: str | None = None
    since: int = 0


@dataclass
class ParsedQuery:
    """Everything ranking reads of the question, computed once per retrieval."""

    text: str
    content_words: list[str]
    keywords: list[str]  # T.keywords(text, 20): matched against segment keywords (Jaccard)
    windows: list[tuple[float, float]]  # time windows of the dates the question names
    trigram: str | None  # FTS5 query of the trigram table (CJK)
    common_words: list[str] = field(default_factory=list)
    vector: np.ndarray | None = None  # unit query vector (mixed with the one without common words)
    tokens: np.ndarray | None = None  # content-token rows (token_match), common words left out
    keyword: KeywordQuery = field(default_factory=KeywordQuery)
    term_counts: dict[str, int] = field(default_factory=dict)  # pages per index term, looked up once

    @property
    def vec(self) -> np.ndarray:
        """The query vector, for the stages: retrieval ranks only a query that `set_vectors` embedded."""
        if self.vector is None:
            raise ValueError("the query was not embedded")
        return self.vector

    @property
    def stems(self) -> list[str]:
        """The keyword words as stems (sorted): what a page's text is searched for to name its match."""
        return sorted({T.stem(w) for w in self.keyword.words if not T.has_cjk(w)})

    def in_window(self, timestamp: float) -> bool:
        return any(a <= timestamp < b for a, b in self.windows)


def parse_text(text: str, now: float) -> ParsedQuery:
    """The parts of the query that need nothing but its text (and the time, for relative dates)."""
    return ParsedQuery(
        text=text,
        content_words=T.content_words(text),
        keywords=T.keywords(text, 20),
        windows=T.date_windows(text, now),
        trigram=T.fts_trigram_query(text),
    )


def common_words(pq: ParsedQuery, stats: TermStats, params: MemoryParams) -> list[str]:
    """The query's content words that are in at least `params.ranking.common_word_df` of the pages (a memory
    of COMMON_MIN_PAGES pages or more): in the query vector they match every page alike, and the one
    speaker a question names pulls it toward the pages where the other speaker says that name."""
    if params.ranking.common_word_mix <= 0 or params.ranking.common_word_df <= 0 or stats.pages < COMMON_MIN_PAGES:
        return []
    common = []
    for w in dict.fromkeys(pq.content_words):
        dfs = [stats.doc_count(st) for st in stats.stems(w)]
        if dfs and min(dfs) >= params.ranking.common_word_df * stats.pages:
            common.append(w)
    return common


def texts_to_embed(pq: ParsedQuery) -> list[str]:
    """The query, and the query without its common words when they are not all it asks about
    ("Tell me about Melanie": then the common word stays, and `pq.common_words` is emptied)."""
    if not pq.common_words:
        return [pq.text]
    stripped = T.without_words(pq.text, pq.common_words)
    if not T.content_words(stripped):
        pq.common_words = []
        return [pq.text]
    return [pq.text, stripped]


def set_vectors(
    pq: ParsedQuery,
    vecs: np.ndarray,
    per_text: list[tuple[np.ndarray, list[str]]] | None,
    params: MemoryParams,
) -> None:
    """The query vector from the embeddings of `texts_to_embed`: the query's own, mixed by
    `common_word_mix` with the one without common words; and the query's content-token rows."""
    pq.tokens = (
        token_match.query_matrix(per_text[0][0], per_text[0][1], drop=pq.common_words) if per_text is not None else None
    )
    q = vecs[0]
    if len(vecs) == 1:
        pq.vector = q
        return
    v = (1.0 - params.ranking.common_word_mix) * q + params.ranking.common_word_mix * vecs[1]
    norm = float(np.linalg.norm(v))
    pq.vector = v / norm if norm > 0 else q


def keyword_query(pq: ParsedQuery, stats: TermStats, params: MemoryParams, asked: int) -> KeywordQuery:
    """The FTS5 OR query of the query's content words, with the summed BM25 IDF of its terms (as FTS5
    computes them) and the words it searches for.

    Terms no page contains are left out; in a large store (> RARE_FROM_PAGES pages) so are terms found in
    more than RARE_SHARE of the pages, which add little to BM25 but make it score most of the table.
    So are terms on half the pages or more beside one that is not; when there is none, no query (None)
    if they are on more pages than the search returns (`RankingParams.keyword_limit` of the pages
    `asked` for).
    """
    words: list[str] = []
    for w in pq.content_words:
        if not T.has_cjk(w) and w not in words:
            words.append(w)
    if not words:
        # CJK words: unicode61 keeps a run as one token, so the porter table may still hold it.
        # Only stop words ("Hi!", "How are you?"): no keyword search. Its scores are relative to the
        # best match, so a page holding "his" (porter: "hi") would get a full keyword score.
        return KeywordQuery(T.fts_or_query(pq.text), 0.0, pq.content_words) if pq.content_words else KeywordQuery()
    n = stats.pages
    df = stats.doc_count
    terms: list[tuple[str, list[str]]] = []
    for w in words[:MAX_KEYWORD_TERMS]:
        stems = stats.stems(w)
        if stems and max(df(st) for st in stems) > 0:
            terms.append((w, stems))
    if not terms:
        return KeywordQuery()
    if n > RARE_FROM_PAGES:
        rare = [t for t in terms if max(df(st) for st in t[1]) <= RARE_SHARE * n]
        terms = rare or sorted(terms, key=lambda t: max(df(st) for st in t[1]))[:2]

    def raw_idf(st: str) -> float:  # FTS5's, before it clamps a negative one to 1e-6
        return math.log((max(n, df(st)) - df(st) + 0.5) / (df(st) + 0.5))

    telling = [t for t in terms if any(raw_idf(st) > 0 for st in t[1])]
    if telling:
        # a word on half the pages or more adds nothing to BM25 beside these (its IDF is clamped to 1e-6),
        # but would make every page holding it a candidate "keyword match": left out
        terms = telling
    elif max(df(st) for _, stems in terms for st in stems) > params.ranking.keyword_limit(asked):
        # every term is on half the pages or more (a speaker's name in every imported message): BM25 can
        # only say which pages hold them, and when more pages do than the search returns, which
        # `keyword_limit` it returns is arbitrary (the shortest): scaled by the clamped IDF, each
        # would get a full keyword match over the rest. Fewer are all returned (a small memory, or a
        # word on 60 of 100 pages), and keep their matches.
        return KeywordQuery()
    idf = sum(max(1e-6, raw_idf(st)) for st in {st for _, stems in terms for st in stems} if df(st) > 0)
    counts = [max(df(st) for st in stems) for _, stems in terms]
    whole = _rarest_within(counts, KEYWORD_POSTINGS)
    if len(whole) == len(terms):
        return KeywordQuery(_or_query(terms), idf, [w for w, _ in terms])
    # the rest, frequent, among the newest pages only: a window of ids that holds about the rest of the bound
    share = max(1, KEYWORD_POSTINGS - sum(counts[i] for i in whole))
    matches = sum(c for i, c in enumerate(counts) if i not in whole)
    last = stats.last_id()
    since = max(0, last - int(last * share / matches))
    searched = [t for i, t in enumerate(terms) if i in whole]
    frequent = [t for i, t in enumerate(terms) if i not in whole]
    return KeywordQuery(_or_query(searched), idf, [w for w, _ in terms], _or_query(frequent), since)


def _or_query(terms: list[tuple[str, list[str]]]) -> str | None:
    return " OR ".join('"' + w.replace('"', '""') + '"' for w, _ in terms) or None


def _rarest_within(counts: list[int], bound: int) -> set[int]:
    """The terms (by index) searched among every page: the rarest, while their matches (`counts`) stay within
    `bound` (all of them when they do). BM25 adds up over terms with each term's IDF taken from the whole
    index, so the rest, searched among the newest pages only, adds up with them as in one search."""
    kept: set[int] = set()
    used = 0
    for i in sorted(range(len(counts)), key=lambda i: counts[i]):
        if used + counts[i] > bound:
            break
        kept.add(i)
        used += counts[i]
    return kept
