"""MemoryStore: the memory engine over one SQLite file, a thin front over its components.

Each component has one job and shares the store's one `Database` (connection, lock, transactions, meta,
events); the front wires them, in one direction (a component takes the ones it uses in its constructor),
and offers their methods as its own public API (`store.add_page` is `store.intake.add_page`). The
components are attributes too, as Anki's `Collection` holds `col.decks`: `store.pages`, `store.persona`...

Threading: a MemoryStore owns one connection and serialises its own calls with a lock. Open
another MemoryStore on the same file for another thread (WAL: one writer, concurrent readers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from . import integrity
from .conversations import Conversations
from .cubes import Cubes
from .curation import Curation
from .database import Cursor, Database
from .db import SCHEMA_VERSION, connect, migrate
from .embedding import Embedding
from .events import EventLog
from .export import export_memory
from .intake import Intake
from .jobs import JobHandler, Jobs
from .merging import PersonaMerge
from .pages import Pages
from .persona import Persona
from .promotion import Promotion
from .retrieval import Retriever
from .segments import Segments
from .spaces import Spaces
from .titles import SegmentTitles
from .types import (
    CompleteJsonFn,
    DamagedDatabaseError,
    EmbeddingMismatchError,
    EmbedFn,
    MemoryParams,
    TokenEmbedFn,
)
from .upkeep import Upkeep
from .vecindex import MatrixCache, shared_cache
from .versions import Versions

_DAMAGED = (apsw.NotADBError, apsw.CorruptError)


def _damaged(path: str, exc: BaseException) -> DamagedDatabaseError:
    return DamagedDatabaseError(f"{path} is damaged or is not a Mnemo memory database ({exc}); it was left as it is")


def _check_dimension(conn: apsw.Connection, path: str, dim: int, embed_model_id: str) -> None:
    """Refuse a file built with another embedding dimension (before migrating anything)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone():
        return
    row = conn.execute("SELECT value FROM meta WHERE key='embed_dim'").fetchone()
    if row and int(row[0]) != int(dim):
        old_model = conn.execute("SELECT value FROM meta WHERE key='embed_model_id'").fetchone()
        raise EmbeddingMismatchError(
            f"memory database {path} holds {row[0]}-dimensional embeddings "
            f"(model {old_model[0] if old_model else '?'}), but the embedder offered now "
            f"({embed_model_id}) produces {dim} dimensions; use the original embedding model "
            f"or start a new memory file"
        )


class MemoryStore:
    """The memory engine over one SQLite file. Create with `MemoryStore.open(...)`."""

    def __init__(
        self,
        conn: apsw.Connection,
        path: str,
        embed: EmbedFn,
        *,
        embed_model_id: str,
        dim: int,
        params: MemoryParams,
        llm: CompleteJsonFn | None,
        llm_model_id: str | None,
        clock: Callable[[], float],
        embed_tokens: TokenEmbedFn | None = None,
    ):
        self.path = path
        self.db = db = Database(conn, path, dim=dim, params=params, clock=clock)
        self.embedding = Embedding(db, embed, embed_tokens, embed_model_id)
        self.jobs = Jobs(db)
        self.event_log = EventLog(db)
        self.pages = Pages(db, self.embedding, self.jobs)
        self.segments = Segments(db, self.embedding, self.pages, self.jobs)
        self.conversations = Conversations(db, self.segments)
        self.intake = Intake(db, self.embedding, self.pages, self.segments, self.jobs)
        self.versions = Versions(db, self.embedding)
        self.merge = PersonaMerge(db, self.versions)
        self.persona = Persona(db, self.embedding, self.versions, self.merge)
        self.promotion = Promotion(db, self.embedding, self.merge, self.jobs, llm, llm_model_id)
        # topic titles by the model of the LLM jobs, which promotion keeps (decision 0026)
        self.titles = SegmentTitles(db, self.jobs, lambda: (self.promotion.llm, self.promotion.llm_model_id))
        self.curation = Curation(db, self.embedding, self.pages, self.segments, self.versions)
        self.upkeep = Upkeep(db, self.embedding, self.pages, self.segments, self.jobs)
        self.spaces = Spaces(db, self.segments, self.curation.forget, self.merge)  # named parts of the memory
        # memory cubes: an undone import's pages go the way forgotten pages do
        self.cubes = Cubes(
            db,
            self.embedding,
            self.pages,
            self.segments,
            self.versions,
            self.merge,
            self.jobs,
            self.curation._forget_pages,
        )
        key = path if path != ":memory:" else f":memory:{id(self)}"
        page_cache: MatrixCache = shared_cache(key, "page", dim)
        self.retrieval = Retriever(db, self.embedding, self.pages, self.segments, self.persona, self.upkeep, page_cache)
        self._bind_api()

    def _bind_api(self) -> None:
        """The public API: each method is its component's own (same signature and docstring)."""
        self.add_listener, self.remove_listener = self.db.add_listener, self.db.remove_listener
        self.events, self.latest_event_id = self.event_log.events, self.event_log.latest_event_id
        self.segment_events = self.event_log.segment_events
        self._bind_conversations()
        self._bind_memory()
        # memory cubes (memory_core.cubes)
        self.export_cube, self.plan_cube_import, self.import_cube = (
            self.cubes.export,
            self.cubes.plan,
            self.cubes.import_cube,
        )
        self.cube_imports, self.undo_cube_import, self.cube_origin = (
            self.cubes.imports,
            self.cubes.undo,
            self.cubes.origin,
        )
        # jobs
        self.enqueue, self.cancel_jobs = self.jobs.enqueue, self.jobs.cancel
        self.pending_jobs, self.list_jobs, self.run_pending = (
            self.jobs.pending,
            self.jobs.list_jobs,
            self.jobs.run_pending,
        )
        # recall
        self.retrieve, self.warm_up = self.retrieval.retrieve, self.retrieval.warm_up
        self.memory_saying = self.retrieval.memory_saying

    def _bind_conversations(self) -> None:
        """Conversations and messages (memory_core.conversations)."""
        conv = self.conversations
        self.create_conversation = conv.create_conversation
        self.rename_conversation = conv.rename_conversation
        self.delete_conversation = conv.delete_conversation
        self.get_conversation = conv.get_conversation
        self.list_conversations = conv.list_conversations
        self.find_conversation = conv.find_conversation
        self.search_conversations = conv.search_conversations
        self.set_conversation_flags = conv.set_conversation_flags
        self.add_message = conv.add_message
        self.update_message = conv.update_message
        self.delete_message = conv.delete_message
        self.get_message = conv.get_message
        self.list_messages = conv.list_messages
        self.list_messages_to = conv.list_messages_to
        self.all_messages = conv.all_messages
        self.list_messages_with_status = conv.list_messages_with_status
        self.mark_interrupted_messages = conv.mark_interrupted_messages
        self.message_siblings = conv.message_siblings
        self.message_children = conv.message_children

    def _bind_memory(self) -> None:
        """Pages, segments, the persona and what the user does to memory."""
        db, pages, segs, persona, cur = self.db, self.pages, self.segments, self.persona, self.curation
        # pages and segments
        self.add_page, self.add_pages, self.embed_pages = (
            self.intake.add_page,
            self.intake.add_pages,
            self.intake.embed_pages,
        )
        self.get_page, self.list_pages, self.count_pages = pages.get, pages.list_pages, pages.count_pages
        self.get_segment, self.list_segments, self.count_segments = segs.get, segs.list_segments, segs.count_segments
        self.restore_segment = segs.restore
        self.record_quoted_pages = segs.record_quoted_pages  # a reply's prompt quoted them: their topics' visits
        # persona
        self.list_traits, self.count_traits, self.get_trait = (
            persona.list_traits,
            persona.count_traits,
            persona.get_trait,
        )
        self.list_knowledge, self.count_knowledge = persona.list_knowledge, persona.count_knowledge
        self.get_knowledge, self.item_versions = persona.get_knowledge, persona.item_versions
        self.add_knowledge, self.add_trait = persona.add_knowledge, persona.add_trait
        self.edit_knowledge, self.edit_trait = persona.edit_knowledge, persona.edit_trait
        self.set_item_status = persona.set_item_status
        # what the user does to memory
        self.edit_page, self.pin, self.forget = cur.edit_page, cur.pin, cur.forget
        self.conversation_memory, self.forget_conversation = cur.conversation_memory, cur.forget_conversation
        self.forget_waiting_pages = cur.forget_waiting_pages
        self.undo_version, self.wipe_memory = cur.undo_version, cur.wipe_memory
        self.forgotten_spans = db.purge.spans  # when forgotten memory existed: the backups that may hold it

    # ------------------------------------------------------------------ open / close / transactions
    @classmethod
    def open(
        cls,
        path: str | Path,
        embed: EmbedFn,
        *,
        embed_model_id: str,
        dim: int,
        params: MemoryParams | None = None,
        llm: CompleteJsonFn | None = None,
        llm_model_id: str | None = None,
        clock: Callable[[], float] = time.time,
        embed_tokens: TokenEmbedFn | None = None,
    ) -> MemoryStore:
        """Open (creating or migrating) the memory database at `path`.

        `embed_tokens`, when given, is the same embedder returning token vectors too: the store then
        embeds with it, keeps each page's content-token vectors (`page_tok`) and matches queries word
        by word (`params.ranking.w_tokens`); pages stored without them are indexed by an "index_tokens" job.

        Raises EmbeddingMismatchError when the file was built with another embedding dimension.
        A different model id of the same dimension is accepted: the store records it and queues a
        background re-embedding job ("reembed").
        """
        path = str(path)
        if dim <= 0:
            raise ValueError("dim must be positive")
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = connect(path)
        except _DAMAGED as exc:
            raise _damaged(path, exc) from exc
        try:
            _check_dimension(conn, path, dim, embed_model_id)
            migrate(conn, dim)
        except _DAMAGED as exc:
            conn.close()
            raise _damaged(path, exc) from exc
        except BaseException:
            conn.close()
            raise
        store = cls(
            conn,
            path,
            embed,
            embed_model_id=embed_model_id,
            dim=dim,
            params=params or MemoryParams(),
            llm=llm,
            llm_model_id=llm_model_id,
            clock=clock,
            embed_tokens=embed_tokens,
        )
        db = store.db
        with db.transaction():
            meta: dict[str, str] = dict(db.rows("SELECT key, value FROM meta"))
            if "embed_dim" not in meta:
                db.set_meta("embed_dim", str(dim))
                db.set_meta("embed_model_id", embed_model_id)
                db.set_meta("created_at", repr(db.clock()))
            store.upkeep.at_open(meta)
            store.segments.at_open()  # segments an older joining rule made are made again (a job)
            db.set_meta("schema_version", str(SCHEMA_VERSION))
        db.purge.at_open()  # a purge a crash left undone (memory_core.purge)
        return store

    def close(self) -> None:
        self.retrieval.close()
        self.db.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[MemoryStore]:
        """One write transaction (BEGIN IMMEDIATE); nested calls become savepoints.

        Listeners get the events of a transaction after it commits.
        """
        with self.db.transaction():
            yield self

    @property
    def in_transaction(self) -> bool:
        return self.db.in_transaction

    # ------------------------------------------------------------------ settings the components hold
    @property
    def params(self) -> MemoryParams:
        return self.db.params

    @property
    def dim(self) -> int:
        return self.db.dim

    @property
    def clock(self) -> Callable[[], float]:
        return self.db.clock

    @property
    def embed_model_id(self) -> str:
        return self.embedding.model_id

    @property
    def llm(self) -> CompleteJsonFn | None:
        return self.promotion.llm

    @llm.setter
    def llm(self, llm: CompleteJsonFn | None) -> None:
        self.promotion.llm = llm

    @property
    def llm_model_id(self) -> str | None:
        """The model that answers the LLM jobs: the persona records it, and a model whose answers keep
        being rejected is skipped by its id."""
        return self.promotion.llm_model_id

    @llm_model_id.setter
    def llm_model_id(self, model_id: str | None) -> None:
        self.promotion.llm_model_id = model_id

    @property
    def model_titles(self) -> bool:
        """Whether the model that answers the LLM jobs writes topic titles (the app's rule, decision 0026)."""
        return self.titles.model_writes

    @model_titles.setter
    def model_titles(self, on: bool) -> None:
        self.titles.model_writes = bool(on)

    @property
    def on_progress(self) -> Callable[[str, int, int], None] | None:
        """on_progress(what, done, total) of a long job (re-embedding), on the thread that runs it."""
        return self.jobs.on_progress

    @on_progress.setter
    def on_progress(self, fn: Callable[[str, int, int], None] | None) -> None:
        self.jobs.on_progress = fn

    # pages per upkeep job (tests make them small)
    @property
    def TOKEN_INDEX_BATCH(self) -> int:
        return self.upkeep.TOKEN_INDEX_BATCH

    @TOKEN_INDEX_BATCH.setter
    def TOKEN_INDEX_BATCH(self, n: int) -> None:
        self.upkeep.TOKEN_INDEX_BATCH = n

    @property
    def READ_IN_CONTEXT_BATCH(self) -> int:
        return self.upkeep.READ_IN_CONTEXT_BATCH

    @READ_IN_CONTEXT_BATCH.setter
    def READ_IN_CONTEXT_BATCH(self, n: int) -> None:
        self.upkeep.READ_IN_CONTEXT_BATCH = n

    @property
    def REEMBED_BATCH(self) -> int:
        return self.upkeep.REEMBED_BATCH

    @REEMBED_BATCH.setter
    def REEMBED_BATCH(self, n: int) -> None:
        self.upkeep.REEMBED_BATCH = n

    # ------------------------------------------------------------------ pause, stats, whole-file operations
    def set_paused(self, paused: bool) -> None:
        """Pause (or resume) memory formation globally: add_page stores nothing while paused."""
        with self.db.transaction():
            self.db.set_meta("paused", "1" if paused else "0")
            self.db.emit("paused" if paused else "resumed", None, None, "memory paused" if paused else "memory resumed")

    def is_paused(self) -> bool:
        return self.db.memory_paused()

    def stats(self) -> dict:
        db = self.db
        with db.lock:
            tiers = dict(db.rows("SELECT tier, count(*) FROM page GROUP BY tier"))
            segs = dict(db.rows("SELECT tier, count(*) FROM segment GROUP BY tier"))
            know = dict(db.rows("SELECT owner, count(*) FROM knowledge WHERE status='active' GROUP BY owner"))
            pending = dict(
                db.rows("SELECT kind, count(*) FROM job WHERE status = 'pending' GROUP BY kind ORDER BY kind")
            )
            return {
                "pages": {"stm": tiers.get("stm", 0), "mtm": tiers.get("mtm", 0), "archive": tiers.get("archive", 0)},
                "pages_total": sum(tiers.values()),
                # pages whose words are indexed for the word-by-word match (token_match), and their bytes
                "pages_word_indexed": db.scalar("SELECT count(*) FROM page_tok"),
                "word_index_bytes": db.scalar(
                    "SELECT coalesce(sum(length(vecs) + coalesce(length(sides), 0)), 0) FROM page_tok"
                ),
                "segments": {"mtm": segs.get("mtm", 0), "archive": segs.get("archive", 0)},
                "traits": db.scalar("SELECT count(*) FROM trait WHERE status='active'"),
                "knowledge": {"user": know.get("user", 0), "assistant": know.get("assistant", 0)},
                "conversations": db.scalar("SELECT count(*) FROM conversation"),
                "messages": db.scalar("SELECT count(*) FROM message"),
                "db_size_bytes": self._file_size(),
                "embed_model_id": db.get_meta("embed_model_id"),
                "embed_dim": int(db.get_meta("embed_dim", str(self.dim)) or self.dim),
                "schema_version": db.scalar("PRAGMA user_version"),
                "pending_jobs": sum(pending.values()),
                "pending_by_kind": pending,
                "paused": self.is_paused(),
            }

    def _file_size(self) -> int:
        """Bytes of the database file and its write-ahead log."""
        size = 0
        if self.path != ":memory:":
            for suffix in ("", "-wal"):
                try:
                    size += os.path.getsize(self.path + suffix)
                except OSError:
                    pass
        return size

    def export(
        self, path: str | Path, *, fmt: str | None = None, on_progress: Callable[[int, int], None] | None = None
    ):
        """Write everything remembered to a JSON or Markdown file (see `memory_core.export`)."""
        return export_memory(self, path, fmt=fmt, on_progress=on_progress)

    def backup(
        self,
        path: str | Path,
        *,
        pages_per_step: int = 2048,
        on_progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Path:
        """See `integrity.backup`: an online copy of the whole database, written to a temp file and renamed."""
        return integrity.backup(
            self.db, path, pages_per_step=pages_per_step, on_progress=on_progress, cancelled=cancelled
        )

    def check_integrity(self) -> list[str]:
        """Problems found across base, vector and FTS tables (empty list = consistent)."""
        return integrity.check_integrity(self.db)

    # ------------------------------------------------------------------ helpers the tests reach for
    @property
    def _conn(self) -> apsw.Connection:
        return self.db.conn

    @property
    def _page_cache(self) -> MatrixCache:
        return self.retrieval._page_cache

    def _x(self, sql: str, params: Sequence | dict = ()) -> Cursor:
        return self.db.execute(sql, params)

    def _rows(self, sql: str, params: Sequence | dict = ()) -> list[Any]:
        return self.db.rows(sql, params)

    def _one(self, sql: str, params: Sequence | dict = ()) -> Any:
        return self.db.one(sql, params)

    def _scalar(self, sql: str, params: Sequence | dict = ()) -> Any:
        return self.db.scalar(sql, params)

    def _get_meta(self, key: str, default: str | None = None) -> str | None:
        return self.db.get_meta(key, default)

    def _page_vec(self, pid: int) -> np.ndarray:
        return self.pages.page_vec(pid)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedding.embed(texts)

    def _queue_token_index(self, missing: bool | None = None) -> None:
        self.pages.queue_token_index(missing)

    def _llm_rejection_state(self) -> dict:
        return self.promotion.rejection_state()

    def _reembedding(self) -> tuple[int, int] | None:
        return self.upkeep.reembedding()

    @property
    def _job_index_tokens(self) -> JobHandler:
        return self.jobs.handler("index_tokens")

    @property
    def _job_read_in_context(self) -> JobHandler:
        return self.jobs.handler("read_in_context")
