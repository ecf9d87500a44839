"""Keeping every stored vector and word row current with the embedder the memory is opened with: word rows
for pages that have none ("index_tokens"), pages read in context again after they were embedded alone
("read_in_context"), and every vector again after the embedding model changed ("reembed"). Each job goes in
batches that commit alone and queue the next, so a closed app resumes where it stopped."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np

from .pages import token_match
from .pages.component import UNINDEXED, Pages
from .pages.embedding import Embedding
from .persona.versions import Versions
from .segments.component import Segments
from .storage.database import Database
from .storage.jobs import Jobs
from .types import PAGE_CONTEXT, page_text

# a batch of stored pages embedded again: (ids, bodies, contexts, vectors)
PageBatch = tuple[list[int], list[str], list[str], np.ndarray]


class Upkeep:
    TOKEN_INDEX_BATCH = 256  # pages per "index_tokens" job; the next job takes the rest
    READ_IN_CONTEXT_BATCH = 256  # pages per "read_in_context" job; the next job takes the rest
    REEMBED_BATCH = 256  # pages per "reembed" job; the next job takes the rest

    def __init__(
        self, db: Database, embedding: Embedding, pages: Pages, segments: Segments, versions: Versions, jobs: Jobs
    ):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.segments = segments
        self.versions = versions
        self.jobs = jobs
        jobs.register("index_tokens", self._job_index_tokens)
        jobs.register("read_in_context", self._job_read_in_context)
        jobs.register("reembed", self._job_reembed)

    def at_open(self, meta: dict[str, str]) -> None:
        """What the embedder the memory is opened with asks of it (inside open's transaction; `meta` as it
        was read before open wrote anything): a changed model re-embeds everything, a token embedder reads
        in context the pages embedded alone, and pages without word rows get them."""
        if "embed_dim" in meta and meta.get("embed_model_id") != self.embedding.model_id:
            self.db.set_meta("embed_model_id", self.embedding.model_id)
            self.db.set_meta("embed_model_previous", meta.get("embed_model_id") or "")
            self._start_reembed(self.embedding.model_id)
            # another model's token vectors cannot be matched with this one's query words
            self.pages.drop_all_tokens()
            self.db.emit(
                "embed_model_changed",
                None,
                None,
                f"embedding model changed to {self.embedding.model_id}; re-embedding queued",
                {"previous": meta.get("embed_model_id"), "model_id": self.embedding.model_id},
            )
        if self.embedding.has_tokens and meta.get("page_context") != PAGE_CONTEXT:
            # pages embedded before they were read in context (an older memory, or pages written while
            # "w tokens" was 0): embedded again, words too, batch by batch ("read_in_context")
            self.db.set_meta("page_context", PAGE_CONTEXT)
            if (
                self.db.execute("SELECT 1 FROM page LIMIT 1").fetchone()
                and "embed_dim" in meta
                and not self.jobs.pending(kinds=["reembed"])
            ):  # a changed model's does it
                self._queue_read_in_context(meta.get("alone_from"))
            self.db.delete_meta("alone_from")
        self.pages.queue_token_index()

    def page_token_blobs(self, rows: Sequence[tuple[int, str, str]]) -> list[tuple[bytes, bytes]]:
        """Packed content-token vectors and side vectors of pages given as (id, user_text, assistant_text),
        one encoder pass (the pages' vectors are left as they are)."""
        with self.db.lock:
            contexts = self.pages.contexts_of([r[0] for r in rows])
        _, per_text = self.embedding.embed_with_tokens([page_text(u, a) for _, u, a in rows], contexts=contexts)
        return [
            (token_match.pack(tv, toks), token_match.page_sides(tv, toks, u, a))
            for (_, u, a), (tv, toks) in zip(rows, per_text or [])
        ]

    def _job_index_tokens(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """Token vectors for up to TOKEN_INDEX_BATCH pages that have none, oldest first; queues the
        next batch itself (each commits alone, so a crash loses at most one batch of work)."""
        if not self.embedding.has_tokens:
            return None
        missing = self.db.scalar(f"SELECT count(*) FROM page WHERE {UNINDEXED}")
        total = self.db.scalar("SELECT count(*) FROM page")
        rows = self.db.rows(
            f"SELECT id, user_text, assistant_text FROM page WHERE {UNINDEXED} ORDER BY id LIMIT ?",
            (self.TOKEN_INDEX_BATCH,),
        )
        if not rows:
            return None
        self.jobs.report_progress("indexing words", total - missing, total)
        blobs = self.page_token_blobs(rows)

        def apply() -> None:
            for (pid, u, a), (blob, sides) in zip(rows, blobs):
                row = self.db.execute("SELECT user_text, assistant_text FROM page WHERE id = ?", (pid,)).fetchone()
                if row and page_text(row[0], row[1]) == page_text(u, a):  # not edited meanwhile
                    self.pages.put_tokens(pid, blob, sides)
            self.jobs.report_progress("indexing words", total - missing + len(rows), total)
            if len(rows) < missing:
                self.jobs.enqueue("index_tokens", {})

        return apply

    def _embed_page_batch(self, after: int, end: int | None, batch: int) -> PageBatch:
        """The next `batch` pages after page `after` (up to page `end`), embedded each after the page before
        it, vectors and word rows from one encoder pass: (ids, bodies, contexts, vectors)."""
        return self.pages.embed_stored(
            self.db.rows(
                "SELECT id, user_text, assistant_text FROM page WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                (after, end if end is not None else 2**62, batch),
            )
        )

    def _put_page_batch(self, ids: list[int], bodies: list[str], contexts: list[str], vecs: np.ndarray) -> set[int]:
        """Write `_embed_page_batch`'s vectors (inside the job's transaction), passing over a page edited or
        forgotten meanwhile, or one whose page before was: that already embedded it again. Returns the
        segments of the pages written."""
        now = dict(zip(ids, self.pages.contexts_of(ids)))
        segments: set[int] = set()
        for pid, body, ctx, vec in zip(ids, bodies, contexts, vecs):
            row = self.db.execute(
                "SELECT user_text, assistant_text, segment_id FROM page WHERE id = ?", (pid,)
            ).fetchone()
            if row is None or page_text(row[0], row[1]) != body or now.get(pid) != ctx:
                continue
            self.pages.vec_put(pid, vec, body)
            if row[2] is not None:
                segments.add(row[2])
        return segments

    def _queue_read_in_context(self, alone_from: str | None) -> None:
        """Queue "read_in_context" from the first page embedded alone (`alone_from`, see `_note_read_alone`;
        every page when not known: a memory from before), or from where a pending one had got to if that is
        earlier (it was not finished when pages were embedded alone)."""
        start = int(alone_from) - 1 if alone_from else 0
        for (payload,) in self.db.rows("SELECT payload FROM job WHERE status = 'pending' AND kind = 'read_in_context'"):
            start = min(start, int(json.loads(payload).get("after") or 0))
        self.jobs.cancel(kind="read_in_context")
        self.jobs.enqueue("read_in_context", {"after": max(0, start)})

    def _job_read_in_context(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """Embed the next READ_IN_CONTEXT_BATCH pages after page `payload["after"]` again, each read after the
        page before it (a memory from before pages were read in context). Each batch commits alone and
        queues the next, so a closed app resumes where it stopped, and until its turn a page keeps its old
        vector and word rows: they are the same model's, so the memory ranks as before meanwhile."""
        after = int(payload.get("after") or 0)
        if not self.embedding.has_tokens:
            # opened without a token embedder: the memory is not read in context past page `after` yet, and
            # the next opening with one resumes there
            return lambda: self.pages.note_read_alone(after + 1)
        total = self.db.scalar("SELECT count(*) FROM page")
        done = self.db.scalar("SELECT count(*) FROM page WHERE id <= ?", (after,))
        self.jobs.report_progress("re-embedding memory", done, total)
        ids, bodies, contexts, vecs = self._embed_page_batch(after, None, self.READ_IN_CONTEXT_BATCH)

        def apply() -> None:
            for sid in sorted(self._put_page_batch(ids, bodies, contexts, vecs)):
                self.segments.refresh_vector(sid)
            self.jobs.report_progress("re-embedding memory", done + len(ids), total)
            if len(ids) == self.READ_IN_CONTEXT_BATCH:
                self.jobs.enqueue("read_in_context", {"after": ids[-1]})
            else:
                self.db.emit(
                    "reembedded",
                    None,
                    None,
                    f"memory re-embedded with {self.embedding.model_id}, each page read after the one before it",
                    {"pages": total, "reason": "page_context"},
                )

        return apply

    def reembedding(self) -> tuple[int, int] | None:
        """While a changed embedding model's "reembed" runs: (last page done, last page to do). Pages in
        between still hold the old model's vectors, which a query embedded by the new one cannot be
        compared with (retrieval leaves their cosine out; keywords still find them)."""
        got = dict(self.db.rows("SELECT key, value FROM meta WHERE key IN ('reembed_upto', 'reembed_end')"))
        return None if "reembed_end" not in got else (int(got.get("reembed_upto") or 0), int(got["reembed_end"]))

    def _start_reembed(self, model_id: str) -> None:
        """Queue the re-embedding of every page, fact and trait with a changed model (inside open's transaction).
        A change before the last one finished starts again from the first page."""
        self.jobs.cancel(kind="reembed")
        self.jobs.cancel(kind="read_in_context")  # "reembed" reads each page in context too
        end = self.db.scalar("SELECT coalesce(max(id), 0) FROM page")
        self.db.set_meta("reembed_upto", "0")
        self.db.set_meta("reembed_end", str(end))
        self.jobs.enqueue("reembed", {"model_id": model_id, "after": 0})

    def _job_reembed(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        """Re-embed the next REEMBED_BATCH pages with the current model (facts and traits with the first
        batch, segments with the last). Each batch commits alone and queues the next: a closed app resumes
        where it stopped instead of starting again, and the pages done rank by meaning while the rest wait
        (see `_reembedding`)."""
        span = self.reembedding()
        if span is None:  # a job queued before batches: the range is every page now
            span = (0, int(self.db.scalar("SELECT coalesce(max(id), 0) FROM page")))
        after, end = int(payload.get("after") or 0), span[1]
        total = self.db.scalar("SELECT count(*) FROM page WHERE id <= ?", (end,))
        done = self.db.scalar("SELECT count(*) FROM page WHERE id <= ?", (after,))
        self.jobs.report_progress("re-embedding memory", done, total)
        ids, bodies, contexts, vecs = self._embed_page_batch(after, end, self.REEMBED_BATCH)
        last = not ids or not self.db.one("SELECT 1 FROM page WHERE id > ? AND id <= ?", (ids[-1], end))
        kn = self.db.rows("SELECT id, text FROM knowledge") if after == 0 else []
        kvecs = self.embedding.embed([t for _, t in kn]) if kn else np.zeros((0, self.db.dim), np.float32)
        tr = self.db.rows("SELECT id, dimension, value FROM trait") if after == 0 else []
        tvecs = self.embedding.embed([f"{d}: {v}" for _, d, v in tr]) if tr else np.zeros((0, self.db.dim), np.float32)

        def apply() -> None:
            self._put_page_batch(ids, bodies, contexts, vecs)
            for (kid, _), v in zip(kn, kvecs):
                self.versions.set_vector("knowledge", kid, v)
            for (tid, _, _), v in zip(tr, tvecs):
                self.versions.set_vector("trait", tid, v)
            self.jobs.report_progress("re-embedding memory", done + len(ids), total)
            if not last:
                self.db.set_meta("reembed_upto", str(ids[-1]))
                self.db.set_meta("reembed_end", str(end))  # (a job queued before batches had none)
                self.jobs.enqueue("reembed", {"model_id": payload.get("model_id"), "after": ids[-1]})
                return
            for (sid,) in self.db.execute("SELECT id FROM segment").fetchall():
                self.segments.refresh_vector(sid)
            self.db.delete_meta("reembed_upto", "reembed_end")
            self.db.emit(
                "reembedded",
                None,
                None,
                f"memory re-embedded with {payload.get('model_id')}",
                {"pages": total, "reason": "model"},
            )

        return apply
