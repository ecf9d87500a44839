"""Pages and segments: STM FIFO, dialogue chains, MTM segmenting, eviction to the archive, edit/pin/forget/wipe."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from . import text as T
from .codec import from_json as _pj
from .codec import to_json as _j
from .codec import unit as _unit
from .codec import vec_blob as _blob
from .types import ITEM_KINDS, ConversationMemory, context_side, page_text

# a reply of conversation ? still waiting to become a page (agents queue {"cid": …}; imports and
# older jobs {"conversation_id": …})
_PENDING_PAGE_OF = (
    "status = 'pending' AND kind = 'add_page' AND "
    "coalesce(json_extract(payload, '$.cid'), json_extract(payload, '$.conversation_id')) = ?"
)


class PagingMixin:
    # ------------------------------------------------------------------ index maintenance helpers
    def _vec_put_page(self, pid: int, vec: np.ndarray, body: str) -> None:
        """The page's vector, and its token vectors when `body` (the text `vec` embeds) was embedded
        with a token embedder just before (the store's memo); else its old token row goes and the
        "index_tokens" job makes a new one."""
        self._x("DELETE FROM page_vec WHERE page_id = ?", (pid,))
        self._x("INSERT INTO page_vec(page_id, embedding) VALUES (?, ?)", (pid, _blob(vec)))
        self._x("INSERT INTO vec_log(kind, item_id, op) VALUES ('page', ?, 'put')", (pid,))
        if self._embed_tokens_fn is None:
            self._note_read_alone(pid)
        memo = self._memo_tokens(body, vec)
        if memo is not None:
            self._x("INSERT OR REPLACE INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)", (pid, *memo))
        else:
            self._x("DELETE FROM page_tok WHERE page_id = ?", (pid,))
            self._queue_token_index(missing=True)

    # ------------------------------------------------------------------ what a page is read after
    def _read_after(self, prev: tuple[str, str, float] | None, ts: float) -> str:
        """The context a page said at `ts` is read after, given the page before it in its conversation
        (user text, assistant text, timestamp): its `context_side` when said within `neighbor_max_gap_s`
        (a new session starts afresh). "" without a token embedder: a plain embedding function reads none."""
        if prev is None or self._embed_tokens_fn is None:
            return ""
        if abs(float(ts) - float(prev[2])) > self.params.neighbor_max_gap_s:
            return ""
        return context_side(prev[0], prev[1])

    def _context_before(self, cid: int | None, before_id: int | None, ts: float) -> str:
        """`_read_after` for a page of conversation `cid`: the page before page `before_id`, or the
        conversation's newest page (a page about to be added)."""
        if cid is None or self._embed_tokens_fn is None:
            return ""
        newest = "SELECT user_text, assistant_text, timestamp FROM page WHERE conversation_id = ?"
        row = (
            self._x(newest + " ORDER BY id DESC LIMIT 1", (cid,))
            if before_id is None
            else self._x(newest + " AND id < ? ORDER BY id DESC LIMIT 1", (cid, before_id))
        ).fetchone()
        return self._read_after(row, ts)

    def _contexts_of_pages(self, ids: Sequence[int]) -> list[str]:
        """`_context_before` of stored pages, in the order given."""
        where = {
            r[0]: (r[1], r[2])
            for r in self._x(
                "SELECT id, conversation_id, timestamp FROM page WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(ids)),),
            ).fetchall()
        }
        return [self._context_before(where[i][0], i, where[i][1]) if i in where else "" for i in ids]

    def _item_contexts(self, cid: int | None, items: Sequence[dict], before: dict | None = None) -> list[str]:
        """`_read_after` of `add_pages` items about to be written in this order: each is read after the
        item before it, the first after `before` (the item before them) or else after the newest page
        of conversation `cid`."""
        now = self.clock()

        def at(it: dict) -> float:
            return now if it.get("timestamp") is None else float(it["timestamp"])

        out: list[str] = []
        prev = before
        for it in items:
            if prev is None:
                out.append(self._context_before(cid, None, at(it)))
            else:
                out.append(
                    self._read_after((prev.get("user_text", ""), prev.get("assistant_text", ""), at(prev)), at(it))
                )
            if page_text(it.get("user_text", ""), it.get("assistant_text", "")).strip():
                prev = it
        return out

    def _recontext(self, ids: Sequence[int]) -> None:
        """Embed these pages again after the page before them changed or went (edited, forgotten): their
        vectors and words were read after it. Their segments follow. Inside the caller's transaction."""
        ids = sorted(set(ids))
        if not ids:
            return
        if self._embed_tokens_fn is None:
            self._note_read_alone(ids[0])  # read in context again when a token embedder is back
            return
        rows = self._x(
            "SELECT id, user_text, assistant_text, segment_id FROM page WHERE id IN "
            "(SELECT value FROM json_each(?)) ORDER BY id",
            (json.dumps(ids),),
        ).fetchall()
        found, bodies, _, vecs = self._embed_stored_pages([r[:3] for r in rows])
        for pid, vec, body in zip(found, vecs, bodies):
            self._vec_put_page(pid, vec, body)
        for sid in sorted({r[3] for r in rows if r[3] is not None}):
            self._rebuild_segment(sid)

    def _embed_stored_pages(self, rows: Sequence[tuple[int, str, str]]):
        """Stored pages given as (id, user text, assistant text), each embedded after the page before it,
        vectors and word rows (kept for `_vec_put_page`) from one encoder pass: (ids, bodies, contexts,
        vectors)."""
        ids = [r[0] for r in rows]
        with self._lock:
            contexts = self._contexts_of_pages(ids)
        bodies = [page_text(u, a) for _, u, a in rows]
        vecs = (
            self._embed_pages([(u, a) for _, u, a in rows], contexts) if rows else np.zeros((0, self.dim), np.float32)
        )
        return ids, bodies, contexts, vecs

    def _pages_after(self, ids: Sequence[int]) -> list[int]:
        """The page right after each of these in its conversation, passing over those among them."""
        rows = self._x(
            "SELECT DISTINCT (SELECT min(q.id) FROM page q WHERE q.conversation_id = p.conversation_id "
            "AND q.id > p.id AND q.id NOT IN (SELECT value FROM json_each(?1))) FROM page p "
            "WHERE p.id IN (SELECT value FROM json_each(?1))",
            (json.dumps(sorted(set(ids))),),
        ).fetchall()
        return sorted(r[0] for r in rows if r[0] is not None)

    def _vec_del_page(self, pid: int) -> None:
        self._x("DELETE FROM page_vec WHERE page_id = ?", (pid,))
        self._x("DELETE FROM page_tok WHERE page_id = ?", (pid,))
        self._x("INSERT INTO vec_log(kind, item_id, op) VALUES ('page', ?, 'del')", (pid,))

    def _fts_put(self, table: str, tri: str, rowid: int, body: str) -> None:
        self._x(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
        self._x(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)", (rowid, body))
        self._x(f"DELETE FROM {tri} WHERE rowid = ?", (rowid,))
        if T.has_cjk(body):
            self._x(f"INSERT INTO {tri}(rowid, body) VALUES (?, ?)", (rowid, body))

    def _fts_del(self, table: str, tri: str, rowid: int) -> None:
        self._x(f"DELETE FROM {table} WHERE rowid = ?", (rowid,))
        self._x(f"DELETE FROM {tri} WHERE rowid = ?", (rowid,))

    def _page_vec(self, pid: int) -> np.ndarray:
        row = self._x("SELECT embedding FROM page_vec WHERE page_id = ?", (pid,)).fetchone()
        if row is None:
            raise KeyError(f"page {pid} has no embedding")
        return np.frombuffer(row[0], dtype=np.float32).copy()

    def _seg_vec_put(self, sid: int, tier: str, vec: np.ndarray) -> None:
        self._x("DELETE FROM segment_vec WHERE segment_id = ?", (sid,))
        self._x("INSERT INTO segment_vec(segment_id, tier, embedding) VALUES (?, ?, ?)", (sid, tier, _blob(vec)))

    # ------------------------------------------------------------------ adding pages
    def _memory_off(self, cid: int | None) -> str | None:
        if self._get_meta("paused", "0") == "1":
            return "memory paused"
        if cid is not None:
            row = self._x("SELECT memory_paused, incognito FROM conversation WHERE id = ?", (cid,)).fetchone()
            if row is None:
                raise KeyError(f"no conversation {cid}")
            if row[0]:
                return "memory paused for this conversation"
            if row[1]:
                return "incognito conversation"
        return None

    def add_page(
        self,
        cid: int | None,
        user_text: str,
        assistant_text: str,
        *,
        timestamp: float | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        meta: dict | None = None,
        embedding: np.ndarray | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        """Store one page (user message + reply) in the conversation's STM, LLM-free.

        STM overflow moves the oldest page to MTM (chain link, segment join or creation, eviction,
        promotion job when hot). Returns the page id, the id of the existing page when
        `dedupe_key` (default "amsg:<assistant_message_id>") was stored before, or 0 when memory is
        paused (globally or for this conversation) or the conversation is incognito.
        """
        if not (user_text or "").strip() and not (assistant_text or "").strip():
            raise ValueError("a page needs some text")
        with self._lock:
            if self._memory_off(cid):
                return 0
        if embedding is not None:
            vec = self._check_vec(embedding)
        else:
            with self._lock:
                ctx = self._context_before(cid, None, self.clock() if timestamp is None else timestamp)
            vec = self._embed_pages([(user_text, assistant_text)], [ctx])[0]
        with self.transaction():
            return self._add_page_txn(
                cid,
                user_text,
                assistant_text,
                vec,
                timestamp=timestamp,
                user_message_id=user_message_id,
                assistant_message_id=assistant_message_id,
                meta=meta,
                dedupe_key=dedupe_key,
            )

    def embed_pages(
        self, items: Sequence[dict], *, conversation_id: int | None = None, before: dict | None = None
    ) -> None:
        """Fill in the "embedding" of `add_pages` items that have none, with the store's embedder.

        An importer calls this *before* opening its write transaction: embedding is the slow
        part of an import, and holding the database's write lock through it would make a chat
        reply wait (or time out) behind the import. The items are the pages of one conversation in
        order (each is read after the one before it: `_item_contexts`); the first is read after
        `before` (the item before them, when they are one chunk of many) or else after the newest
        page of `conversation_id`."""
        with self._lock:
            contexts = self._item_contexts(conversation_id, items, before)
        todo = [i for i, it in enumerate(items) if it.get("embedding") is None]
        if todo:
            vecs = self._embed_pages(
                [(items[i].get("user_text", ""), items[i].get("assistant_text", "")) for i in todo],
                [contexts[i] for i in todo],
            )
            for i, v in zip(todo, vecs):
                items[i]["embedding"] = v

    def add_pages(self, cid: int | None, items: Sequence[dict]) -> list[int]:
        """Bulk import: batched embedding, one transaction per batch, the same mechanics as add_page.

        Each item: user_text, assistant_text, and optionally timestamp, user_message_id,
        assistant_message_id, meta, embedding, dedupe_key.
        """
        allowed = {
            "user_text",
            "assistant_text",
            "timestamp",
            "user_message_id",
            "assistant_message_id",
            "meta",
            "embedding",
            "dedupe_key",
        }
        for it in items:
            extra = set(it) - allowed
            if extra:
                raise ValueError(f"unknown page fields: {sorted(extra)}")
        with self._lock:
            if self._memory_off(cid):
                return [0] * len(items)
        ids: list[int] = []
        bs = max(1, self.params.import_batch)
        for start in range(0, len(items), bs):
            chunk = list(items[start : start + bs])
            texts = [page_text(it.get("user_text", ""), it.get("assistant_text", "")) for it in chunk]
            todo = [i for i, it in enumerate(chunk) if it.get("embedding") is None]
            vecs: list[np.ndarray | None] = [None] * len(chunk)
            if todo:
                with self._lock:
                    contexts = self._item_contexts(cid, chunk)
                emb = self._embed_pages(
                    [(chunk[i].get("user_text", ""), chunk[i].get("assistant_text", "")) for i in todo],
                    [contexts[i] for i in todo],
                )
                for i, v in zip(todo, emb):
                    vecs[i] = v
            for i, it in enumerate(chunk):
                if vecs[i] is None:
                    vecs[i] = self._check_vec(it["embedding"])
            with self.transaction():
                for it, vec, txt in zip(chunk, vecs, texts):
                    if not txt.strip():
                        ids.append(0)
                        continue
                    ids.append(
                        self._add_page_txn(
                            cid,
                            it.get("user_text", ""),
                            it.get("assistant_text", ""),
                            vec,
                            timestamp=it.get("timestamp"),
                            user_message_id=it.get("user_message_id"),
                            assistant_message_id=it.get("assistant_message_id"),
                            meta=it.get("meta"),
                            dedupe_key=it.get("dedupe_key"),
                        )
                    )
        return ids

    def _add_page_txn(
        self,
        cid: int | None,
        user_text: str,
        assistant_text: str,
        vec: np.ndarray,
        *,
        timestamp: float | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        meta: dict | None = None,
        dedupe_key: str | None = None,
    ) -> int:
        if self._memory_off(cid):
            return 0
        key = (
            dedupe_key
            if dedupe_key is not None
            else (f"amsg:{assistant_message_id}" if assistant_message_id is not None else None)
        )
        if key is not None:
            row = self._x("SELECT id FROM page WHERE dedupe_key = ?", (key,)).fetchone()
            if row:
                return row[0]
        now = self.clock()
        ts = now if timestamp is None else float(timestamp)
        body = page_text(user_text, assistant_text)
        kws = T.keywords(body, self.params.page_keywords)
        self._x(
            "INSERT INTO page(conversation_id, user_text, assistant_text, timestamp, tier, keywords, "
            "user_message_id, assistant_message_id, meta, created_at, dedupe_key) "
            "VALUES (?,?,?,?, 'stm', ?,?,?,?,?,?)",
            (
                cid,
                user_text or "",
                assistant_text or "",
                ts,
                _j(kws),
                user_message_id,
                assistant_message_id,
                _j(meta or {}),
                now,
                key,
            ),
        )
        pid = self._conn.last_insert_rowid()
        self._vec_put_page(pid, vec, body)
        self._fts_put("page_fts", "page_tri", pid, body)
        self._emit("page_added", "page", pid, f"page {pid} entered short-term memory", {"conversation_id": cid})
        self._stm_overflow(cid)
        return pid

    def _stm_overflow(self, cid: int | None) -> None:
        cap = max(0, int(self.params.stm_capacity))
        rows = self._x("SELECT id FROM page WHERE tier = 'stm' AND conversation_id IS ? ORDER BY id", (cid,)).fetchall()
        for (pid,) in rows[: max(0, len(rows) - cap)]:
            self._move_to_mtm(pid)

    # ------------------------------------------------------------------ STM -> MTM
    def _move_to_mtm(self, pid: int) -> int:
        p = self.params
        row = self._x(
            "SELECT conversation_id, timestamp, keywords, user_text, assistant_text FROM page "
            "WHERE id = ? AND tier = 'stm'",
            (pid,),
        ).fetchone()
        if row is None:
            return 0
        cid, ts, kws_s, _, _ = row
        kws = _pj(kws_s, [])
        vec = self._page_vec(pid)
        now = self.clock()

        # 1. dialogue chain: link to the previous moved page of the conversation when it continues the topic
        link_detail: dict = {}
        prev = self._x(
            "SELECT id, chain_id, timestamp, keywords FROM page WHERE conversation_id IS ? AND id < ? "
            "AND tier != 'stm' ORDER BY id DESC LIMIT 1",
            (cid, pid),
        ).fetchone()
        chain_id = None
        if prev is not None and cid is not None and abs(ts - prev[2]) <= p.chain_max_gap_s:
            cont = float(self._page_vec(prev[0]) @ vec) + T.jaccard(kws, _pj(prev[3], []))
            link_detail = {"prev_page_id": prev[0], "continuity": round(cont, 4)}
            if cont >= p.chain_theta:
                chain_id = prev[1]
                if chain_id is None:
                    self._x("INSERT INTO chain(summary, keywords, updated_at) VALUES ('', '[]', ?)", (now,))
                    chain_id = self._conn.last_insert_rowid()
                    self._x("UPDATE page SET chain_id = ? WHERE id = ?", (chain_id, prev[0]))
                self._x("UPDATE page SET prev_page_id = ?, chain_id = ? WHERE id = ?", (prev[0], chain_id, pid))

        # 2. segment: join the best MTM segment when cos + Jaccard >= theta, else start one
        best_sid, best_score, best_cos, best_jac = None, -1.0, 0.0, 0.0
        knn = self._x(
            "SELECT segment_id, distance FROM segment_vec WHERE embedding MATCH ? AND k = ? AND tier = 'mtm'",
            (_blob(vec), max(1, p.segment_candidates)),
        ).fetchall()
        seg_kw = (
            dict(
                self._x(
                    "SELECT id, keywords FROM segment WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps([sid for sid, _ in knn]),),
                ).fetchall()
            )
            if knn
            else {}
        )
        for sid, dist in knn:
            skw = _pj(seg_kw.get(sid), [])
            cos = 1.0 - float(dist)
            jac = T.jaccard(kws, skw)
            if cos + jac > best_score:
                best_sid, best_score, best_cos, best_jac = sid, cos + jac, cos, jac
        if best_sid is not None and best_score >= p.theta:
            sid = best_sid
            srow = self._x("SELECT emb_sum, kw_counts FROM segment WHERE id = ?", (sid,)).fetchone()
            acc = np.frombuffer(srow[0], dtype=np.float32) + vec
            counts: dict = _pj(srow[1], {})
            self._count_keywords(counts, kws)
            self._x("UPDATE page SET tier = 'mtm', segment_id = ?, moved_at = ? WHERE id = ?", (sid, now, pid))
            self._x(
                "UPDATE segment SET emb_sum = ?, kw_counts = ?, keywords = ?, page_count = page_count + 1, "
                "l_interaction = l_interaction + 1, last_access = ?, updated_at = ? WHERE id = ?",
                (_blob(acc), _j(counts), _j(self._top_keywords(counts)), now, now, sid),
            )
            self._x("UPDATE segment_vec SET embedding = ? WHERE segment_id = ?", (_blob(_unit(acc)), sid))
            self._refresh_segment_summary(sid)
            how = "joined"
        else:
            counts = {}
            self._count_keywords(counts, kws)
            self._x(
                "INSERT INTO segment(tier, summary, keywords, kw_counts, emb_sum, n_visit, l_interaction, "
                "last_access, created_at, updated_at, page_count) VALUES ('mtm', '', ?, ?, ?, 0, 1, ?, ?, ?, 1)",
                (_j(kws[: p.segment_keywords]), _j(counts), _blob(vec), now, now, now),
            )
            sid = self._conn.last_insert_rowid()
            self._x("UPDATE page SET tier = 'mtm', segment_id = ?, moved_at = ? WHERE id = ?", (sid, now, pid))
            self._seg_vec_put(sid, "mtm", vec)
            self._refresh_segment_summary(sid)
            how = "created"
            self._emit("segment_created", "segment", sid, f"segment {sid} created", {"page_id": pid})
        if chain_id is not None:
            self._refresh_chain(chain_id)
        self._emit(
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
        self._maybe_promote(sid)
        self._evict_if_needed()
        return sid

    @staticmethod
    def _count_keywords(counts: dict, kws: list[str]) -> None:
        """counts: stem -> [count, surface form shown to the user]."""
        for k in kws:
            st = T.stem(k)
            c = counts.get(st)
            if c is None:
                counts[st] = [1, k]
            else:
                c[0] += 1

    def _top_keywords(self, counts: dict) -> list[str]:
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1][0], kv[0]))
        return [v[1] for _, v in ranked[: self.params.segment_keywords]]

    def _refresh_segment_summary(self, sid: int) -> None:
        rows = self._x(
            "SELECT user_text, assistant_text FROM page WHERE segment_id = ? ORDER BY id DESC LIMIT 5", (sid,)
        ).fetchall()
        first = self._x(
            "SELECT user_text, assistant_text FROM page WHERE segment_id = ? ORDER BY id LIMIT 1", (sid,)
        ).fetchone()
        texts = [page_text(u, a) for u, a in reversed(rows)]
        if first is not None and page_text(*first) not in texts:
            texts.insert(0, page_text(*first))
        kws = _pj(self._x("SELECT keywords FROM segment WHERE id = ?", (sid,)).fetchone()[0], [])
        summary = T.extractive_summary(texts, kws, self.params.summary_chars)
        self._x("UPDATE segment SET summary = ? WHERE id = ?", (summary, sid))

    def _refresh_chain(self, chain_id: int) -> None:
        rows = self._x(
            "SELECT user_text, assistant_text, keywords FROM page WHERE chain_id = ? ORDER BY id DESC LIMIT 6",
            (chain_id,),
        ).fetchall()
        if not rows:
            self._x("DELETE FROM chain WHERE id = ?", (chain_id,))
            return
        kws = T.merge_keywords([_pj(k, []) for _, _, k in reversed(rows)], 8)
        texts = [page_text(u, a) for u, a, _ in reversed(rows)]
        summary = T.extractive_summary(texts, kws, max(80, self.params.summary_chars // 2))
        label = T.topic_label(kws)
        self._x(
            "UPDATE chain SET summary = ?, keywords = ?, updated_at = ? WHERE id = ?",
            (f"[{label}] {summary}" if label else summary, _j(kws), self.clock(), chain_id),
        )

    def _rebuild_segment(self, sid: int) -> bool:
        """Recompute a segment's embedding, keywords, count and summary from its pages; delete it when empty."""
        rows = self._x("SELECT id, keywords FROM page WHERE segment_id = ?", (sid,)).fetchall()
        if not rows:
            self._x("DELETE FROM segment_vec WHERE segment_id = ?", (sid,))
            self._x("DELETE FROM segment WHERE id = ?", (sid,))
            return False
        counts: dict = {}
        for _, k in rows:
            self._count_keywords(counts, _pj(k, []))
        self._x(
            "UPDATE segment SET kw_counts = ?, keywords = ?, page_count = ?, updated_at = ? WHERE id = ?",
            (_j(counts), _j(self._top_keywords(counts)), len(rows), self.clock(), sid),
        )
        self._refresh_segment_vector(sid)
        self._refresh_segment_summary(sid)
        return True

    def _refresh_segment_vector(self, sid: int) -> None:
        """A segment's summed vector and its index row from its pages' current vectors (all a re-embedding
        changes of a segment; `_rebuild_segment` does the rest when its pages change)."""
        row = self._x("SELECT tier FROM segment WHERE id = ?", (sid,)).fetchone()
        if row is None:
            return
        acc = np.zeros(self.dim, np.float32)
        for (pid,) in self._x("SELECT id FROM page WHERE segment_id = ?", (sid,)).fetchall():
            acc += self._page_vec(pid)
        self._x("UPDATE segment SET emb_sum = ? WHERE id = ?", (_blob(acc), sid))
        self._seg_vec_put(sid, row[0], _unit(acc))

    # ------------------------------------------------------------------ heat, eviction
    def _segment_heat(self, sid: int) -> float | None:
        heat, args = self._heat_sql(self.clock())
        row = self._x(f"SELECT {heat} FROM segment s WHERE s.id = :sid", {**args, "sid": sid}).fetchone()
        return None if row is None else float(row[0])

    def _record_visits(self, sids: list[int]) -> None:
        """One short write after a retrieval: N_visit + 1 and a fresh last access for each segment
        that supplied a page, a `segment_visited` event each (so a segment's heat history can be
        replayed from the log), then promotion if the visit made a segment hot enough."""
        now = self.clock()
        with self.transaction():
            marks = ",".join("?" * len(sids))
            rows = self._x(
                f"UPDATE segment SET n_visit = n_visit + 1, last_access = ? WHERE id IN ({marks}) "
                "RETURNING id, n_visit",
                [now, *sids],
            ).fetchall()
            for sid, n_visit in sorted(rows):
                self._emit(
                    "segment_visited",
                    "segment",
                    sid,
                    f"segment {sid} recalled (N_visit {n_visit})",
                    {"count": 1, "n_visit": n_visit},
                )
            for sid in sids:
                self._maybe_promote(sid)

    def _maybe_promote(self, sid: int) -> None:
        if self._get_meta("paused", "0") == "1":
            return
        heat = self._segment_heat(sid)
        if heat is None or heat < self.params.tau:
            return
        row = self._x("SELECT promotions, tier FROM segment WHERE id = ?", (sid,)).fetchone()
        fresh = self._x("SELECT 1 FROM page WHERE segment_id = ? AND analyzed = 0 LIMIT 1", (sid,)).fetchone()
        if row and fresh:
            self.enqueue("promote_segment", {"segment_id": sid}, key=f"promote_segment:{sid}:{row[0]}")

    def _evict_if_needed(self) -> None:
        cap = int(self.params.mtm_capacity)
        n = self._x("SELECT count(*) FROM segment WHERE tier = 'mtm'").fetchone()[0]
        heat, args = self._heat_sql(self.clock())
        while n > cap:
            row = self._x(
                f"SELECT s.id, {heat} AS h FROM segment s WHERE s.tier = 'mtm' AND s.pinned = 0 AND NOT EXISTS "
                "(SELECT 1 FROM page p INDEXED BY page_pinned WHERE p.segment_id = s.id AND p.pinned = 1) "
                "ORDER BY h, s.last_access, s.id "
                "LIMIT 1",
                args,
            ).fetchone()
            if row is None:
                break  # everything left is pinned
            self._archive_segment(row[0], heat=row[1])
            n -= 1

    def _archive_segment(self, sid: int, heat: float | None = None) -> None:
        now = self.clock()
        self._x("UPDATE segment SET tier = 'archive', archived_at = ? WHERE id = ?", (now, sid))
        self._x("UPDATE page SET tier = 'archive' WHERE segment_id = ?", (sid,))
        vec = np.frombuffer(self._x("SELECT emb_sum FROM segment WHERE id = ?", (sid,)).fetchone()[0], np.float32)
        self._seg_vec_put(sid, "archive", _unit(vec))
        self._emit(
            "segment_archived",
            "segment",
            sid,
            f"segment {sid} moved to the archive (coldest)",
            {"heat": None if heat is None else round(float(heat), 4)},
        )

    def restore_segment(self, sid: int) -> None:
        """Bring an archived segment back to MTM (the coldest unpinned one may be archived in turn)."""
        with self.transaction():
            row = self._x("SELECT tier, emb_sum FROM segment WHERE id = ?", (sid,)).fetchone()
            if not row or row[0] != "archive":
                return
            now = self.clock()
            self._x("UPDATE segment SET tier = 'mtm', archived_at = NULL, last_access = ? WHERE id = ?", (now, sid))
            self._x("UPDATE page SET tier = 'mtm' WHERE segment_id = ?", (sid,))
            self._seg_vec_put(sid, "mtm", _unit(np.frombuffer(row[1], np.float32)))
            self._emit("segment_restored", "segment", sid, f"segment {sid} restored to mid-term memory")
            self._evict_if_needed()

    # ------------------------------------------------------------------ management: edit / pin / forget / wipe
    def edit_page(self, pid: int, user_text: str | None = None, assistant_text: str | None = None) -> None:
        """Correct a page's text: re-embeds, re-indexes, refreshes its segment and chain."""
        page = self.get_page(pid)
        if page is None:
            raise KeyError(f"no page {pid}")
        u = page.user_text if user_text is None else user_text
        a = page.assistant_text if assistant_text is None else assistant_text
        body = page_text(u, a)
        if not body.strip():
            raise ValueError("a page needs some text")
        with self._lock:
            ctx = self._context_before(page.conversation_id, pid, page.timestamp)
        vec = self._embed_pages([(u, a)], [ctx])[0]
        with self.transaction():
            kws = T.keywords(body, self.params.page_keywords)
            self._x(
                "UPDATE page SET user_text = ?, assistant_text = ?, keywords = ? WHERE id = ?", (u, a, _j(kws), pid)
            )
            self._vec_put_page(pid, vec, body)
            self._fts_put("page_fts", "page_tri", pid, body)
            if page.segment_id is not None:
                self._rebuild_segment(page.segment_id)
            if page.chain_id is not None:
                self._refresh_chain(page.chain_id)
            self._recontext(self._pages_after([pid]))  # the next page was read after the old words
            self._emit("edited", "page", pid, f"page {pid} edited by the user")

    def pin(self, kind: str, item_id: int, pinned: bool = True) -> None:
        """Pin (protect from eviction and automatic updates) or unpin a page, segment, knowledge item or trait."""
        if kind not in ITEM_KINDS:
            raise ValueError(f"kind must be one of {ITEM_KINDS}")
        with self.transaction():
            self._x(f"UPDATE {kind} SET pinned = ? WHERE id = ?", (int(pinned), item_id))
            if self._conn.changes():
                self._emit(
                    "pinned" if pinned else "unpinned",
                    kind,
                    item_id,
                    f"{kind} {item_id} {'pinned' if pinned else 'unpinned'}",
                )

    def forget(self, kind: str, ids: int | Sequence[int]) -> int:
        """Remove items for good: base rows, vectors, FTS entries, and what was derived only from them.

        Forgetting a segment forgets its pages. Forgetting pages removes traits/knowledge whose every
        source page is gone, drops their versions that came only from those pages, and reverts an
        item to its newest surviving version when its current one came only from them. Returns the
        number of items removed.
        """
        if kind not in ITEM_KINDS:
            raise ValueError(f"kind must be one of {ITEM_KINDS}")
        id_list = [ids] if isinstance(ids, int) else list(ids)
        if not id_list:
            return 0
        with self.transaction():
            marks = ",".join("?" * len(id_list))
            if kind == "page":
                found = [r[0] for r in self._x(f"SELECT id FROM page WHERE id IN ({marks})", id_list).fetchall()]
                self._forget_pages(found)
            elif kind == "segment":
                found = [r[0] for r in self._x(f"SELECT id FROM segment WHERE id IN ({marks})", id_list).fetchall()]
                if found:
                    m2 = ",".join("?" * len(found))
                    pids = [r[0] for r in self._x(f"SELECT id FROM page WHERE segment_id IN ({m2})", found).fetchall()]
                    self._forget_pages(pids)
                    for sid in found:  # (already gone when it lost its last page)
                        self._x("DELETE FROM segment_vec WHERE segment_id = ?", (sid,))
                        self._x("DELETE FROM segment WHERE id = ?", (sid,))
            else:
                found = [r[0] for r in self._x(f"SELECT id FROM {kind} WHERE id IN ({marks})", id_list).fetchall()]
                for iid in found:
                    self._delete_item(kind, iid)
            for iid in found:
                self._emit("forgotten", kind, iid, f"{kind} {iid} forgotten by the user")
            return len(found)

    def conversation_memory(self, cid: int) -> ConversationMemory:
        """What memory holds from one conversation: its pages (every tier), how many are pinned, and
        the persona items that would go with them (every source page among them). Read-only: what
        `forget_conversation` would remove, for a confirmation that names it."""
        with self._lock:
            rows = self._x("SELECT id, pinned FROM page WHERE conversation_id = ? ORDER BY id", (cid,)).fetchall()
            ids = [r[0] for r in rows]
            return ConversationMemory(
                cid, ids, sum(1 for r in rows if r[1]), self._derived_only_from(set(ids)), self._pending_pages_of(cid)
            )

    def forget_conversation(self, cid: int) -> ConversationMemory:
        """Forget what memory learned from one conversation: every page of it in every tier (pinned
        ones too: the user asked for this chat's memory to go), the persona items drawn only from
        those pages, and its replies still waiting to become pages. Items other pages also support
        stay, losing these sources (see `forget`). The conversation and its messages are not touched;
        user-written facts have no source pages and stay. Returns what was removed."""
        with self.transaction():
            gone = self.conversation_memory(cid)
            self._x("DELETE FROM job WHERE " + _PENDING_PAGE_OF, (cid,))
            self._forget_pages(gone.page_ids)
            for kind in ("trait", "knowledge"):  # items that stay no longer name it as a source
                for iid, cids in self._x(
                    f"SELECT id, conversation_ids FROM {kind} WHERE EXISTS "
                    "(SELECT 1 FROM json_each(conversation_ids) WHERE value = ?)",
                    (cid,),
                ).fetchall():
                    self._x(
                        f"UPDATE {kind} SET conversation_ids = ? WHERE id = ?",
                        (_j([c for c in _pj(cids, []) if c != cid]), iid),
                    )
            if gone.page_ids or gone.pending_pages:
                self._emit(
                    "forgotten",
                    "conversation",
                    cid,
                    f"memory of conversation {cid} forgotten by the user: {len(gone.page_ids)} pages",
                    {
                        "pages": len(gone.page_ids),
                        "pending": gone.pending_pages,
                        "items": [f"{k} {i}" for k, i in gone.items],
                    },
                )
            return gone

    def _pending_pages_of(self, cid: int) -> int:
        return self._x("SELECT count(*) FROM job WHERE " + _PENDING_PAGE_OF, (cid,)).fetchone()[0]

    def _derived_only_from(self, gone: set[int]) -> list[tuple[str, int]]:
        """The traits and knowledge items whose every source page is in `gone`."""
        return [
            item
            for item, by_version in self._sources_touching(gone).items()
            if set().union(*by_version.values()) <= gone
        ]

    def _sources_touching(self, pages: set[int]) -> dict[tuple[str, int], dict[int, set[int]]]:
        """For every trait or knowledge item drawn from any of `pages`: its source pages by version
        (all of them, not only those in `pages`), in one query."""
        if not pages:
            return {}
        ids = sorted(pages)
        marks = ",".join("?" * len(ids))
        out: dict[tuple[str, int], dict[int, set[int]]] = {}
        for kind, iid, version, page in self._x(
            "SELECT d.item_kind, d.item_id, d.version, d.page_id FROM derivation d JOIN "
            f"(SELECT DISTINCT item_kind, item_id FROM derivation WHERE page_id IN ({marks})) t "
            "ON d.item_kind = t.item_kind AND d.item_id = t.item_id ORDER BY d.item_kind, d.item_id",
            ids,
        ).fetchall():
            out.setdefault((kind, iid), {}).setdefault(version, set()).add(page)
        return out

    def _forget_pages(self, ids: Sequence[int]) -> None:
        ids = sorted(set(ids))
        if not ids:
            return
        gone = set(ids)
        self._forget_derived(gone)
        marks = ",".join("?" * len(ids))
        info = self._x(f"SELECT id, prev_page_id, segment_id, chain_id FROM page WHERE id IN ({marks})", ids).fetchall()
        prev_of = {r[0]: r[1] for r in info}
        after = self._pages_after(ids)  # they were read after a forgotten page
        # relink chains across the forgotten pages
        for child, prev in self._x(
            f"SELECT id, prev_page_id FROM page WHERE prev_page_id IN ({marks})", ids
        ).fetchall():
            if child in gone:
                continue
            while prev in gone:
                prev = prev_of.get(prev)
            self._x("UPDATE page SET prev_page_id = ? WHERE id = ?", (prev, child))
        for pid in ids:
            self._vec_del_page(pid)
            self._fts_del("page_fts", "page_tri", pid)
        self._x(f"DELETE FROM page WHERE id IN ({marks})", ids)
        for sid in sorted({r[2] for r in info if r[2] is not None}):
            self._rebuild_segment(sid)
        for chain_id in sorted({r[3] for r in info if r[3] is not None}):
            self._refresh_chain(chain_id)
        self._recontext(after)

    def _forget_derived(self, gone: set[int]) -> None:
        ids = sorted(gone)
        marks = ",".join("?" * len(ids))
        for (kind, iid), by_version in self._sources_touching(gone).items():
            all_pages = set().union(*by_version.values())
            if not (all_pages - gone):
                self._delete_item(kind, iid)
                self._emit("forgotten", kind, iid, f"{kind} {iid} forgotten with its source pages")
                continue
            self._x(
                f"DELETE FROM derivation WHERE item_kind = ? AND item_id = ? AND page_id IN ({marks})",
                [kind, iid, *ids],
            )
            dead = {v for v, ps in by_version.items() if ps and ps <= gone}
            cur = self._x(f"SELECT version FROM {kind} WHERE id = ?", (iid,)).fetchone()[0]
            for v in dead - {cur}:
                self._x("DELETE FROM item_version WHERE item_kind = ? AND item_id = ? AND version = ?", (kind, iid, v))
            if cur in dead:
                self._revert_item(kind, iid)

    def undo_version(self, kind: str, iid: int, version: int) -> bool:
        """Make a trait's or fact's previous version current again, if `version` is still its current
        one (nothing has confirmed or changed it since). Returns whether it was reverted; an item
        without an earlier version is left as it is (forget it instead)."""
        if kind not in ("trait", "knowledge"):
            raise ValueError("kind must be 'trait' or 'knowledge'")
        with self.transaction():
            row = self._x(f"SELECT version FROM {kind} WHERE id = ?", (iid,)).fetchone()
            earlier = self._x(
                "SELECT 1 FROM item_version WHERE item_kind = ? AND item_id = ? AND version < ?", (kind, iid, version)
            ).fetchone()
            if row is None or row[0] != version or earlier is None:
                return False
            self._revert_item(kind, iid, reason="reverted by the user: the chat that changed it was forgotten")
            self._emit(
                "edited",
                kind,
                iid,
                f"{kind} {iid} reverted to its previous version by the user",
                {"from_version": version},
            )
            return True

    def _revert_item(
        self, kind: str, iid: int, *, reason: str = "reverted: newer version's sources were forgotten"
    ) -> None:
        """Make the newest archived version current again (its source pages survive)."""
        row = self._x(
            "SELECT version, text, detail FROM item_version WHERE item_kind = ? AND item_id = ? "
            "ORDER BY version DESC LIMIT 1",
            (kind, iid),
        ).fetchone()
        if row is None:
            self._delete_item(kind, iid)
            return
        version, text, detail_s = row
        detail = _pj(detail_s, {})
        vec_text = text if kind == "knowledge" else f"{detail.get('dimension', '')}: {text}"
        vec = self._embed([vec_text])[0]
        now = self.clock()
        if kind == "knowledge":
            self._x(
                "UPDATE knowledge SET text = ?, version = ?, confidence = ?, updated_at = ?, reason = ? WHERE id = ?",
                (text, version, float(detail.get("confidence", 0.5)), now, reason, iid),
            )
            self._x("DELETE FROM knowledge_vec WHERE knowledge_id = ?", (iid,))
            self._x("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (iid, _blob(vec)))
            self._fts_put("knowledge_fts", "knowledge_tri", iid, text)
        else:
            self._x(
                "UPDATE trait SET value = ?, version = ?, confidence = ?, evidence = ?, embedding = ?, "
                "updated_at = ?, reason = ? WHERE id = ?",
                (
                    text,
                    version,
                    float(detail.get("confidence", 0.5)),
                    detail.get("evidence", ""),
                    _blob(vec),
                    now,
                    reason,
                    iid,
                ),
            )
        self._x("DELETE FROM item_version WHERE item_kind = ? AND item_id = ? AND version = ?", (kind, iid, version))
        self._x("DELETE FROM derivation WHERE item_kind = ? AND item_id = ? AND version > ?", (kind, iid, version))

    def _delete_item(self, kind: str, iid: int) -> None:
        self._x("DELETE FROM derivation WHERE item_kind = ? AND item_id = ?", (kind, iid))
        self._x("DELETE FROM item_version WHERE item_kind = ? AND item_id = ?", (kind, iid))
        if kind == "knowledge":
            self._x("DELETE FROM knowledge_vec WHERE knowledge_id = ?", (iid,))
            self._fts_del("knowledge_fts", "knowledge_tri", iid)
        self._x(f"DELETE FROM {kind} WHERE id = ?", (iid,))

    def wipe_memory(self) -> None:
        """Delete every memory row (pages, segments, chains, traits, knowledge, versions, vectors, FTS,
        pending memory jobs, events). Conversations and messages stay."""
        with self.transaction():
            for sql in (
                "DELETE FROM derivation",
                "DELETE FROM item_version",
                "DELETE FROM trait",
                "DELETE FROM knowledge",
                "DELETE FROM knowledge_vec",
                "UPDATE page SET prev_page_id = NULL WHERE prev_page_id IS NOT NULL",
                "DELETE FROM page",
                "DELETE FROM chain",
                "DELETE FROM segment",
                "DELETE FROM page_vec",
                "DELETE FROM segment_vec",
                "DELETE FROM page_tok",
                "INSERT INTO page_fts(page_fts) VALUES ('delete-all')",
                "INSERT INTO page_tri(page_tri) VALUES ('delete-all')",
                "INSERT INTO knowledge_fts(knowledge_fts) VALUES ('delete-all')",
                "INSERT INTO knowledge_tri(knowledge_tri) VALUES ('delete-all')",
                "DELETE FROM job",
                "DELETE FROM event",
                "DELETE FROM vec_log",
                "INSERT INTO vec_log(kind, item_id, op) VALUES ('*', 0, 'reset')",
            ):
                self._x(sql)
            self._emit("wiped", None, None, "all memory wiped by the user")
