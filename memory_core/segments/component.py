"""Mid-term memory: segments (pages grouped by topic), dialogue chains, heat, the promotion trigger,
eviction of the coldest segment to the archive, and restoring it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import apsw
import numpy as np

from .. import text as T
from ..pages.component import Pages
from ..pages.embedding import Embedding
from ..storage.codec import from_json, to_json, unit, vec_blob
from ..storage.database import Database
from ..storage.jobs import Jobs
from ..types import page_text
from .reading import SegmentReading
from .titles import due

# pages of mid-term memory before its mean page vector is taken off at full weight (`_segment_scores`): with
# n pages the mean is scaled by n / (n + CENTRE_PRIOR_PAGES), so the first pages segment by plain cosine
CENTRE_PRIOR_PAGES = 20
# a word on at least this share of the memory's pages (and the memory has COMMON_MIN_PAGES pages) names no
# topic: the speakers' names of an imported dialogue, "thanks"; it is left out of a segment's keywords/title
TITLE_COMMON_DF = 0.3
COMMON_MIN_PAGES = 20
SEGMENTING = "centred-3"  # meta.segmenting: the joining rule a memory's segments were made by
# a page that no segment scores `theta` for joins the segment of the page it continues in its dialogue chain
# when its centred cosine + Jaccard there is at least this, i.e. it does not point away from it (`_place`)
CHAIN_JOIN_MIN_SCORE = 0.0
RESEGMENT_BATCH = 256  # pages per "resegment" job
COMMON_REFRESH = 256  # keyword refreshes between two counts of the memory's pages
# a page's `people` meta (its speakers, from an import) as SQL reads it; NULL for a chat's page
PEOPLE = "CASE WHEN json_valid(meta) THEN json_extract(meta, '$.people') END"


def _speaker_names(people_json: str | None) -> set[str]:
    return T.names_of(from_json(people_json, None)) if people_json else set()


class Segments(SegmentReading):
    """Segments, chains, heat and eviction; the reading is SegmentReading's (segments.reading)."""

    def __init__(self, db: Database, embedding: Embedding, pages: Pages, jobs: Jobs):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.jobs = jobs
        self._common_memo: list | None = None  # [calls left, pages, {word: common}] (`_doc_share`)
        self._porter: apsw.FTS5Tokenizer | None = None
        jobs.register("resegment", self._job_resegment)

    # ------------------------------------------------------------------ STM -> MTM
    def stm_overflow(self, cid: int | None) -> None:
        cap = max(0, int(self.db.params.tiers.stm_capacity))
        rows = self.db.execute(
            "SELECT id FROM page WHERE tier = 'stm' AND conversation_id IS ? ORDER BY id", (cid,)
        ).fetchall()
        for (pid,) in rows[: max(0, len(rows) - cap)]:
            self.move_to_mtm(pid)

    def move_to_mtm(self, pid: int) -> int:
        """Move STM page `pid` to MTM: link it into its conversation's dialogue chain, join it to the best
        MTM segment of its space or start one, then promote a segment made hot and evict the coldest over
        capacity. Returns the segment id (0 when the page is not in STM)."""
        row = self.db.execute(
            "SELECT conversation_id, timestamp, keywords, space_id FROM page WHERE id = ? AND tier = 'stm'", (pid,)
        ).fetchone()
        if row is None:
            return 0
        cid, ts, kws_s, space = row
        kws = from_json(kws_s, [])
        vec = self.pages.page_vec(pid)
        now = self.db.clock()
        chain_id, link_detail = self._link_chain(pid, cid, ts, kws, vec, now)
        prev = link_detail.get("prev_page_id") if chain_id is not None else None
        sid, how, (best_score, best_cos, best_jac) = self._place(pid, vec, kws, space, prev, now)
        if chain_id is not None:
            self.refresh_chain(chain_id)
        self.db.emit(
            "page_moved",
            "page",
            pid,
            f"page {pid} moved to mid-term memory ({how} segment {sid})",
            {
                "segment_id": sid,
                "how": how,
                "score": round(best_score, 4),
                "cos": round(best_cos, 4),
                "jaccard": round(best_jac, 4),
                "chain_id": chain_id,
                **link_detail,
            },
        )
        self.maybe_promote(sid)
        self.evict_if_needed()
        return sid

    def _link_chain(
        self, pid: int, cid: int | None, ts: float, kws: list[str], vec: np.ndarray, now: float
    ) -> tuple[int | None, dict[str, Any]]:
        """Dialogue chain: link the page to the previous moved page of its conversation when it continues
        the topic. Returns the chain joined (None) and what the event says of the link."""
        p = self.db.params
        prev = self.db.execute(
            "SELECT id, chain_id, timestamp, keywords FROM page WHERE conversation_id IS ? AND id < ? "
            "AND tier != 'stm' ORDER BY id DESC LIMIT 1",
            (cid, pid),
        ).fetchone()
        if prev is None or cid is None or abs(ts - prev[2]) > p.segments.chain_max_gap_s:
            return None, {}
        cont = float(self.pages.page_vec(prev[0]) @ vec) + T.jaccard(kws, from_json(prev[3], []))
        link_detail = {"prev_page_id": prev[0], "continuity": round(cont, 4)}
        if cont < p.segments.chain_theta:
            return None, link_detail
        chain_id = prev[1]
        if chain_id is None:
            chain_id = self.insert_chain("", [], now)
            self.pages.set_chain(prev[0], chain_id)
        self.pages.link(pid, prev[0], chain_id)
        return chain_id, link_detail

    def _place(
        self,
        pid: int,
        vec: np.ndarray,
        kws: list[str],
        space: int,
        prev: int | None,
        now: float,
        exclude: frozenset[int] = frozenset(),
    ) -> tuple[int, str, tuple[float, float, float]]:
        """Put MTM-bound page `pid` in a segment of its space (but `exclude`): the one with the best centred
        cosine + keyword Jaccard when that clears `theta` (a topic it belongs to); else, when it continues a
        dialogue chain (`prev`, the page before it in the chain), the segment of that page unless it points
        away from it (score < CHAIN_JOIN_MIN_SCORE): a page that opens no clear topic ("Wow, that's great!
        How long have you been doing that?") belongs to the stretch of dialogue it continues; else a new
        segment. Returns (segment, "joined" | "continued" | "created", the best (score, cos, Jaccard))."""
        scores = self._segment_scores(vec, kws, space, exclude)
        best = max(scores.items(), key=lambda kv: kv[1][0], default=None)
        if best is not None and best[1][0] >= self.db.params.segments.theta:
            self._join_segment(best[0], pid, vec, kws, now)
            return best[0], "joined", best[1]
        top = best[1] if best is not None else (-1.0, 0.0, 0.0)
        row = self.db.execute("SELECT segment_id FROM page WHERE id = ?", (prev,)).fetchone() if prev else None
        if row is not None and row[0] in scores and scores[row[0]][0] >= CHAIN_JOIN_MIN_SCORE:
            self._join_segment(row[0], pid, vec, kws, now)
            return row[0], "continued", top
        return self._start_segment(pid, vec, kws, now, space), "created", top

    def _segment_scores(
        self, vec: np.ndarray, kws: list[str], space: int = 1, exclude: frozenset[int] = frozenset()
    ) -> dict[int, tuple[float, float, float]]:
        """Each MTM segment of the page's space (but `exclude`) scored against the page: (centred cosine +
        keyword Jaccard, cosine, Jaccard). Centred: the mean page vector of mid-term memory is taken off both
        the page and each segment's centroid before the cosine, so the direction every page shares (in an
        imported dialogue, the speakers' names on every line) no longer makes a long segment's centroid
        close to every page (decision 0024; docs/research-log.md, "Segments")."""
        rows = self.db.execute(
            "SELECT id, emb_sum, page_count, keywords FROM segment WHERE tier = 'mtm' AND space_id = ?", (space,)
        ).fetchall()
        rows = [r for r in rows if r[2] > 0 and r[0] not in exclude]
        if not rows:
            return {}
        sums = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]).astype(np.float64)
        counts = np.array([r[2] for r in rows], dtype=np.float64)
        n = float(counts.sum())
        # a young memory has no mean worth the name: shrink it toward 0 (plain cosine) over its first pages
        mean = sums.sum(axis=0) / n * (n / (n + CENTRE_PRIOR_PAGES))
        cents = sums / counts[:, None] - mean
        pv = vec.astype(np.float64) - mean
        norms = np.linalg.norm(cents, axis=1) * max(float(np.linalg.norm(pv)), 1e-12)
        cos = (cents @ pv) / np.maximum(norms, 1e-12)
        out = {}
        for (sid, _, _, skw), c in zip(rows, cos):
            jac = T.jaccard(kws, from_json(skw, []))
            out[sid] = (float(c) + jac, float(c), jac)
        return out

    def _join_segment(self, sid: int, pid: int, vec: np.ndarray, kws: list[str], now: float) -> None:
        srow = self.db.execute("SELECT emb_sum, kw_counts FROM segment WHERE id = ?", (sid,)).fetchone()
        acc = np.frombuffer(srow[0], dtype=np.float32) + vec
        counts: dict = from_json(srow[1], {})
        self._count_keywords(counts, kws, self._speakers(pid))
        self.pages.enter_segment(pid, sid, now)
        self.db.execute(
            "UPDATE segment SET emb_sum = ?, kw_counts = ?, keywords = ?, page_count = page_count + 1, "
            "l_interaction = l_interaction + 1, last_access = ?, updated_at = ? WHERE id = ?",
            (vec_blob(acc), to_json(counts), to_json(self._top_keywords(counts)), now, now, sid),
        )
        self.db.execute("UPDATE segment_vec SET embedding = ? WHERE segment_id = ?", (vec_blob(unit(acc)), sid))
        self.refresh_summary(sid)
        self.queue_title_if_due(sid)  # a title by the chat model, at 3 pages and each doubling

    def _start_segment(self, pid: int, vec: np.ndarray, kws: list[str], now: float, space: int = 1) -> int:
        counts: dict = {}
        self._count_keywords(counts, kws, self._speakers(pid))
        self.db.execute(
            "INSERT INTO segment(tier, summary, keywords, kw_counts, emb_sum, n_visit, l_interaction, "
            "last_access, created_at, updated_at, page_count, space_id) "
            "VALUES ('mtm', '', ?, ?, ?, 0, 1, ?, ?, ?, 1, ?)",
            (to_json(self._top_keywords(counts)), to_json(counts), vec_blob(vec), now, now, now, space),
        )
        sid = self.db.last_insert_rowid()
        self.pages.enter_segment(pid, sid, now)
        self.vec_put(sid, "mtm", vec)
        self.refresh_summary(sid)
        self.db.emit("segment_created", "segment", sid, f"segment {sid} created", {"page_id": pid})
        return sid

    def _speakers(self, pid: int) -> set[str]:
        """The name words of page `pid`'s speakers (an imported dialogue's `people` meta; none for a chat)."""
        return _speaker_names(self.db.scalar(f"SELECT {PEOPLE} FROM page WHERE id = ?", (pid,)))

    @staticmethod
    def _count_keywords(counts: dict, kws: list[str], names: AbstractSet[str] = frozenset()) -> None:
        """counts: stem -> [count, surface form shown to the user]. The page's speakers' names (`names`) are
        left out: a topic is what was said, not who said it, and a memory of several dialogues holds each
        speaker's name on too few of its pages for the rarity rule of `_top_keywords` to catch it."""
        for k in kws:
            if names and T.is_name(k.lower(), names):
                continue
            st = T.stem(k)
            c = counts.get(st)
            if c is None:
                counts[st] = [1, k]
            else:
                c[0] += 1

    def _top_keywords(self, counts: dict) -> list[str]:
        """The segment's keywords, most telling first: its count of the word times the word's rarity in the
        memory (log of pages over pages holding it); the memory's common words (on TITLE_COMMON_DF of its
        pages: the speakers' names of an imported dialogue, "thanks") left out, they say nothing of a topic."""
        scored = []
        for st, (c, surface) in counts.items():
            share = self._doc_share(surface)
            if share is not None and share >= TITLE_COMMON_DF:
                continue
            scored.append((-(c * (1.0 if share is None else math.log(1.0 / max(share, 1e-6)))), st, surface))
        scored.sort()
        return [w for _, _, w in scored[: self.db.params.segments.segment_keywords]]

    def _doc_share(self, word: str) -> float | None:
        """The share of the memory's pages that hold `word` (FTS5's own term counts); None below
        COMMON_MIN_PAGES pages. The page count and the answers are kept for COMMON_REFRESH calls: a keyword
        refresh runs at every page that joins a segment, and a count(*) over a large memory is not free."""
        memo = self._common_memo
        if memo is None or memo[0] <= 0:
            total = int(self.db.scalar("SELECT count(*) FROM page"))
            memo = self._common_memo = [COMMON_REFRESH, total, {}]
        memo[0] -= 1
        total, known = memo[1], memo[2]
        if total < COMMON_MIN_PAGES:
            return None
        share = known.get(word)
        if share is None:
            if self._porter is None:
                self._porter = self.db.conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
            terms = [t[2] for t in self._porter(word.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None) if len(t) > 2]
            dfs = [
                (
                    r[0]
                    if (r := self.db.execute("SELECT doc FROM page_fts_vocab WHERE term = ?", (t,)).fetchone())
                    else 0
                )
                for t in terms
            ]
            share = known[word] = (min(dfs) / total) if dfs else 0.0
        return share

    def refresh_summary(self, sid: int) -> None:
        rows = self.db.execute(
            "SELECT user_text, assistant_text FROM page WHERE segment_id = ? ORDER BY id DESC LIMIT 5", (sid,)
        ).fetchall()
        first = self.db.execute(
            "SELECT user_text, assistant_text FROM page WHERE segment_id = ? ORDER BY id LIMIT 1", (sid,)
        ).fetchone()
        texts = [page_text(u, a) for u, a in reversed(rows)]
        if first is not None and page_text(*first) not in texts:
            texts.insert(0, page_text(*first))
        kws = from_json(self.db.execute("SELECT keywords FROM segment WHERE id = ?", (sid,)).fetchone()[0], [])
        summary = T.extractive_summary(texts, kws, self.db.params.segments.summary_chars)
        self.db.execute("UPDATE segment SET summary = ? WHERE id = ?", (summary, sid))

    def refresh_chain(self, chain_id: int) -> None:
        rows = self.db.execute(
            "SELECT user_text, assistant_text, keywords FROM page WHERE chain_id = ? ORDER BY id DESC LIMIT 6",
            (chain_id,),
        ).fetchall()
        if not rows:
            self.delete_chain(chain_id)
            return
        kws = T.merge_keywords([from_json(k, []) for _, _, k in reversed(rows)], 8)
        texts = [page_text(u, a) for u, a, _ in reversed(rows)]
        summary = T.extractive_summary(texts, kws, max(80, self.db.params.segments.summary_chars // 2))
        label = T.topic_label(kws)
        self.db.execute(
            "UPDATE chain SET summary = ?, keywords = ?, updated_at = ? WHERE id = ?",
            (f"[{label}] {summary}" if label else summary, to_json(kws), self.db.clock(), chain_id),
        )

    def rebuild(self, sid: int) -> bool:
        """Recompute a segment's embedding, keywords, count and summary from its pages; delete it when empty."""
        rows = self.db.execute(f"SELECT id, keywords, {PEOPLE} FROM page WHERE segment_id = ?", (sid,)).fetchall()
        if not rows:
            self.delete(sid)
            return False
        counts: dict = {}
        for _, k, people in rows:
            self._count_keywords(counts, from_json(k, []), _speaker_names(people))
        self.db.execute(
            "UPDATE segment SET kw_counts = ?, keywords = ?, page_count = ?, updated_at = ? WHERE id = ?",
            (to_json(counts), to_json(self._top_keywords(counts)), len(rows), self.db.clock(), sid),
        )
        self.refresh_vector(sid)
        self.refresh_summary(sid)
        self.clear_title(sid)  # the model's title may hold words of a page it has lost: asked again
        self.queue_title_if_due(sid)
        return True

    def refresh_vector(self, sid: int) -> None:
        """A segment's summed vector and its index row from its pages' current vectors (all a re-embedding
        changes of a segment; `_rebuild_segment` does the rest when its pages change)."""
        row = self.db.execute("SELECT tier FROM segment WHERE id = ?", (sid,)).fetchone()
        if row is None:
            return
        acc = np.zeros(self.db.dim, np.float32)
        for (pid,) in self.db.execute("SELECT id FROM page WHERE segment_id = ?", (sid,)).fetchall():
            acc += self.pages.page_vec(pid)
        self.set_sum(sid, row[0], acc)

    # ------------------------------------------------------------------ segmenting an older memory again
    def at_open(self) -> None:
        """A memory whose segments an older joining rule made (one segment swallowed most of a long imported
        conversation) is segmented again, once, by "resegment" jobs (inside open's transaction)."""
        if self.db.get_meta("segmenting") == SEGMENTING:
            return
        self.db.set_meta("segmenting", SEGMENTING)
        if self.db.one("SELECT 1 FROM segment WHERE tier = 'mtm' AND pinned = 0 LIMIT 1"):
            self.jobs.enqueue("resegment", {"after": 0}, key=f"resegment:{SEGMENTING}")  # "after": the first

    def _job_resegment(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """The first job notes every unpinned MTM segment that holds no pinned page (`meta.resegment_old`);
        each job then takes the next RESEGMENT_BATCH of their pages, oldest first, to the best new segment by
        the current rule (the old ones are no candidates), rebuilds the old ones it emptied from (gone when
        empty, their heat counts with them) and queues the next, so a closed app resumes where it stopped.
        Pages keep their tier, chain and analysis; a new segment's last access is its newest page's time."""

        def apply() -> None:
            if payload.get("after") is not None and self.db.get_meta("resegment_old") is None:
                self.db.set_meta("resegment_old", to_json(self._old_segments()))
            old = frozenset(int(x) for x in from_json(self.db.get_meta("resegment_old"), []))
            rows = self.db.execute(
                "SELECT id, segment_id FROM page WHERE segment_id IN (SELECT value FROM json_each(?)) "
                "ORDER BY id LIMIT ?",
                (to_json(sorted(old)), RESEGMENT_BATCH),
            ).fetchall()
            touched = {self._resegment_page(pid, old) for pid, _ in rows}
            for sid in touched:
                self.db.execute(
                    "UPDATE segment SET last_access = (SELECT max(timestamp) FROM page WHERE segment_id = :s), "
                    "l_interaction = (SELECT count(*) FROM page WHERE segment_id = :s AND analyzed = 0) WHERE id = :s",
                    {"s": sid},
                )
            for sid in sorted({s for _, s in rows}):
                self.rebuild(sid)
            left = self.db.scalar(
                "SELECT count(*) FROM page WHERE segment_id IN (SELECT value FROM json_each(?))",
                (to_json(sorted(old)),),
            )
            total = self.db.scalar("SELECT count(*) FROM page WHERE tier = 'mtm'")
            self.jobs.report_progress("grouping pages into topics", total - left, total)
            if left:
                self.jobs.enqueue("resegment", {})
                return
            self.db.delete_meta("resegment_old")
            self.evict_if_needed()
            self.db.emit(
                "resegmented", None, None, "pages grouped into topics again by the current rule", {"rule": SEGMENTING}
            )

        return apply

    def _old_segments(self) -> list[int]:
        return [
            r[0]
            for r in self.db.execute(
                "SELECT s.id FROM segment s WHERE s.tier = 'mtm' AND s.pinned = 0 AND NOT EXISTS "
                "(SELECT 1 FROM page p WHERE p.segment_id = s.id AND p.pinned = 1) ORDER BY s.id"
            ).fetchall()
        ]

    def _resegment_page(self, pid: int, old: frozenset[int]) -> int:
        """Take MTM page `pid` from its old segment to a segment of its space not in `old` by the current rule
        (`_place`, its chain link as it was made), or a new one."""
        kws_s, space, moved_at, prev = self.db.execute(
            "SELECT keywords, space_id, moved_at, prev_page_id FROM page WHERE id = ?", (pid,)
        ).fetchone()
        kws, vec, now = from_json(kws_s, []), self.pages.page_vec(pid), self.db.clock()
        sid, _, _ = self._place(pid, vec, kws, space, prev, now, old)
        self.pages.set_moved_at(pid, moved_at)  # when it left STM
        return sid

    def vec_put(self, sid: int, tier: str, vec: np.ndarray) -> None:
        self.db.execute("DELETE FROM segment_vec WHERE segment_id = ?", (sid,))
        self.db.execute(
            "INSERT INTO segment_vec(segment_id, tier, embedding) VALUES (?, ?, ?)", (sid, tier, vec_blob(vec))
        )

    def recontext(self, ids: Sequence[int]) -> None:
        """Embed these pages again after the page before them changed or went (edited, forgotten): their
        vectors and words were read after it. Their segments follow. Inside the caller's transaction."""
        ids = sorted(set(ids))
        if not ids:
            return
        if not self.embedding.has_tokens:
            self.pages.note_read_alone(ids[0])  # read in context again when a token embedder is back
            return
        rows = self.db.execute(
            "SELECT id, user_text, assistant_text, segment_id FROM page WHERE id IN "
            "(SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(ids),),
        ).fetchall()
        found, bodies, _, vecs = self.pages.embed_stored([r[:3] for r in rows])
        for pid, vec, body in zip(found, vecs, bodies):
            self.pages.vec_put(pid, vec, body)
        for sid in sorted({r[3] for r in rows if r[3] is not None}):
            self.rebuild(sid)

    # ------------------------------------------------------------------ heat, eviction
    def heat(self, sid: int) -> float | None:
        heat, args = self.heat_sql(self.db.clock())
        row = self.db.execute(f"SELECT {heat} FROM segment s WHERE s.id = :sid", {**args, "sid": sid}).fetchone()
        return None if row is None else float(row[0])

    def record_quoted_pages(self, page_ids: Sequence[int]) -> list[int]:
        """A reply's prompt quoted these recalled pages: each of their segments gets one visit (N_visit + 1),
        however many of its pages were quoted. The only visits a chat makes, so a recall that no prompt
        quoted (small talk, a weak match under the quoting floor) heats nothing. Returns the segments."""
        ids = sorted({int(p) for p in page_ids})
        if not ids or self.db.memory_paused():
            return []
        sids = [
            r[0]
            for r in self.db.execute(
                "SELECT DISTINCT segment_id FROM page WHERE id IN (SELECT value FROM json_each(?)) "
                "AND segment_id IS NOT NULL ORDER BY segment_id",
                (json.dumps(ids),),
            ).fetchall()
        ]
        if sids:
            self.record_visits(sids)
        return sids

    def record_visits(self, sids: list[int]) -> None:
        """One short write after a retrieval: N_visit + 1 and a fresh last access for each segment
        that supplied a page, a `segment_visited` event each (so a segment's heat history can be
        replayed from the log), then promotion if the visit made a segment hot enough."""
        now = self.db.clock()
        with self.db.transaction():
            marks = ",".join("?" * len(sids))
            rows = self.db.execute(
                f"UPDATE segment SET n_visit = n_visit + 1, last_access = ? WHERE id IN ({marks}) "
                "RETURNING id, n_visit",
                [now, *sids],
            ).fetchall()
            for sid, n_visit in sorted(rows):
                self.db.emit(
                    "segment_visited",
                    "segment",
                    sid,
                    f"segment {sid} recalled (N_visit {n_visit})",
                    {"count": 1, "n_visit": n_visit},
                )
            for sid in sids:
                self.maybe_promote(sid)

    def maybe_promote(self, sid: int) -> None:
        if self.db.memory_paused():
            return
        heat = self.heat(sid)
        if heat is None or heat < self.db.params.heat.tau:
            return
        row = self.db.execute("SELECT promotions, tier FROM segment WHERE id = ?", (sid,)).fetchone()
        fresh = self.db.execute("SELECT 1 FROM page WHERE segment_id = ? AND analyzed = 0 LIMIT 1", (sid,)).fetchone()
        if row and fresh:
            self.jobs.enqueue("promote_segment", {"segment_id": sid}, key=f"promote_segment:{sid}:{row[0]}")

    def evict_if_needed(self) -> None:
        cap = int(self.db.params.tiers.mtm_capacity)
        n = self.db.execute("SELECT count(*) FROM segment WHERE tier = 'mtm'").fetchone()[0]
        heat, args = self.heat_sql(self.db.clock())
        while n > cap:
            row = self.db.execute(
                f"SELECT s.id, {heat} AS h FROM segment s WHERE s.tier = 'mtm' AND s.pinned = 0 AND NOT EXISTS "
                "(SELECT 1 FROM page p INDEXED BY page_pinned WHERE p.segment_id = s.id AND p.pinned = 1) "
                "ORDER BY h, s.last_access, s.id "
                "LIMIT 1",
                args,
            ).fetchone()
            if row is None:
                break  # everything left is pinned
            self.archive(row[0], heat=row[1])
            n -= 1

    def archive(self, sid: int, heat: float | None = None) -> None:
        now = self.db.clock()
        self.db.execute("UPDATE segment SET tier = 'archive', archived_at = ? WHERE id = ?", (now, sid))
        self.pages.set_tier_of_segment(sid, "archive")
        vec = np.frombuffer(
            self.db.execute("SELECT emb_sum FROM segment WHERE id = ?", (sid,)).fetchone()[0], np.float32
        )
        self.vec_put(sid, "archive", unit(vec))
        self.db.emit(
            "segment_archived",
            "segment",
            sid,
            f"segment {sid} moved to the archive (coldest)",
            {"heat": None if heat is None else round(float(heat), 4)},
        )

    def restore(self, sid: int) -> None:
        """Bring an archived segment back to MTM (the coldest unpinned one may be archived in turn)."""
        with self.db.transaction():
            row = self.db.execute("SELECT tier, emb_sum FROM segment WHERE id = ?", (sid,)).fetchone()
            if not row or row[0] != "archive":
                return
            now = self.db.clock()
            self.db.execute(
                "UPDATE segment SET tier = 'mtm', archived_at = NULL, last_access = ? WHERE id = ?", (now, sid)
            )
            self.pages.set_tier_of_segment(sid, "mtm")
            self.vec_put(sid, "mtm", unit(np.frombuffer(row[1], np.float32)))
            self.db.emit("segment_restored", "segment", sid, f"segment {sid} restored to mid-term memory")
            self.evict_if_needed()

    # ------------------------------------------------------------------ writing rows others ask for
    def insert(self, row: dict[str, Any]) -> int:
        """A new segment row of these columns (its vector row is `vec_put`'s, once it has pages)."""
        cols = list(row)
        marks = ",".join("?" * len(cols))
        self.db.execute(f"INSERT INTO segment({', '.join(cols)}) VALUES ({marks})", [row[c] for c in cols])
        return self.db.last_insert_rowid()

    def copy_empty(self, sid: int, space_id: int) -> int:
        """An empty segment in space `space_id` of the same tier and heat as segment `sid` (for copies of its
        pages, or pages split from it; `rebuild` fills it)."""
        self.db.execute(
            "INSERT INTO segment(tier, summary, keywords, kw_counts, emb_sum, n_visit, l_interaction, last_access, "
            "created_at, updated_at, page_count, pinned, promotions, archived_at, space_id) "
            "SELECT tier, '', '[]', '{}', emb_sum, n_visit, l_interaction, last_access, created_at, ?, 0, 0, 0, "
            "archived_at, ? FROM segment WHERE id = ?",
            (self.db.clock(), space_id, sid),
        )
        return self.db.last_insert_rowid()

    def delete(self, sid: int) -> None:
        """Delete segment `sid` and its vector row (its pages are gone or elsewhere)."""
        self.db.execute("DELETE FROM segment_vec WHERE segment_id = ?", (sid,))
        self.db.execute("DELETE FROM segment WHERE id = ?", (sid,))

    def insert_chain(self, summary: str, keywords: list[str], updated_at: float) -> int:
        self.db.execute(
            "INSERT INTO chain(summary, keywords, updated_at) VALUES (?,?,?)", (summary, to_json(keywords), updated_at)
        )
        return self.db.last_insert_rowid()

    def delete_chain(self, chain_id: int) -> None:
        self.db.execute("DELETE FROM chain WHERE id = ?", (chain_id,))

    def count_pages(self, sid: int) -> None:
        """Segment `sid`'s page count from its pages."""
        self.db.execute(
            "UPDATE segment SET page_count = (SELECT count(*) FROM page WHERE segment_id = ?) WHERE id = ?", (sid, sid)
        )

    def set_sum(self, sid: int, tier: str, acc: np.ndarray) -> None:
        """Segment `sid`'s summed page vector, and its index row (the sum's direction)."""
        self.db.execute("UPDATE segment SET emb_sum = ? WHERE id = ?", (vec_blob(acc), sid))
        self.vec_put(sid, tier, unit(acc))

    def set_pinned(self, sid: int, pinned: bool) -> bool:
        """Pin or unpin segment `sid`; whether it exists."""
        self.db.execute("UPDATE segment SET pinned = ? WHERE id = ?", (int(pinned), sid))
        return self.db.changes() > 0

    def cool(self, sid: int, *, promoted: bool) -> None:
        """Segment `sid` was read for the persona (`promoted`) or had nothing left to read: both its counts
        start again, as MemoryOS's code resets N_visit."""
        self.db.execute(
            "UPDATE segment SET l_interaction = 0, n_visit = 0, promotions = promotions + ? WHERE id = ?",
            (int(promoted), sid),
        )

    def move_space(self, ids: Sequence[int], space_id: int) -> None:
        """These segments now belong to space `space_id`."""
        for sid in ids:
            self.db.execute("UPDATE segment SET space_id = ? WHERE id = ?", (space_id, sid))

    # ------------------------------------------------------------------ the chat model's titles
    def queue_title_if_due(self, sid: int) -> None:
        """Queue a "title_segment" job for segment `sid` when it is due one (inside the caller's transaction).
        The page count it was asked at is noted now, so a burst of pages (an import) queues one job, not one
        per page; the job reads the pages it finds when it runs."""
        row = self.db.execute("SELECT page_count, title_pages FROM segment WHERE id = ?", (sid,)).fetchone()
        if row is None or not due(row[0], row[1]):
            return
        self.db.execute("UPDATE segment SET title_pages = page_count WHERE id = ?", (sid,))
        self.jobs.enqueue("title_segment", {"segment_id": sid})

    def clear_title(self, sid: int) -> None:
        """Segment `sid`'s pages changed (one forgotten, edited, moved): the model's title may hold words of a
        page it no longer has, so it goes, and the segment is due one again."""
        self.db.execute("UPDATE segment SET title = NULL, title_model = NULL, title_pages = 0 WHERE id = ?", (sid,))

    def set_title(self, sid: int, title: str, model: str) -> None:
        self.db.execute("UPDATE segment SET title = ?, title_model = ? WHERE id = ?", (title, model, sid))
