"""Keeping every stored vector and word row current with the embedder the memory is opened with: word rows
for pages that have none ("index_tokens"), pages read in context again after they were embedded alone
("read_in_context"), and every vector again after the embedding model changed ("reembed"). Each job goes in
batches that commit alone and queue the next, so a closed app resumes where it stopped."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np

from . import token_match
from .codec import vec_blob as _blob
from .types import PAGE_CONTEXT, page_text

# pages whose word rows or side vectors are still to be made (`page_tok.sides` is NULL for rows written
# before side vectors were kept: schema 5)
UNINDEXED = "id NOT IN (SELECT page_id FROM page_tok WHERE sides IS NOT NULL)"


class EmbeddingUpkeepMixin:
    def _upkeep_at_open(self, meta: dict[str, str]) -> None:
        """What the embedder the memory is opened with asks of it (inside open's transaction; `meta` as it
        was read before open wrote anything): a changed model re-embeds everything, a token embedder reads
        in context the pages embedded alone, and pages without word rows get them."""
        if "embed_dim" in meta and meta.get("embed_model_id") != self.embed_model_id:
            self._set_meta("embed_model_id", self.embed_model_id)
            self._set_meta("embed_model_previous", meta.get("embed_model_id") or "")
            self._start_reembed(self.embed_model_id)
            # another model's token vectors cannot be matched with this one's query words
            self._x("DELETE FROM page_tok")
            self._emit(
                "embed_model_changed",
                None,
                None,
                f"embedding model changed to {self.embed_model_id}; re-embedding queued",
                {"previous": meta.get("embed_model_id"), "model_id": self.embed_model_id},
            )
        if self._embed_tokens_fn is not None and meta.get("page_context") != PAGE_CONTEXT:
            # pages embedded before they were read in context (an older memory, or pages written while
            # "w tokens" was 0): embedded again, words too, batch by batch ("read_in_context")
            self._set_meta("page_context", PAGE_CONTEXT)
            if (
                self._x("SELECT 1 FROM page LIMIT 1").fetchone()
                and "embed_dim" in meta
                and not self.pending_jobs(kinds=["reembed"])
            ):  # a changed model's does it
                self._queue_read_in_context(meta.get("alone_from"))
            self._x("DELETE FROM meta WHERE key = 'alone_from'")
        self._queue_token_index()

    def _note_read_alone(self, pid: int) -> None:
        """Page `pid` was embedded without a token embedder (it reads no context), or must be read again after a
        page before it changed meanwhile: a memory whose pages were read in context no longer says so, and the
        first such page is kept (meta `alone_from`). When the memory is next opened with a token embedder,
        "read_in_context" starts there instead of at the first page (a user who set "w tokens" to 0 and back
        would otherwise keep the pages of that time embedded alone, or have the whole memory embedded again for
        them). A memory flagged "alone" without `alone_from` (before it was kept) starts at the first page.
        Read in the write's own transaction each time (one-row lookups), so a rolled-back write leaves no stale
        flag."""
        state = self._get_meta("page_context")
        if state == PAGE_CONTEXT:
            self._set_meta("page_context", "alone")
            self._set_meta("alone_from", str(pid))
        elif state == "alone":
            first = self._get_meta("alone_from")
            if first is not None and pid < int(first):
                self._set_meta("alone_from", str(pid))

    TOKEN_INDEX_BATCH = 256  # pages per "index_tokens" job; the next job takes the rest

    def _queue_token_index(self, missing: bool | None = None) -> None:
        """Queue an "index_tokens" job when some page has no token vectors yet (a memory from before
        them, pages stored with vectors of their own, a changed embedding model); `missing` True when
        the caller knows (no scan of the pages then). Inside a transaction."""
        if self._embed_tokens_fn is None or self.params.w_tokens <= 0:
            return
        if self._x(
            "SELECT 1 FROM job WHERE status = 'pending' AND kind IN ('index_tokens', 'read_in_context', "
            "'reembed') LIMIT 1"
        ).fetchone():
            return  # "read_in_context" and "reembed" write every page's rows as they go
        if missing is None:
            missing = self._x(f"SELECT 1 FROM page WHERE {UNINDEXED} LIMIT 1").fetchone()
        if missing:
            self.enqueue("index_tokens", {})

    def _page_token_blobs(self, rows: Sequence[tuple[int, str, str]]) -> list[tuple[bytes, bytes]]:
        """Packed content-token vectors and side vectors of pages given as (id, user_text, assistant_text),
        one encoder pass (the pages' vectors are left as they are)."""
        with self._lock:
            contexts = self._contexts_of_pages([r[0] for r in rows])
        _, per_text = self._embed_with_tokens([page_text(u, a) for _, u, a in rows], contexts=contexts)
        return [
            (token_match.pack(tv, toks), token_match.page_sides(tv, toks, u, a))
            for (_, u, a), (tv, toks) in zip(rows, per_text or [])
        ]

    def _job_index_tokens(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """Token vectors for up to TOKEN_INDEX_BATCH pages that have none, oldest first; queues the
        next batch itself (each commits alone, so a crash loses at most one batch of work)."""
        if self._embed_tokens_fn is None:
            return None
        missing = self._scalar(f"SELECT count(*) FROM page WHERE {UNINDEXED}")
        total = self._scalar("SELECT count(*) FROM page")
        rows = self._rows(
            f"SELECT id, user_text, assistant_text FROM page WHERE {UNINDEXED} ORDER BY id LIMIT ?",
            (self.TOKEN_INDEX_BATCH,),
        )
        if not rows:
            return None
        self._report_progress("indexing words", total - missing, total)
        blobs = self._page_token_blobs(rows)

        def apply() -> None:
            for (pid, u, a), (blob, sides) in zip(rows, blobs):
                row = self._x("SELECT user_text, assistant_text FROM page WHERE id = ?", (pid,)).fetchone()
                if row and page_text(row[0], row[1]) == page_text(u, a):  # not edited meanwhile
                    self._x(
                        "INSERT OR REPLACE INTO page_tok(page_id, vecs, sides) VALUES (?, ?, ?)", (pid, blob, sides)
                    )
            self._report_progress("indexing words", total - missing + len(rows), total)
            if len(rows) < missing:
                self.enqueue("index_tokens", {})

        return apply

    READ_IN_CONTEXT_BATCH = 256  # pages per "read_in_context" job; the next job takes the rest
    REEMBED_BATCH = 256  # pages per "reembed" job; the next job takes the rest

    def _embed_page_batch(self, after: int, end: int | None, batch: int):
        """The next `batch` pages after page `after` (up to page `end`), embedded each after the page before
        it, vectors and word rows from one encoder pass: (ids, bodies, contexts, vectors)."""
        return self._embed_stored_pages(
            self._rows(
                "SELECT id, user_text, assistant_text FROM page WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                (after, end if end is not None else 2**62, batch),
            )
        )

    def _put_page_batch(self, ids, bodies, contexts, vecs) -> set[int]:
        """Write `_embed_page_batch`'s vectors (inside the job's transaction), passing over a page edited or
        forgotten meanwhile, or one whose page before was: that already embedded it again. Returns the
        segments of the pages written."""
        now = dict(zip(ids, self._contexts_of_pages(ids)))
        segments: set[int] = set()
        for pid, body, ctx, vec in zip(ids, bodies, contexts, vecs):
            row = self._x("SELECT user_text, assistant_text, segment_id FROM page WHERE id = ?", (pid,)).fetchone()
            if row is None or page_text(row[0], row[1]) != body or now.get(pid) != ctx:
                continue
            self._vec_put_page(pid, vec, body)
            if row[2] is not None:
                segments.add(row[2])
        return segments

    def _queue_read_in_context(self, alone_from: str | None) -> None:
        """Queue "read_in_context" from the first page embedded alone (`alone_from`, see `_note_read_alone`;
        every page when not known: a memory from before), or from where a pending one had got to if that is
        earlier (it was not finished when pages were embedded alone)."""
        start = int(alone_from) - 1 if alone_from else 0
        for (payload,) in self._rows("SELECT payload FROM job WHERE status = 'pending' AND kind = 'read_in_context'"):
            start = min(start, int(json.loads(payload).get("after") or 0))
        self.cancel_jobs(kind="read_in_context")
        self.enqueue("read_in_context", {"after": max(0, start)})

    def _job_read_in_context(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """Embed the next READ_IN_CONTEXT_BATCH pages after page `payload["after"]` again, each read after the
        page before it (a memory from before pages were read in context). Each batch commits alone and
        queues the next, so a closed app resumes where it stopped, and until its turn a page keeps its old
        vector and word rows: they are the same model's, so the memory ranks as before meanwhile."""
        after = int(payload.get("after") or 0)
        if self._embed_tokens_fn is None:
            # opened without a token embedder: the memory is not read in context past page `after` yet, and
            # the next opening with one resumes there
            return lambda: self._note_read_alone(after + 1)
        total = self._scalar("SELECT count(*) FROM page")
        done = self._scalar("SELECT count(*) FROM page WHERE id <= ?", (after,))
        self._report_progress("re-embedding memory", done, total)
        ids, bodies, contexts, vecs = self._embed_page_batch(after, None, self.READ_IN_CONTEXT_BATCH)

        def apply() -> None:
            for sid in sorted(self._put_page_batch(ids, bodies, contexts, vecs)):
                self._refresh_segment_vector(sid)
            self._report_progress("re-embedding memory", done + len(ids), total)
            if len(ids) == self.READ_IN_CONTEXT_BATCH:
                self.enqueue("read_in_context", {"after": ids[-1]})
            else:
                self._emit(
                    "reembedded",
                    None,
                    None,
                    f"memory re-embedded with {self.embed_model_id}, each page read after the one before it",
                    {"pages": total, "reason": "page_context"},
                )

        return apply

    def _reembedding(self) -> tuple[int, int] | None:
        """While a changed embedding model's "reembed" runs: (last page done, last page to do). Pages in
        between still hold the old model's vectors, which a query embedded by the new one cannot be
        compared with (retrieval leaves their cosine out; keywords still find them)."""
        got = dict(self._rows("SELECT key, value FROM meta WHERE key IN ('reembed_upto', 'reembed_end')"))
        return None if "reembed_end" not in got else (int(got.get("reembed_upto") or 0), int(got["reembed_end"]))

    def _start_reembed(self, model_id: str) -> None:
        """Queue the re-embedding of every page, fact and trait with a changed model (inside open's transaction).
        A change before the last one finished starts again from the first page."""
        self.cancel_jobs(kind="reembed")
        self.cancel_jobs(kind="read_in_context")  # "reembed" reads each page in context too
        end = self._scalar("SELECT coalesce(max(id), 0) FROM page")
        self._set_meta("reembed_upto", "0")
        self._set_meta("reembed_end", str(end))
        self.enqueue("reembed", {"model_id": model_id, "after": 0})

    def _job_reembed(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """Re-embed the next REEMBED_BATCH pages with the current model (facts and traits with the first
        batch, segments with the last). Each batch commits alone and queues the next: a closed app resumes
        where it stopped instead of starting again, and the pages done rank by meaning while the rest wait
        (see `_reembedding`)."""
        span = self._reembedding()
        if span is None:  # a job queued before batches: the range is every page now
            span = (0, int(self._scalar("SELECT coalesce(max(id), 0) FROM page")))
        after, end = int(payload.get("after") or 0), span[1]
        total = self._scalar("SELECT count(*) FROM page WHERE id <= ?", (end,))
        done = self._scalar("SELECT count(*) FROM page WHERE id <= ?", (after,))
        self._report_progress("re-embedding memory", done, total)
        ids, bodies, contexts, vecs = self._embed_page_batch(after, end, self.REEMBED_BATCH)
        last = not ids or not self._one("SELECT 1 FROM page WHERE id > ? AND id <= ?", (ids[-1], end))
        kn = self._rows("SELECT id, text FROM knowledge") if after == 0 else []
        kvecs = self._embed([t for _, t in kn]) if kn else np.zeros((0, self.dim), np.float32)
        tr = self._rows("SELECT id, dimension, value FROM trait") if after == 0 else []
        tvecs = self._embed([f"{d}: {v}" for _, d, v in tr]) if tr else np.zeros((0, self.dim), np.float32)

        def apply() -> None:
            self._put_page_batch(ids, bodies, contexts, vecs)
            for (kid, _), v in zip(kn, kvecs):
                self._x("DELETE FROM knowledge_vec WHERE knowledge_id = ?", (kid,))
                self._x("INSERT INTO knowledge_vec(knowledge_id, embedding) VALUES (?, ?)", (kid, _blob(v)))
            for (tid, _, _), v in zip(tr, tvecs):
                self._x("UPDATE trait SET embedding = ? WHERE id = ?", (_blob(v), tid))
            self._report_progress("re-embedding memory", done + len(ids), total)
            if not last:
                self._set_meta("reembed_upto", str(ids[-1]))
                self._set_meta("reembed_end", str(end))  # (a job queued before batches had none)
                self.enqueue("reembed", {"model_id": payload.get("model_id"), "after": ids[-1]})
                return
            for (sid,) in self._x("SELECT id FROM segment").fetchall():
                self._refresh_segment_vector(sid)
            self._x("DELETE FROM meta WHERE key IN ('reembed_upto', 'reembed_end')")
            self._emit(
                "reembedded",
                None,
                None,
                f"memory re-embedded with {payload.get('model_id')}",
                {"pages": total, "reason": "model"},
            )

        return apply
