"""MemoryStore: the memory engine over one SQLite file, a thin front over its components.

Each component has one job and shares the store's one `Database` (connection, lock, transactions, meta,
events); the front wires them, in one direction (a component takes the ones it uses in its constructor),
and callers reach each by name, as Anki's `Collection` holds `col.decks`: `store.intake.add_page(...)`,
`store.persona.list_traits()`, `store.curation.forget(...)`. The front itself keeps only what concerns the
whole file: open/close, transactions, pause, stats, backup, export, the integrity check, and `retrieve`
(the one memory call of every reply).

Threading: a MemoryStore owns one connection and serialises its own calls with a lock. Open
another MemoryStore on the same file for another thread (WAL: one writer, concurrent readers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from .conversations import Conversations
from .cubes import Cubes
from .curation import Curation
from .intake import Intake
from .pages.component import Pages
from .pages.embedding import Embedding
from .persona.component import Persona
from .persona.merge import PersonaMerge
from .persona.versions import Versions
from .readable_export import ExportResult, export_memory
from .recall.retriever import Retriever
from .segments.component import Segments
from .segments.promotion import Promotion
from .segments.titles import SegmentTitles
from .spaces.component import Spaces
from .storage import integrity
from .storage.database import Database
from .storage.events import EventLog
from .storage.jobs import Jobs
from .storage.schema import SCHEMA_VERSION, connect, migrate
from .storage.vecindex import MatrixCache, shared_cache
from .types import (
    CompleteJsonFn,
    DamagedDatabaseError,
    EmbeddingMismatchError,
    EmbedFn,
    MemoryParams,
    Retrieval,
    RetrievalBudget,
    TokenEmbedFn,
)
from .upkeep import Upkeep

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
        self.promotion = Promotion(
            db, self.embedding, self.pages, self.segments, self.merge, self.jobs, llm, llm_model_id
        )
        # topic titles by the model of the LLM jobs, which promotion keeps (decision 0026)
        self.titles = SegmentTitles(
            db, self.jobs, lambda: (self.promotion.llm, self.promotion.llm_model_id), self.segments.set_title
        )
        self.curation = Curation(db, self.embedding, self.pages, self.segments, self.versions, self.jobs)
        self.upkeep = Upkeep(db, self.embedding, self.pages, self.segments, self.versions, self.jobs)
        self.spaces = Spaces(
            db, self.pages, self.segments, self.versions, self.conversations, self.curation.forget, self.merge
        )  # named parts of the memory
        # memory cubes: an undone import's pages go the way forgotten pages do
        self.cubes = Cubes(
            db,
            self.embedding,
            self.pages,
            self.segments,
            self.versions,
            self.merge,
            self.jobs,
            self.conversations,
            self.curation._forget_pages,
        )
        key = path if path != ":memory:" else f":memory:{id(self)}"
        page_cache: MatrixCache = shared_cache(key, "page", dim)
        self.retrieval = Retriever(db, self.embedding, self.pages, self.segments, self.persona, self.upkeep, page_cache)

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
        db.purge.at_open()  # a purge a crash left undone (memory_core.storage.purge)
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

    # ------------------------------------------------------------------ recall
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
        """Recall memory for `query` (see `Retriever.retrieve`): the one memory call of every reply."""
        return self.retrieval.retrieve(
            query, conversation_id, budget, record_visits=record_visits, off=off, spaces=spaces
        )

    # ------------------------------------------------------------------ settings of the whole file
    @property
    def params(self) -> MemoryParams:
        return self.db.params

    @property
    def dim(self) -> int:
        return self.db.dim

    @property
    def clock(self) -> Callable[[], float]:
        return self.db.clock

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
    ) -> ExportResult:
        """Write everything remembered to a JSON or Markdown file (see `memory_core.readable_export`)."""
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
