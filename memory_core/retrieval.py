"""Retrieval: STM of the conversation + hybrid page ranking (dense KNN, segments, FTS5 BM25) + LPM."""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable

import apsw
import numpy as np

from . import text as T
from . import token_match
from .codec import from_json, vec_blob
from .database import Database
from .db import is_storage_full
from .embedding import Embedding
from .pages import Pages
from .persona import TRAIT_COLS, Persona
from .segments import Segments
from .types import Knowledge, KnowledgeHit, PageHit, Retrieval, RetrievalBudget, SideHit, TraitHit
from .upkeep import Upkeep
from .vecindex import MatrixCache

log = logging.getLogger("memory_core")


# What an unrelated page's cosine to a query usually is with the bundled all-MiniLM-L6-v2 (0.02-0.12
# over the pages of tests/bench/quote_floor.py): counted as this many pages beside the memory's own, so a
# memory of a few pages, one of them an earlier asking of the same question, still has a sensible usual
UNRELATED_COSINE = 0.1
UNRELATED_PRIOR_PAGES = 5


def typical_cosine(others: np.ndarray) -> float:
    """The usual cosine of a query to the memory's other pages: their median, with
    UNRELATED_PRIOR_PAGES pages at UNRELATED_COSINE beside them. A median, because the pages on the
    query's topic (earlier askings of it above all) must not raise what "usual" means."""
    return float(np.median(np.concatenate([others, np.full(UNRELATED_PRIOR_PAGES, UNRELATED_COSINE)])))


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

    def retrieve(
        self,
        query: str,
        conversation_id: int | None = None,
        budget: RetrievalBudget | None = None,
        *,
        record_visits: bool = True,
    ) -> Retrieval:
        """Recall memory for `query`.

        - stm: the conversation's short-term pages, oldest first (all, or the newest `budget.stm`);
        - pages: the best other pages (MTM and archive, any conversation, including other
          conversations' STM and this one's older than its last `params.recall_own_after`
          exchanges), best first, each with a score and the reason it was chosen;
        - knowledge: the best user/assistant facts; traits: the active persona, in a stable order.
        Segments that supplied a page get a visit (N_visit + 1) in one short write.
        """
        budget = budget or RetrievalBudget()
        query = T.valid_text(query)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        # the query vector serves pages and knowledge; persona traits alone need none (prompt warming)
        common: list[str] = []
        doc_counts: dict[str, int] = {}  # pages per keyword-index term, looked up once per query
        q, q_tokens = (
            self._query_vector(query, timings, common, doc_counts)
            if budget.pages > 0 or budget.knowledge > 0
            else (None, None)
        )
        t1 = time.perf_counter()
        timings["embed"] = (t1 - t0) * 1000 - timings.get("common_words", 0.0)
        out = Retrieval(query=query, common_words=common)
        with self.db.lock:
            self.db.check()
            # --- STM of this conversation
            stm_ids: list[int] = []
            if conversation_id is not None:
                stm_ids = [
                    r[0]
                    for r in self.db.execute(
                        "SELECT id FROM page WHERE tier = 'stm' AND conversation_id = ? ORDER BY id", (conversation_id,)
                    ).fetchall()
                ]
                shown = stm_ids if budget.stm is None else (stm_ids[-budget.stm :] if budget.stm > 0 else [])
                pages = self.pages.by_ids(shown)
                out.stm = [
                    PageHit(pages[i], 1.0, "short-term memory (recent dialogue of this conversation)", "stm")
                    for i in shown
                    if i in pages
                ]
            t2 = time.perf_counter()
            timings["stm"] = (t2 - t1) * 1000
            if budget.pages > 0:
                # the newest exchanges are the dialogue above the message; older ones are memory
                recent = (
                    set(stm_ids[-self.db.params.recall_own_after :]) if self.db.params.recall_own_after > 0 else set()
                )
                out.pages, out.segments, visited, out.skipped = self._rank_pages(
                    query, q, recent, budget.pages, timings, conversation_id, doc_counts, q_tokens
                )
                ts = time.perf_counter()
                out.sides = self._rank_sides(out.pages, q)
                timings["sides"] = (time.perf_counter() - ts) * 1000
            else:
                visited = []
            t3 = time.perf_counter()
            if budget.knowledge > 0:
                out.knowledge = self._rank_knowledge(query, q, budget.knowledge)
            if budget.traits > 0:
                out.traits = self._select_traits(budget.traits)
            t4 = time.perf_counter()
            timings["lpm"] = (t4 - t3) * 1000
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

    def warm_up(self) -> None:
        """Load the in-memory page matrix now (a few seconds at 100k pages) instead of at the first
        retrieval; call it from a background thread at start-up."""
        with self.db.lock:
            self.db.check()
            if not self.db.in_transaction:
                self._page_cache.sync(self.db.conn)

    # ------------------------------------------------------------------ pages
    def _rank_pages(
        self,
        query: str,
        q: np.ndarray,
        exclude: set[int],
        n: int,
        timings: dict,
        conversation_id: int | None = None,
        doc_counts: dict[str, int] | None = None,
        q_tokens: np.ndarray | None = None,
    ):
        p = self.db.params
        ta = time.perf_counter()
        if not self.db.in_transaction:
            self._page_cache.sync(self.db.conn)
        tb = time.perf_counter()
        timings["cache_sync"] = (tb - ta) * 1000

        # 1. direct dense KNN over every page (in-memory matrix), so segmentation never hides a page.
        #    While a changed embedding model re-embeds the memory, the pages not done yet hold the old
        #    model's vectors: their cosine means nothing against this query and is left out (keywords and
        #    word rows still find them), and so are segment vectors, which mix both models.
        stale = self.upkeep.reembedding()

        def fresh(scores: dict[int, float]) -> dict[int, float]:
            return scores if stale is None else {i: c for i, c in scores.items() if not stale[0] < i <= stale[1]}

        d_ids, d_scores = self._page_cache.search(q, max(p.dense_candidates, 4 * n), exclude)
        cos_of = fresh({int(i): float(s) for i, s in zip(d_ids, d_scores)})
        sample_ids, sample_cos = self._page_cache.sample_scores(q)
        if stale is not None:  # the usual cosine of pages the query can be compared with
            keep = ~((sample_ids > stale[0]) & (sample_ids <= stale[1]))
            sample_ids, sample_cos = sample_ids[keep], sample_cos[keep]
        sampled = set(sample_ids.tolist())
        usual = typical_cosine(sample_cos)  # a page that is not in the sample leaves it unchanged
        tc = time.perf_counter()
        timings["dense"] = (tc - tb) * 1000

        # 2. MTM segments: cos + keyword Jaccard (MemoryOS); their pages get a mild boost
        qkw = T.keywords(query, 20)
        seg_score: dict[int, float] = {}
        seg_reason: dict[int, str] = {}
        knn = (
            self.db.execute(
                "SELECT segment_id, distance FROM segment_vec WHERE embedding MATCH ? AND k = ? AND tier = 'mtm'",
                (vec_blob(q), max(1, p.segment_candidates)),
            ).fetchall()
            if stale is None
            else []
        )
        seg_kw = {}
        if knn:
            marks = ",".join("?" * len(knn))
            seg_kw = dict(
                self.db.execute(
                    f"SELECT id, keywords FROM segment WHERE id IN ({marks})", [sid for sid, _ in knn]
                ).fetchall()
            )
        for sid, dist in knn:
            kw = from_json(seg_kw.get(sid), [])
            cos = 1.0 - float(dist)
            jac = T.jaccard(qkw, kw)
            seg_score[sid] = cos + jac
            seg_reason[sid] = f"segment {sid} (cos {cos:.2f}" + (f", keywords {jac:.2f})" if jac else ")")
        seg_order = sorted(seg_score, key=lambda s: -seg_score[s])
        td = time.perf_counter()
        timings["segments"] = (td - tc) * 1000

        # 3. keyword search: BM25 over an OR query of content words (porter); trigram table for CJK.
        #    BM25 is scaled by the summed IDF of the query's terms (the score of a page that holds each
        #    term once), so a page matching only a common word stays low, whatever the best page scored.
        kw_of: dict[int, float] = {}
        fq, scale, kw_words = self._keyword_query(query, doc_counts)
        if fq:
            rows = self.db.execute(
                "SELECT rowid, -bm25(page_fts) FROM page_fts WHERE page_fts MATCH ? ORDER BY rank LIMIT ?",
                (fq, p.keyword_candidates),
            ).fetchall()
            rows = [(pid, sc) for pid, sc in rows if pid not in exclude]
            if rows:
                scale = scale or max(sc for _, sc in rows)
                for pid, sc in rows:
                    kw_of[pid] = min(1.0, max(0.0, sc) / scale) if scale > 0 else 0.0
        tq = T.fts_trigram_query(query)
        if tq:
            rows = self.db.execute(
                "SELECT rowid, -bm25(page_tri) FROM page_tri WHERE page_tri MATCH ? ORDER BY rank LIMIT ?",
                (tq, p.keyword_candidates),
            ).fetchall()
            rows = [(pid, sc) for pid, sc in rows if pid not in exclude]
            top = max((sc for _, sc in rows), default=0.0)
            if top > 0:
                for pid, sc in rows:
                    kw_of[pid] = max(kw_of.get(pid, 0.0), sc / top)
        te = time.perf_counter()
        timings["keyword"] = (te - td) * 1000

        # 4. candidate pool and base scores
        pool = set(cos_of) | set(kw_of)
        if seg_order:
            marks = ",".join("?" * min(3, len(seg_order)))
            for (pid,) in self.db.execute(
                f"SELECT id FROM page WHERE segment_id IN ({marks}) ORDER BY id DESC LIMIT 100", seg_order[:3]
            ).fetchall():
                if pid not in exclude:
                    pool.add(pid)
        info: dict[int, tuple] = {}
        self._page_info(pool, info)
        windows = T.date_windows(query, self.db.clock())

        # word by word: each content word of the query against the page's words (token_match)
        tq = time.perf_counter()
        tok_of = self._token_scores(q_tokens, pool) if q_tokens is not None and p.w_tokens > 0 else {}
        timings["tokens"] = (time.perf_counter() - tq) * 1000

        def base(pid: int) -> float:
            _, sid, tier, _, ts = info[pid]
            s = p.w_dense * cos_of.get(pid, 0.0) + p.w_keyword * kw_of.get(pid, 0.0) + p.w_tokens * tok_of.get(pid, 0.0)
            if sid in seg_score:
                s += p.w_segment * seg_score[sid]
            if windows and any(a <= ts < b for a, b in windows):
                s += p.date_boost
            return s

        missing = [i for i in pool if i not in cos_of]
        if missing:
            cos_of.update(fresh(self._page_cache.scores_for(q, missing)))
        score = {pid: base(pid) for pid in info}

        tf = time.perf_counter()
        timings["candidates"] = (tf - te) * 1000
        # 5. dialogue neighbours: the page before/after a strong page in the same conversation; a page
        #    inherits a share of a neighbour's score (max) and adds a little of the better neighbour's
        #    score (context: pages inside an on-topic passage rank above isolated look-alikes)
        prev_of: dict[int, int] = {}
        next_of: dict[int, int] = {}
        if p.neighbor_prev > 0 or p.neighbor_next > 0:
            strong = sorted(score, key=lambda i: -score[i])[: max(30, 3 * n)]
            new_ids: set[int] = set()
            rows = self.db.execute(
                "SELECT p.id, (SELECT q.id FROM page q WHERE q.conversation_id = p.conversation_id AND q.id < p.id "
                "ORDER BY q.id DESC LIMIT 1), (SELECT q.id FROM page q WHERE q.conversation_id = p.conversation_id "
                "AND q.id > p.id ORDER BY q.id LIMIT 1) FROM page p WHERE p.id IN (SELECT value FROM json_each(?)) "
                "AND p.conversation_id IS NOT NULL",
                (json.dumps(strong),),
            ).fetchall()
            for _pid, pr, nx in rows:
                for other in (pr, nx):
                    if other is not None and other not in info and other not in exclude:
                        new_ids.add(other)
            if new_ids:
                self._page_info(new_ids, info)
            for pid, pr, nx in rows:
                ts = info[pid][4]
                if (
                    pr is not None
                    and pr in info
                    and pr not in exclude
                    and abs(info[pr][4] - ts) <= p.neighbor_max_gap_s
                ):
                    prev_of[pid], next_of[pr] = pr, pid
                if (
                    nx is not None
                    and nx in info
                    and nx not in exclude
                    and abs(info[nx][4] - ts) <= p.neighbor_max_gap_s
                ):
                    next_of[pid], prev_of[nx] = nx, pid
            if new_ids:
                cos_of.update(fresh(self._page_cache.scores_for(q, [i for i in new_ids if i not in cos_of])))
                if tok_of:
                    tok_of.update(self._token_scores(q_tokens, new_ids))
                for pid in new_ids:
                    if pid in info:
                        score[pid] = base(pid)
        tg = time.perf_counter()
        timings["neighbours"] = (tg - tf) * 1000
        via: dict[int, int] = {}  # page -> the neighbour whose score it inherited

        def finalize(pid: int, own: float, score: dict[int, float] = score, track: bool = True) -> float:
            """A page's score from its own base score `own` and its dialogue neighbours' (`score`);
            `track` records in `via` which neighbour it inherited from."""
            best = own
            if track:
                via.pop(pid, None)
            pr = prev_of.get(pid)
            if pr is not None and pr in score and p.neighbor_prev * score[pr] > best:
                best = p.neighbor_prev * score[pr]
                if track:
                    via[pid] = pr
            nx = next_of.get(pid)
            if nx is not None and nx in score and p.neighbor_next * score[nx] > best:
                best = p.neighbor_next * score[nx]
                if track:
                    via[pid] = nx
            if p.neighbor_context > 0:
                # dialogue context: a page whose neighbour is also on the topic sits in a passage about it
                ctx = max((score[o] for o in (pr, nx) if o is not None and o in score), default=0.0)
                best += p.neighbor_context * max(0.0, ctx)
            if info[pid][2] == "archive":
                best *= p.archive_penalty
            return best

        final = {pid: finalize(pid, s) for pid, s in score.items()}
        th = time.perf_counter()

        # an asking's own score without its keyword match: see _demote_askings
        def unechoed(pid):
            return finalize(
                pid,
                score[pid] - p.w_keyword * kw_of.get(pid, 0.0) - p.w_tokens * tok_of.get(pid, 0.0),
            )

        askings = self._demote_askings(query, final, n, unechoed) if p.asked_weight != 1.0 else set()
        timings["askings"] = (time.perf_counter() - th) * 1000
        # the best n pages, passing over earlier askings of this same question in Mnemo's own chats
        # (T.repeats_question): the reply there is what the model answered then. In an imported
        # dialogue (a conversation with a source) the reply is the record, e.g. the other person's answer.
        ranked = sorted(final, key=lambda i: (-final[i], i))
        chosen: list[int] = []
        repeats: list[int] = []
        pages: dict = {}
        start = 0
        while len(chosen) < n and start < len(ranked):
            batch = ranked[start : start + n - len(chosen) + 4]
            start += len(batch)
            pages.update(self.pages.by_ids(batch))
            asked = [pid for pid in batch if pid in pages and T.repeats_question(query, pages[pid].user_text)]
            imported = (
                {
                    cid
                    for (cid,) in self.db.execute(
                        "SELECT id FROM conversation WHERE source IS NOT NULL AND id IN (SELECT value FROM json_each(?))",
                        (json.dumps([pages[pid].conversation_id for pid in asked]),),
                    )
                }
                if asked
                else set()
            )
            for pid in batch:
                if pid not in pages or len(chosen) >= n:
                    continue
                if pid in asked and pages[pid].conversation_id not in imported:
                    repeats.append(pid)
                else:
                    chosen.append(pid)
        # the same scores without the word-by-word match: what the quoting floor was measured on
        # (every page matches a query's words somewhat, so the match says how alike, not whether)
        wordless = {pid: s - p.w_tokens * tok_of.get(pid, 0.0) for pid, s in score.items()} if tok_of else score
        qwords = sorted({T.stem(w) for w in kw_words if not T.has_cjk(w)})  # the words searched for
        qword_re = {w: re.compile(r"\b" + re.escape(w), re.IGNORECASE) for w in qwords}
        hits: list[PageHit] = []
        visited: list[int] = []
        for pid in chosen:
            page = pages.get(pid)
            if page is None:
                continue
            if stale is not None and stale[0] < pid <= stale[1]:
                # its vector is still the old model's: its meaning is not known yet, not 0 (the quoting
                # floor then goes by the score alone, as for a page with no cosine of its own)
                cos, standout, parts = None, None, ["meaning not compared yet (re-embedding)"]
            else:
                cos = cos_of.get(pid, 0.0)
                # An earlier asking gets no standout: it is like the question because it asks the same
                # thing, which says nothing of the answer (it is quoted only on its demoted score)
                standout = (
                    None
                    if pid in askings
                    else cos - (typical_cosine(sample_cos[sample_ids != pid]) if pid in sampled else usual)
                )
                parts = [f"cos {cos:.2f}" + (f" ({standout:+.2f} over the usual)" if standout is not None else "")]
            if pid in kw_of:
                matched = [w for w in qwords if qword_re[w].search(page.text)][:4]
                parts.append("keyword match " + ", ".join(f"'{m}'" for m in matched) if matched else "keyword match")
            if pid in tok_of:
                parts.append(f"word by word {tok_of[pid]:.2f}")
            if page.segment_id in seg_score:
                parts.append(seg_reason[page.segment_id])
            if windows and any(a <= page.timestamp < b for a, b in windows):
                parts.append("date named in the question")
            if pid in via:
                parts.append(f"{'follows' if via[pid] < pid else 'precedes'} page {via[pid]}")
            if page.tier == "archive":
                parts.append("from the archive")
            if conversation_id is not None and page.conversation_id == conversation_id:
                parts.append("said earlier in this conversation")
            if pid in askings:
                parts.append(f"a question asked in a chat (its keyword match not counted, × {p.asked_weight:g})")
            match = final[pid] if pid in askings or not tok_of else finalize(pid, wordless[pid], wordless, False)
            hits.append(
                PageHit(
                    page,
                    final[pid],
                    " + ".join(parts),
                    page.tier,
                    inherited_from=via.get(pid),
                    similarity=cos,
                    standout=standout,
                    match_score=match,
                )
            )
            if page.segment_id is not None and page.segment_id not in visited:
                visited.append(page.segment_id)
        skipped = [
            PageHit(
                pages[pid], final[pid], "the same question, asked before: its reply is not evidence", pages[pid].tier
            )
            for pid in repeats
        ]
        timings["assemble"] = (time.perf_counter() - tg) * 1000
        segs = [{"segment_id": sid, "score": round(seg_score[sid], 4), "reason": seg_reason[sid]} for sid in seg_order]
        return hits, segs, visited, skipped

    def _rank_sides(self, hits: list[PageHit], q: np.ndarray) -> list[SideHit]:
        """The turns of the ranked pages one by one: a page's side nearer the query keeps the page's score,
        the other scores `other_side_drop` + `other_side_spread` x their cosine gap less (MemoryParams);
        a page without side vectors stays whole. Sets each hit's `side_similarity`."""
        p = self.db.params
        ids = [h.page.id for h in hits]
        blobs = (
            dict(
                self.db.execute(
                    "SELECT page_id, sides FROM page_tok WHERE page_id IN (SELECT value FROM json_each(?))",
                    (json.dumps(ids),),
                ).fetchall()
            )
            if ids
            else {}
        )
        units: list[tuple[float, int, SideHit]] = []
        for rank, h in enumerate(hits):
            sides = token_match.unpack_sides(blobs.get(h.page.id), self.db.dim)
            if sides is None:
                units.append((h.score, 2 * rank, SideHit(h, "page", h.score)))
                continue
            cu, ca = (float(c) for c in sides @ q)
            h.side_similarity = (cu, ca)
            better, other = ("user", "assistant") if cu >= ca else ("assistant", "user")
            lower = h.score - p.other_side_drop - p.other_side_spread * abs(cu - ca)
            units.append((h.score, 2 * rank, SideHit(h, better, h.score)))
            units.append((lower, 2 * rank + 1, SideHit(h, other, lower)))
        units.sort(key=lambda u: (-u[0], u[1]))
        return [u for _, _, u in units]

    # share of a query's candidate pages that may lack token vectors (computed on the spot); above
    # it the word-by-word match waits for the "index_tokens" job, so no page is ranked on it alone
    TOKEN_MISSING_MAX = 0.1

    def _token_scores(self, q_tokens: np.ndarray, ids) -> dict[int, float]:
        """token_match.maxsim of the query for these pages, from `page_tok`. Pages without a row
        (indexing still running) are embedded now when they are few; when they are many, none is
        scored (every page is ranked without the match alike)."""
        ids = sorted(ids)
        if not ids:
            return {}
        rows: dict[int, bytes] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows.update(
                self.db.execute(f"SELECT page_id, vecs FROM page_tok WHERE page_id IN ({marks})", chunk).fetchall()
            )
        missing = [i for i in ids if i not in rows]
        if missing:
            if self.embedding.embed_tokens_fn is None or len(missing) > self.TOKEN_MISSING_MAX * len(ids):
                return {}
            texts = self.db.execute(
                "SELECT id, user_text, assistant_text FROM page WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(missing),),
            ).fetchall()
            rows.update(zip([pid for pid, _, _ in texts], [b for b, _ in self.upkeep.page_token_blobs(texts)]))
        known = [i for i in ids if i in rows]
        sims = token_match.maxsim_packed(q_tokens, [rows[i] for i in known], self.db.dim)
        return {pid: float(v) for pid, v in zip(known, sims)}

    def _keyword_query(
        self, query: str, doc_counts: dict[str, int] | None = None
    ) -> tuple[str | None, float, list[str]]:
        """The FTS5 OR query for `query`, the summed BM25 IDF of its terms (as FTS5 computes them), and the
        words it searches for (what the trace may name as a page's keyword match).

        Terms no page contains are left out; in a large store (> 5,000 pages) so are terms found in
        more than a fifth of the pages, which add little to BM25 but make it score most of the table.
        So are terms on half the pages or more beside one that is not; when there is none, no query (None)
        if they are on more pages than the search returns (`keyword_candidates`).
        """
        words: list[str] = []
        content = T.content_words(query)
        for w in content:
            if not T.has_cjk(w) and w not in words:
                words.append(w)
        if not words:
            # CJK words: unicode61 keeps a run as one token, so the porter table may still hold it.
            # Only stop words ("Hi!", "How are you?"): no keyword search. Its scores are relative to the
            # best match, so a page holding "his" (porter: "hi") would get a full keyword score.
            return (T.fts_or_query(query), 0.0, content) if content else (None, 0.0, [])
        n = len(self._page_cache) or self.db.execute("SELECT count(*) FROM page").fetchone()[0]
        df_of = doc_counts if doc_counts is not None else {}
        terms: list[tuple[str, list[str]]] = []
        for w in words[:24]:
            stems = self._stems(w)
            for st in stems:
                self._page_doc_count(st, df_of)
            if stems and max(df_of[st] for st in stems) > 0:
                terms.append((w, stems))
        if not terms:
            return None, 0.0, []
        if n > 5000:
            rare = [t for t in terms if max(df_of[st] for st in t[1]) <= 0.2 * n]
            terms = rare or sorted(terms, key=lambda t: max(df_of[st] for st in t[1]))[:2]

        def raw_idf(st: str) -> float:  # FTS5's, before it clamps a negative one to 1e-6
            return math.log((max(n, df_of[st]) - df_of[st] + 0.5) / (df_of[st] + 0.5))

        telling = [t for t in terms if any(raw_idf(st) > 0 for st in t[1])]
        if telling:
            # a word on half the pages or more adds nothing to BM25 beside these (its IDF is clamped to 1e-6),
            # but would make every page holding it a candidate "keyword match": left out
            terms = telling
        elif max(df_of[st] for _, stems in terms for st in stems) > self.db.params.keyword_candidates:
            # every term is on half the pages or more (a speaker's name in every imported message): BM25 can
            # only say which pages hold them, and when more pages do than the search returns, which
            # `keyword_candidates` it returns is arbitrary (the shortest): scaled by the clamped IDF, each
            # would get a full keyword match over the rest. Fewer are all returned (a small memory, or a
            # word on 60 of 100 pages), and keep their matches.
            return None, 0.0, []
        idf = sum(max(1e-6, raw_idf(st)) for st in {st for _, stems in terms for st in stems} if df_of[st] > 0)
        q = " OR ".join('"' + w.replace('"', '""') + '"' for w, _ in terms)
        return q, idf, [w for w, _ in terms]

    def _common_words(self, query: str, doc_counts: dict[str, int]) -> list[str]:
        """The query's content words that are in at least `params.common_word_df` of the pages (a memory
        of 20 pages or more): in the query vector they match every page alike, and the one speaker a
        question names pulls it toward the pages where the other speaker says that name."""
        p = self.db.params
        if p.common_word_mix <= 0 or p.common_word_df <= 0:
            return []
        if not self.db.in_transaction:
            self._page_cache.sync(self.db.conn)  # the page count now, not at the last query
        n = len(self._page_cache) or self.db.execute("SELECT count(*) FROM page").fetchone()[0]
        if n < 20:
            return []
        common = []
        for w in dict.fromkeys(T.content_words(query)):
            dfs = [self._page_doc_count(st, doc_counts) for st in self._stems(w)]
            if dfs and min(dfs) >= p.common_word_df * n:
                common.append(w)
        return common

    def _stems(self, word: str) -> list[str]:
        """`word` as the keyword index's porter tokenizer writes it (its terms)."""
        tok = getattr(self, "_porter_tok", None)
        if tok is None:
            tok = self._porter_tok = self.db.conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        return [t[2] for t in tok(word.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)]

    def _page_doc_count(self, term: str, memo: dict[str, int]) -> int:
        """How many pages hold `term` (the keyword index's own count), kept in `memo` for the query."""
        if term not in memo:
            row = self.db.execute("SELECT doc FROM page_fts_vocab WHERE term = ?", (term,)).fetchone()
            memo[term] = row[0] if row else 0
        return memo[term]

    def _query_vector(
        self, query: str, timings: dict[str, float], common: list[str], doc_counts: dict[str, int]
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The query's embedding; mixed with the embedding of the query without its common words
        (`_common_words`, appended to `common`) when it has any, both embedded in one batch. Also the
        query's content-token rows from the same pass, its common words left out (token_match; None
        without a token embedder or for a query without content words)."""
        t0 = time.perf_counter()
        with self.db.lock:
            self.db.check()
            common.extend(self._common_words(query, doc_counts))
        timings["common_words"] = (time.perf_counter() - t0) * 1000
        stripped = T.without_words(query, common) if common else ""
        if not T.content_words(stripped):  # "Tell me about Melanie": the common word is all it asks about
            common.clear()
            vecs, per_text = self.embedding.embed_with_tokens([query])
        else:
            vecs, per_text = self.embedding.embed_with_tokens([query, stripped])
        tokens = token_match.query_matrix(*per_text[0], drop=common) if per_text is not None else None
        q = vecs[0]
        if len(vecs) == 1:
            return q, tokens
        v = (1.0 - self.db.params.common_word_mix) * q + self.db.params.common_word_mix * vecs[1]
        norm = float(np.linalg.norm(v))
        return (v / norm if norm > 0 else q), tokens

    def _demote_askings(
        self, query: str, final: dict[int, float], n: int, unechoed: Callable[[int], float]
    ) -> set[int]:
        """Scale the askings among the best pages by `asked_weight`: a page of Mnemo's own chats that
        only asks a short question holds the model's reply, not something the user said. Its keyword
        match goes first (`unechoed`: its score ranked without it): a question on the topic holds the
        new question's words because it asks the same thing, which says nothing of an answer. An
        earlier asking of `query` itself keeps its
        score: it is passed over and listed as skipped at its rank.
        Only pages that could still be among the best n (with a margin) are read; a page a demotion
        lets rise into them is read on the next pass. Returns the pages scaled."""
        checked: set[int] = set()
        scaled: set[int] = set()
        while True:
            top = sorted(final, key=lambda i: (-final[i], i))[: n + 10]
            unread = [pid for pid in top if pid not in checked]
            if not unread:
                return scaled
            checked.update(unread)
            for pid in self._askings(unread, query):
                final[pid] = max(0.0, unechoed(pid)) * self.db.params.asked_weight
                scaled.add(pid)

    def _askings(self, ids, query: str) -> set[int]:
        """Of these pages, those of Mnemo's own chats (not imported: there a question and its reply
        are the record) whose user side only asks a short question (`T.only_asks`). A page the user
        pinned keeps its score; a long message is more than a question, so its text is not read."""
        rows = self.db.execute(
            "SELECT p.id, p.user_text FROM page p JOIN conversation c ON c.id = p.conversation_id "
            "WHERE c.source IS NULL AND p.pinned = 0 AND length(p.user_text) <= 400 "
            "AND p.id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        ).fetchall()
        return {pid for pid, text in rows if T.only_asks(text) and not T.repeats_question(query, text)}

    def _page_info(self, ids, info: dict) -> None:
        ids = sorted(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self.db.execute(
                f"SELECT id, segment_id, tier, conversation_id, timestamp FROM page WHERE id IN ({marks})", chunk
            ).fetchall():
                info[r[0]] = r

    # ------------------------------------------------------------------ what a statement says
    def memory_saying(
        self, statement: str, *, owner: str = "user", min_cos: float | None = None, page_limit: int = 200
    ) -> tuple[list[tuple[Knowledge, float]], list[int]]:
        """The facts and pages that say `statement` ("my locker code is 4312"), for a request to
        forget it. Facts: active ones of `owner` whose embedding is at least `min_cos` alike
        (default `update_threshold`, the bar for "the same fact, updated"), or whose words hold the
        statement's or are held by them. Pages: those that contain every content word of it (two
        at least: one word, "birthday", would take every page that mentions one). Read-only."""
        statement = T.valid_text(statement).strip()
        if not statement:
            return [], []
        bar = self.db.params.update_threshold if min_cos is None else min_cos
        said = " ".join(T.words(statement))
        q = self.embedding.embed([statement])[0]
        facts = []
        for kid, dist in self.db.execute(
            "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = 8", (vec_blob(q),)
        ).fetchall():
            item = self.persona.get_knowledge(kid)
            if item is None or item.owner != owner or item.status != "active":
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
        return facts, sorted(pages)

    # ------------------------------------------------------------------ knowledge and traits
    def _rank_knowledge(self, query: str, q: np.ndarray, n: int) -> list[KnowledgeHit]:
        p = self.db.params
        k = max(20, 4 * n)
        dense = {
            kid: 1.0 - float(d)
            for kid, d in self.db.execute(
                "SELECT knowledge_id, distance FROM knowledge_vec WHERE embedding MATCH ? AND k = ?", (vec_blob(q), k)
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
        if not cands:
            return []
        scored = []
        for kid in cands:
            s = 0.0
            if kid in d_rank:
                s += p.w_dense / (p.rrf_k + d_rank[kid])
            if kid in kw:
                s += p.w_keyword / (p.rrf_k + kw[kid])
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
