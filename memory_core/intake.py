"""Pages entering memory: one reply (add_page, the "add_page" job) or an import's many (embed_pages,
add_pages), each stored in its conversation's STM, the oldest overflowing to MTM."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import text as T
from .pages.component import Pages
from .pages.embedding import Embedding
from .segments.component import Segments
from .storage.codec import to_json
from .storage.database import Database, checkpoint
from .storage.jobs import Jobs
from .types import page_text


class Intake:
    def __init__(self, db: Database, embedding: Embedding, pages: Pages, segments: Segments, jobs: Jobs):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.segments = segments
        jobs.register("add_page", self._job_add_page)

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
        with self.db.lock:
            if self.pages.memory_off(cid):
                return 0
        if embedding is not None:
            vec = self.embedding.check_vec(embedding)
        else:
            with self.db.lock:
                ctx = self.pages.context_before(cid, None, self.db.clock() if timestamp is None else timestamp)
            vec = self.embedding.embed_pages([(user_text, assistant_text)], [ctx])[0]
        with self.db.transaction():
            return self._add_txn(
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
        with self.db.lock:
            contexts = self.pages.item_contexts(conversation_id, items, before)
        todo = [i for i, it in enumerate(items) if it.get("embedding") is None]
        if todo:
            vecs = self.embedding.embed_pages(
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
        with self.db.lock:
            if self.pages.memory_off(cid):
                return [0] * len(items)
        ids: list[int] = []
        bs = max(1, self.db.params.jobs.import_batch)
        for start in range(0, len(items), bs):
            chunk = list(items[start : start + bs])
            texts = [page_text(it.get("user_text", ""), it.get("assistant_text", "")) for it in chunk]
            todo = [i for i, it in enumerate(chunk) if it.get("embedding") is None]
            vecs: list[np.ndarray | None] = [None] * len(chunk)
            if todo:
                with self.db.lock:
                    contexts = self.pages.item_contexts(cid, chunk)
                emb = self.embedding.embed_pages(
                    [(chunk[i].get("user_text", ""), chunk[i].get("assistant_text", "")) for i in todo],
                    [contexts[i] for i in todo],
                )
                for i, v in zip(todo, emb):
                    vecs[i] = v
            for i, it in enumerate(chunk):
                if vecs[i] is None:
                    vecs[i] = self.embedding.check_vec(it["embedding"])
            with self.db.transaction():
                for it, vec, txt in zip(chunk, vecs, texts):
                    assert vec is not None  # every item has its vector by now (embedded or given)
                    if not txt.strip():
                        ids.append(0)
                        continue
                    ids.append(
                        self._add_txn(
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

    def _add_txn(
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
        if self.pages.memory_off(cid):
            return 0
        key = (
            dedupe_key
            if dedupe_key is not None
            else (f"amsg:{assistant_message_id}" if assistant_message_id is not None else None)
        )
        if key is not None:
            row = self.db.execute("SELECT id FROM page WHERE dedupe_key = ?", (key,)).fetchone()
            if row:
                return row[0]
        now = self.db.clock()
        ts = now if timestamp is None else float(timestamp)
        body = page_text(user_text, assistant_text)
        kws = T.keywords(body, self.db.params.segments.page_keywords)
        row = {
            "conversation_id": cid,
            "user_text": user_text or "",
            "assistant_text": assistant_text or "",
            "timestamp": ts,
            "keywords": to_json(kws),
            "user_message_id": user_message_id,
            "assistant_message_id": assistant_message_id,
            "meta": to_json(meta or {}),
            "created_at": now,
            "dedupe_key": key,
        }
        pid = self.pages.add_stm(cid, row, vec, body)  # a page is written to its chat's space
        self.db.emit("page_added", "page", pid, f"page {pid} entered short-term memory", {"conversation_id": cid})
        self.segments.stm_overflow(cid)
        return pid

    def _job_add_page(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None]:
        kw = dict(payload)
        cid = kw.pop("conversation_id", kw.pop("cid", None))
        user_text = kw.pop("user_text", "")
        assistant_text = kw.pop("assistant_text", "")
        emb = kw.pop("embedding", None)
        if emb is not None:
            vec = self.embedding.check_vec(emb)
        else:
            ts = kw.get("timestamp")
            with self.db.lock:
                ctx = self.pages.context_before(cid, None, self.db.clock() if ts is None else ts)
            vec = self.embedding.embed_pages([(user_text, assistant_text)], [ctx])[0]
        if kw.get("assistant_message_id") is None:
            kw.setdefault("dedupe_key", f"job:{jid}")
        allowed = {"timestamp", "user_message_id", "assistant_message_id", "meta", "dedupe_key"}
        extra = set(kw) - allowed
        if extra:
            raise ValueError(f"unknown add_page job fields: {sorted(extra)}")

        def apply() -> None:
            self._add_txn(cid, user_text, assistant_text, vec, **kw)
            checkpoint("add_page:after_insert")

        return apply
