"""Retrieval: STM of the conversation + hybrid page ranking + LPM (facts and persona traits).

The query is parsed once (memory_core.recall.query.ParsedQuery); pages are ranked by the named stages of
memory_core.recall.ranking (dense KNN, FTS5 BM25, word by word, dates, dialogue neighbours, askings, sides),
which reach the store only through the RankingDeps built in `_ranking_deps`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial

import apsw

from .. import text as T
from ..pages.component import Pages
from ..pages.embedding import Embedding
from ..persona.component import TRAIT_COLS, Persona
from ..segments.component import Segments
from ..storage.codec import vec_blob as _blob
from ..storage.database import Database
from ..storage.schema import is_storage_full
from ..storage.vecindex import MatrixCache
from ..types import Knowledge, KnowledgeHit, PageHit, Retrieval, RetrievalBudget, TraitHit
from ..upkeep import Upkeep
from .query import ParsedQuery, TermStats, common_words, keyword_query, parse_text, set_vectors, texts_to_embed
from .ranking import (
    NEAREST_STAGES,
    SCOPED_KEYWORD_FACTOR,
    TEXT_STAGES,
    UNRELATED_COSINE,
    UNRELATED_PRIOR_PAGES,
    USUAL_STAGES,
    Candidates,
    RankingDeps,
    finish_ranking,
    keyword_tokens,
    rank_sides,
    run_stages,
    taken_back,
    typical_cosine,
)
from .space_filter import SpaceMap, SpaceScope

log = logging.getLogger("memory_core")

__all__ = ["UNRELATED_COSINE", "UNRELATED_PRIOR_PAGES", "Retriever", "typical_cosine"]


class Retriever:
    """Recall: the conversation's STM, the best other pages, facts and the persona for a query."""

    def __init__(
        self,
        db: Database,
        embedding: Embedding,
        pages: Pages,
        segments: Segments,
        persona: Persona,
        upkeep: Upkeep,
        page_cache: MatrixCache,
    ):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.segments = segments
        self.persona = persona
        self.upkeep = upkeep
        self._page_cache = page_cache
        self._porter_tok: apsw.FTS5Tokenizer | None = None  # made at the first query
        self._embed_thread: ThreadPoolExecutor | None = None  # made at the first query
        self._space_map = SpaceMap()

    def retrieve(
        self,
        query: str,
        conversation_id: int | None = None,
        budget: RetrievalBudget | None = None,
        *,
        record_visits: bool = False,
        off: Iterable[str] = (),
        spaces: frozenset[int] | None = None,
    ) -> Retrieval:
        """Recall memory for `query`.

        - stm: the conversation's short-term pages, oldest first (all, or the newest `budget.stm`);
        - pages: the best other pages (MTM and archive, any conversation, including other
          conversations' STM and this one's older than its last `params.quoting.recall_own_after`
          exchanges), best first, each with a score and the reason it was chosen;
        - knowledge: the best user/assistant facts; traits: the active persona, in a stable order.
        With `record_visits`, segments that supplied a page get a visit (N_visit + 1) in one short write;
        by default none do: a chat reply records visits only for the pages its prompt quoted
        (`store.segments.record_quoted_pages`), so a recall nobody read heats nothing.
        `off`: ranking stages switched off (memory_core.recall.ranking.SWITCHABLE), for the ablation.
        `spaces`: the memory spaces recalled from (None: all); the STM is the conversation's own.
        """
        budget = budget or RetrievalBudget()
        query = T.valid_text(query)
        off = frozenset(off)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        # the query vector serves pages and knowledge; persona traits alone need none (prompt warming)
        pq = parse_text(query, self.db.clock()) if budget.pages > 0 or budget.knowledge > 0 else None
        embedding = self._embed_query(pq, timings, off) if pq is not None else None
        t1 = time.perf_counter()
        out = Retrieval(query=query, common_words=list(pq.common_words) if pq is not None else [])
        visited: list[int] = []
        with self.db.lock:
            self.db.check()
            stm_ids, out.stm = self._stm(conversation_id, budget.stm)
            timings["stm"] = (time.perf_counter() - t1) * 1000
            ranked = False  # `_recall` reads the traits too, while the query is embedded
            if pq is not None and embedding is not None and budget.pages > 0:
                visited = self._recall(out, pq, embedding, stm_ids, budget, timings, conversation_id, off, spaces)
                ranked = True
            elif pq is not None and embedding is not None:
                vecs, per_text = embedding.result()
                set_vectors(pq, vecs, per_text, self.db.params)
                out.knowledge = self._rank_knowledge(pq, budget.knowledge, spaces)
            if budget.traits > 0 and not ranked:
                out.traits = self._select_traits(budget.traits)
            t4 = time.perf_counter()
            if record_visits and visited and not self.db.in_transaction:
                try:
                    self.segments.record_visits(visited)
                except Exception as exc:
                    if not is_storage_full(exc):
                        raise
                    # heat bookkeeping only: recall still answers when the disk is full
                    log.warning("segment visits not recorded: %s", exc)
            timings["visits"] = (time.perf_counter() - t4) * 1000
        timings["total"] = (time.perf_counter() - t0) * 1000
        out.timings_ms = timings
        return out

    def _embed_query(self, pq: ParsedQuery, timings: dict[str, float], off: frozenset[str]) -> Future:
        """The query's embedding, started on the embedding thread: its common words are looked up first (a
        fraction of a millisecond), so that the query without them, when it has some, is embedded in the same
        batch (one encoder run for both: an imported dialogue's speaker names are on every page)."""
        self._common_words(pq, timings, off)
        return self._embed_async(texts_to_embed(pq), timings)

    def _recall(
        self,
        out: Retrieval,
        pq: ParsedQuery,
        embedding: Future,
        stm_ids: list[int],
        budget: RetrievalBudget,
        timings: dict[str, float],
        conversation_id: int | None,
        off: frozenset[str],
        spaces: frozenset[int] | None,
    ) -> list[int]:
        """Pages (and facts) for the query into `out`; returns the segments that supplied a page.

        Two threads share the work. The embedding thread embeds the query and, queued straight behind it,
        searches the nearest pages (ranking.NEAREST_STAGES: the page matrix, no SQL), so that search starts
        the moment the vector exists; then it takes the usual cosine (USUAL_STAGES), unless this thread has
        taken that back by then (`ranking.taken_back`). Meanwhile this one runs the keyword search
        (ranking.TEXT_STAGES), reads the persona traits and, once the vector is known, ranks the facts and
        matches the keyword matches word by word, half of that on the other thread if it is free by then
        (`RankingDeps.beside`). ONNX Runtime, SQLite and numpy release the GIL, so on two cores the two
        threads' work costs the longer of the two, not their sum.
        SQL stays on this thread: an apsw connection refuses a second thread while it is busy."""
        p = self.db.params
        # the newest exchanges are the dialogue above the message; older ones are memory
        recent = set(stm_ids[-p.quoting.recall_own_after :]) if p.quoting.recall_own_after > 0 else set()
        tr = time.perf_counter()
        deps = self._ranking_deps(off, self._space_map.scope(self.db.execute, spaces))
        if not self.db.in_transaction:
            self._page_cache.sync(self.db.conn)  # before the dense search below reads the matrix
        timings["deps"] = (time.perf_counter() - tr) * 1000
        c = Candidates(n=budget.pages, exclude=recent, conversation_id=conversation_id)
        vector: Future = Future()  # set once the embedding thread has put the query's vectors into `pq`
        assert self._embed_thread is not None  # the embedding runs on it
        dense_done = self._embed_thread.submit(self._dense_behind, embedding, vector, c, pq, deps, timings)
        usual = partial(run_stages, c, pq, deps, timings, USUAL_STAGES)
        usual_done = self._embed_thread.submit(usual)
        tb = time.perf_counter()
        pq.keyword = keyword_query(pq, self._term_stats(pq.term_counts), p, budget.pages)
        timings["keyword_query"] = (time.perf_counter() - tb) * 1000
        run_stages(c, pq, deps, timings, TEXT_STAGES)
        if budget.traits > 0:  # they need no vector: read before waiting for it
            out.traits = self._select_traits(budget.traits)
        tw = time.perf_counter()
        vector.result()
        timings["embed_wait"] = (time.perf_counter() - tw) * 1000
        t3 = time.perf_counter()
        if budget.knowledge > 0:
            out.knowledge = self._rank_knowledge(pq, budget.knowledge, spaces)
        timings["lpm"] = (time.perf_counter() - t3) * 1000
        tk = time.perf_counter()
        keyword_tokens(c, pq, deps)
        timings["keyword_tokens"] = (time.perf_counter() - tk) * 1000
        taken_back(usual_done, usual)
        tw = time.perf_counter()
        dense_done.result()
        timings["dense_wait"] = (time.perf_counter() - tw) * 1000
        out.pages, out.segments, visited, out.skipped = finish_ranking(c, pq, deps, timings)
        ts = time.perf_counter()
        out.sides = rank_sides(out.pages, pq.vec, deps)
        timings["sides"] = (time.perf_counter() - ts) * 1000
        return visited

    def _dense_behind(
        self,
        embedding: Future,
        vector: Future,
        c: Candidates,
        pq: ParsedQuery,
        deps: RankingDeps,
        timings: dict[str, float],
    ) -> None:
        """On the embedding thread, right after the query's embedding (done by then: the thread runs one job
        at a time): the query's vectors into `pq`, told through `vector`, then the nearest pages' search."""
        try:
            vecs, per_text = embedding.result()
            set_vectors(pq, vecs, per_text, self.db.params)
        except BaseException as exc:
            vector.set_exception(exc)
            raise
        vector.set_result(None)
        run_stages(c, pq, deps, timings, NEAREST_STAGES)

    def _embed_async(self, texts: list[str], timings: dict[str, float]) -> Future:
        """Embed `texts` on the embedding thread; the future gives (vectors, token rows) and puts the
        embedding's own time in timings["embed"]. Why a thread: ONNX Runtime and SQLite both release
        the GIL, so the keyword search runs beside the embedding (docs/benchmarks.md)."""

        def run() -> tuple:
            t = time.perf_counter()
            try:
                return self.embedding.embed_with_tokens(texts)
            finally:
                timings["embed"] = (time.perf_counter() - t) * 1000

        if self._embed_thread is None:
            self._embed_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemo-query-embed")
        return self._embed_thread.submit(run)

    def close(self) -> None:
        """Stop the embedding thread (the store is closing)."""
        if self._embed_thread is not None:
            self._embed_thread.shutdown(wait=False)
            self._embed_thread = None

    def _stm(self, conversation_id: int | None, shown_max: int | None) -> tuple[list[int], list[PageHit]]:
        """The conversation's STM page ids, oldest first, and the newest `shown_max` (None: all) as hits."""
        if conversation_id is None:
            return [], []
        stm_ids = [
            r[0]
            for r in self.db.execute(
                "SELECT id FROM page WHERE tier = 'stm' AND conversation_id = ? ORDER BY id", (conversation_id,)
            ).fetchall()
        ]
        shown = stm_ids if shown_max is None else (stm_ids[-shown_max:] if shown_max > 0 else [])
        pages = self.pages.by_ids(shown)
        hits = [
            PageHit(pages[i], 1.0, "short-term memory (recent dialogue of this conversation)", "stm")
            for i in shown
            if i in pages
        ]
        return stm_ids, hits

    def warm_up(self) -> None:
        """Load the in-memory page matrix now (a few seconds at 100k pages) instead of at the first
        retrieval; call it from a background thread at start-up."""
        with self.db.lock:
            self.db.check()
            if not self.db.in_transaction:
                self._page_cache.sync(self.db.conn)

    # ------------------------------------------------------------------ pages
    def _ranking_deps(self, off: frozenset[str] = frozenset(), scope: SpaceScope | None = None) -> RankingDeps:
        """The store's helpers that ranking (memory_core.recall.ranking) calls: the one place they are named."""
        return RankingDeps(
            execute=self.db.execute,
            pages_by_ids=self.pages.by_ids,
            page_cache=self._page_cache,
            params=self.db.params,
            dim=self.db.dim,
            embed_page_tokens=self.upkeep.page_token_blobs if self.embedding.embed_tokens_fn is not None else None,
            stale=self.upkeep.reembedding(),
            off=off,
            scope=scope,
            beside=self._embed_thread.submit if self._embed_thread is not None else None,
        )

    def _term_stats(self, counts: dict[str, int]) -> TermStats:
        """The keyword index's stems and term counts for one query (`counts`: its memo)."""
        n = len(self._page_cache) or self.db.execute("SELECT count(*) FROM page").fetchone()[0]
        return TermStats(
            stems=self._stems,
            lookup=self._page_doc_count,
            pages=n,
            counts=counts,
            last_id=lambda: int(self.db.scalar("SELECT coalesce(max(id), 0) FROM page") or 0),
        )

    def _stems(self, word: str) -> list[str]:
        """`word` as the keyword index's porter tokenizer writes it (its terms)."""
        tok = self._porter_tok
        if tok is None:
            tok = self._porter_tok = self.db.conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        return [t[2] for t in tok(word.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None) if len(t) > 2]

    def _page_doc_count(self, term: str) -> int:
        """How many pages hold `term` (the keyword index's own count)."""
        row = self.db.execute("SELECT doc FROM page_fts_vocab WHERE term = ?", (term,)).fetchone()
        return row[0] if row else 0

    def _common_words(self, pq: ParsedQuery, timings: dict[str, float], off: frozenset[str]) -> None:
        """The parsed query's common words (memory_core.recall.query.common_words), looked up in the keyword index."""
        t0 = time.perf_counter()
        p = self.db.params
        with self.db.lock:
            self.db.check()
            if p.ranking.common_word_mix > 0 and p.ranking.common_word_df > 0 and "common_words" not in off:
                if not self.db.in_transaction:
                    self._page_cache.sync(self.db.conn)  # the page count now, not at the last query
                pq.common_words = common_words(pq, self._term_stats(pq.term_counts), p)
        timings["common_words"] = (time.perf_counter() - t0) * 1000

    # ------------------------------------------------------------------ what a statement says
    def memory_saying(
        self,
        statement: str,
        *,
        owner: str = "user",
        min_cos: float | None = None,
        page_limit: int = 200,
        spaces: frozenset[int] | None = None,
    ) -> tuple[list[tuple[Knowledge, float]], list[int]]:
        """The facts and pages that say `statement` ("my locker code is 4312"), for a request to
        forget it. Facts: active ones of `owner` whose embedding is at least `min_cos` alike
        (default `update_threshold`, the bar for "the same fact, updated"), or whose words hold the
        statement's or are held by them. Pages: those that contain every content word of it (two
        at least: one word, "birthday", would take every page that mentions one). `spaces`: only
        facts and pages of these memory spaces (a chat's read set; None: every space). Read-only."""
        statement = T.valid_text(statement).strip()
        if not statement:
            return [], []
        bar = self.db.params.persona.update_threshold if min_cos is None else min_cos
        said = " ".join(T.words(statement))
        q = self.embedding.embed([statement])[0]
        facts = []
        for kid, dist in self.db.execute(
            "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = 8", (_blob(q),)
        ).fetchall():
            item = self.persona.get_knowledge(kid)
            if item is None or item.owner != owner or item.status != "active":
                continue
            if spaces is not None and item.space_id not in spaces:
                continue
            cos, text = 1.0 - float(dist), " ".join(T.words(item.text))
            if cos >= bar or (said and (f" {said} " in f" {text} " or f" {text} " in f" {said} ")):
                facts.append((item, cos))
        pages: list[int] = []
        content = list(dict.fromkeys(T.content_words(statement)))
        if len(content) >= 2:
            match = " AND ".join(f'"{w}"' for w in content)
            try:
                pages = [
                    r[0]
                    for r in self.db.execute(
                        "SELECT rowid FROM page_fts WHERE page_fts MATCH ? LIMIT ?", (match, page_limit)
                    ).fetchall()
                ]
            except apsw.SQLError:  # a word FTS5 cannot take as a term: no page is said to hold it
                pages = []
        if spaces is not None and pages:
            inside = self.db.execute(
                "SELECT id FROM page WHERE id IN (SELECT value FROM json_each(?)) "
                "AND space_id IN (SELECT value FROM json_each(?))",
                (json.dumps(pages), json.dumps(sorted(spaces))),
            ).fetchall()
            pages = [r[0] for r in inside]
        return facts, sorted(pages)

    # ------------------------------------------------------------------ knowledge and traits
    def _rank_knowledge(self, pq: ParsedQuery, n: int, spaces: frozenset[int] | None = None) -> list[KnowledgeHit]:
        p = self.db.params
        query, q = pq.text, pq.vec
        k = max(20, 4 * n) * (1 if spaces is None else SCOPED_KEYWORD_FACTOR)
        dense = {
            kid: 1.0 - float(d)
            for kid, d in self.db.execute(
                "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = ?", (_blob(q), k)
            )
        }
        kw: dict[int, int] = {}
        fq = T.fts_or_query(query)
        if fq:
            for (kid,) in self.db.execute(
                "SELECT rowid FROM knowledge_fts WHERE knowledge_fts MATCH ? ORDER BY rank LIMIT ?", (fq, k)
            ).fetchall():
                kw.setdefault(kid, len(kw))
        tq = T.fts_trigram_query(query)
        if tq:
            for (kid,) in self.db.execute(
                "SELECT rowid FROM knowledge_tri WHERE knowledge_tri MATCH ? ORDER BY rank LIMIT ?", (tq, k)
            ).fetchall():
                kw.setdefault(kid, len(kw))
        d_rank = {kid: r for r, kid in enumerate(sorted(dense, key=lambda i: -dense[i]))}
        cands = set(dense) | set(kw)
        if spaces is not None and cands:
            cands = {
                kid
                for (kid,) in self.db.execute(
                    "SELECT id FROM knowledge WHERE id IN (SELECT value FROM json_each(?)) "
                    "AND space_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(sorted(cands)), json.dumps(sorted(spaces))),
                )
            }
        if not cands:
            return []
        scored = []
        for kid in cands:
            s = 0.0
            if kid in d_rank:
                s += p.ranking.w_dense / (p.ranking.rrf_k + d_rank[kid])
            if kid in kw:
                s += p.ranking.w_keyword / (p.ranking.rrf_k + kw[kid])
            scored.append((s, kid))
        scored.sort(key=lambda x: (-x[0], x[1]))
        out: list[KnowledgeHit] = []
        for _s, kid in scored:
            item = self.persona.get_knowledge(kid)
            if item is None or item.status != "active":
                continue
            parts = []
            if kid in dense:
                parts.append(f"similar (cos {dense[kid]:.2f})")
            if kid in kw:
                parts.append("keyword match")
            if item.pinned:
                parts.append("pinned")
            out.append(KnowledgeHit(item, dense.get(kid, 0.0), " + ".join(parts)))
            if len(out) >= n:
                break
        return out

    def _select_traits(self, n: int) -> list[TraitHit]:
        """The active persona: pinned first, then most confident; returned in a stable order
        (dimension, id) so the prompt prefix stays byte-identical between turns."""
        rows = self.db.execute(
            f"SELECT {TRAIT_COLS} FROM trait t WHERE t.status = 'active' "
            "ORDER BY t.pinned DESC, t.confidence DESC, t.id LIMIT ?",
            (n,),
        ).fetchall()
        items = sorted((self.persona.trait_from_row(r) for r in rows), key=lambda t: (t.dimension, t.id))
        return [
            TraitHit(
                t,
                t.confidence,
                "pinned persona trait" if t.pinned else f"persona trait (confidence {t.confidence:.2f})",
            )
            for t in items
        ]
