"""MemoryStore: one apsw connection to one SQLite memory database (chat history + memory tiers).

Threading: a MemoryStore owns one connection and serialises its own calls with a lock. Open
another MemoryStore on the same file for another thread (WAL: one writer, concurrent readers).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from . import text as T
from . import token_match
from .codec import to_json as _j
from .codec import unit as _unit
from .db import SCHEMA_VERSION, connect, is_storage_full, migrate
from .types import (
    CompleteJsonFn,
    Conversation,
    DamagedDatabaseError,
    EmbeddingMismatchError,
    EmbedFn,
    Event,
    ItemVersion,
    Job,
    Knowledge,
    LLMDeferred,
    MemoryParams,
    Message,
    Page,
    Segment,
    StoreClosedError,
    TokenEmbedFn,
    Trait,
    page_text,
)
from .vecindex import MatrixCache, shared_cache

log = logging.getLogger("memory_core")

_AUTO = object()  # default parent of add_message: the conversation's current leaf
CHECKPOINT_ENV = "MNEMO_MEMORY_CHECKPOINT"  # test hook: "<name>" -> sleep forever at that checkpoint

PAGE_COLS = (
    "p.id, p.conversation_id, p.user_text, p.assistant_text, p.timestamp, p.tier, p.segment_id, p.prev_page_id, "
    "(SELECT n.id FROM page n WHERE n.prev_page_id = p.id ORDER BY n.id LIMIT 1), p.chain_id, "
    "coalesce((SELECT c.summary FROM chain c WHERE c.id = p.chain_id), ''), p.keywords, p.pinned, "
    "p.user_message_id, p.assistant_message_id, p.meta"
)
SEG_COLS = (
    "s.id, s.tier, s.summary, s.keywords, s.n_visit, s.l_interaction, s.last_access, s.created_at, "
    "s.updated_at, s.page_count, s.pinned, s.promotions"
)
EVENT_COLS = "id, at, kind, item_kind, item_id, summary, detail"
CONV_COLS = "id, title, created_at, updated_at, source, external_id, memory_paused, incognito"
MSG_COLS = "id, conversation_id, parent_id, role, content, created_at, status, meta"
TRAIT_COLS = (
    "t.id, t.dimension, t.value, t.evidence, t.confidence, t.status, t.version, t.pinned, t.created_at, "
    "t.updated_at, t.conversation_ids, t.model"
)
KNOW_COLS = (
    "k.id, k.owner, k.text, k.confidence, k.status, k.version, k.pinned, k.created_at, k.updated_at, "
    "k.conversation_ids, k.model"
)


def _pj(s: str | None, default: Any = None) -> Any:
    if not s:
        return {} if default is None else default
    try:
        return json.loads(s)
    except ValueError:
        return {} if default is None else default


def _equals(pairs: Sequence[tuple[str, Any]]) -> tuple[list[str], list]:
    """`column = ?` conditions and their arguments for the pairs whose value is not None."""
    used = [(col, v) for col, v in pairs if v is not None]
    return [f"{col} = ?" for col, _ in used], [v for _, v in used]


_DAMAGED = (apsw.NotADBError, apsw.CorruptError)


def _damaged(path: str, exc: BaseException) -> DamagedDatabaseError:
    return DamagedDatabaseError(f"{path} is damaged or is not a Mnemo memory database ({exc}); it was left as it is")


def _checkpoint(name: str) -> None:
    """Test hook for crash tests: block here when MNEMO_MEMORY_CHECKPOINT names this point."""
    if os.environ.get(CHECKPOINT_ENV) == name:
        sys.stderr.write(f"CHECKPOINT {name}\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)


class _JobAlreadyDone(Exception):
    pass


from .lpm import LpmMixin  # noqa: E402
from .paging import PagingMixin  # noqa: E402  (mixins need the helpers above)
from .retrieval import RetrievalMixin  # noqa: E402
from .upkeep import EmbeddingUpkeepMixin  # noqa: E402


class MemoryStore(PagingMixin, EmbeddingUpkeepMixin, LpmMixin, RetrievalMixin):
    """The memory engine over one SQLite file. Create with `MemoryStore.open(...)`."""

    # ------------------------------------------------------------------ open / close / transactions
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
        self._conn = conn
        self.path = path
        self._embed_fn = embed
        self._embed_tokens_fn = embed_tokens
        # text -> (its vector, its packed content-token vectors) of the last texts embedded (token_match.pack):
        # a page embedded before its write transaction finds them there when it is stored. A few per text:
        # the same words read after different contexts ("Thanks!") have different vectors and rows
        self._token_memo: dict[str, list[tuple[np.ndarray, bytes]]] = {}
        self.embed_model_id = embed_model_id
        self.dim = dim
        self.params = params
        self.llm = llm
        self.llm_model_id = llm_model_id
        self.clock = clock
        self._lock = threading.RLock()
        self._depth = 0
        self._pending_events: list[Event] = []
        self._listeners: list[Callable[[Event], None]] = []
        self._closed = False
        self._events_since_prune = 0
        # progress of a long job (re-embedding): on_progress(what, done, total), called on the
        # thread that runs the job; the app forwards it to a progress display
        self.on_progress: Callable[[str, int, int], None] | None = None
        self._last_progress: tuple[str, int, int] | None = None
        key = path if path != ":memory:" else f":memory:{id(self)}"
        self._page_cache: MatrixCache = shared_cache(key, "page", dim)

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
        by word (`params.w_tokens`); pages stored without them are indexed by an "index_tokens" job.

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
            # check the recorded dimension before migrating anything
            has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
            if has_meta:
                row = conn.execute("SELECT value FROM meta WHERE key='embed_dim'").fetchone()
                if row and int(row[0]) != int(dim):
                    old_model = conn.execute("SELECT value FROM meta WHERE key='embed_model_id'").fetchone()
                    raise EmbeddingMismatchError(
                        f"memory database {path} holds {row[0]}-dimensional embeddings "
                        f"(model {old_model[0] if old_model else '?'}), but the embedder offered now "
                        f"({embed_model_id}) produces {dim} dimensions; use the original embedding model "
                        f"or start a new memory file"
                    )
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
        with store.transaction():
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if "embed_dim" not in meta:
                store._set_meta("embed_dim", str(dim))
                store._set_meta("embed_model_id", embed_model_id)
                store._set_meta("created_at", repr(store.clock()))
            store._upkeep_at_open(meta)
            store._set_meta("schema_version", str(SCHEMA_VERSION))
        return store

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._conn.close()
                except apsw.Error:  # pragma: no cover
                    pass

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check(self) -> None:
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")

    @contextmanager
    def transaction(self) -> Iterator[MemoryStore]:
        """One write transaction (BEGIN IMMEDIATE); nested calls become savepoints.

        Listeners get the events of a transaction after it commits.
        """
        with self._lock:
            self._check()
            if self._depth == 0:
                self._conn.execute("BEGIN IMMEDIATE")
                self._depth = 1
                try:
                    yield self
                except BaseException:
                    self._depth = 0
                    self._pending_events = []
                    try:
                        self._conn.execute("ROLLBACK")
                    except apsw.Error:  # pragma: no cover - already rolled back by SQLite
                        pass
                    raise
                try:
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._depth = 0
                    self._pending_events = []
                    try:
                        self._conn.execute("ROLLBACK")
                    except apsw.Error:  # pragma: no cover
                        pass
                    raise
                self._depth = 0
                events, self._pending_events = self._pending_events, []
                self._after_commit(events)
            else:
                name = f"sp{self._depth}"
                mark = len(self._pending_events)
                self._conn.execute(f"SAVEPOINT {name}")
                self._depth += 1
                try:
                    yield self
                except BaseException:
                    self._conn.execute(f"ROLLBACK TO {name}")
                    self._conn.execute(f"RELEASE {name}")
                    del self._pending_events[mark:]
                    raise
                else:
                    self._conn.execute(f"RELEASE {name}")
                finally:
                    self._depth -= 1

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def _after_commit(self, events: list[Event]) -> None:
        self._events_since_prune += len(events)
        if self._events_since_prune > 2000:
            self._events_since_prune = 0
            self._prune_logs()
        for ev in events:
            for fn in list(self._listeners):
                try:
                    fn(ev)
                except Exception:  # a listener must never break memory
                    log.exception("memory listener failed on event %s", ev.kind)

    def _prune_logs(self) -> None:
        keep = max(100, self.params.events_keep)
        with self.transaction():
            self._x("DELETE FROM event WHERE id <= (SELECT max(id) FROM event) - ?", (keep,))
            self._x("DELETE FROM vec_log WHERE seq < (SELECT max(seq) FROM vec_log) - 50000")
            now = self.clock()
            self._x(
                "DELETE FROM job WHERE status = 'done' AND ((key IS NULL AND updated_at < ?) OR updated_at < ?)",
                (now - 7 * 86400, now - 90 * 86400),
            )

    # ------------------------------------------------------------------ small SQL helpers
    def _x(self, sql: str, params: Sequence | dict = ()) -> apsw.Cursor:
        return self._conn.execute(sql, params)

    def _rows(self, sql: str, params: Sequence | dict = ()) -> list[tuple]:
        with self._lock:
            self._check()
            return self._conn.execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence | dict = ()) -> tuple | None:
        with self._lock:
            self._check()
            return self._conn.execute(sql, params).fetchone()

    def _scalar(self, sql: str, params: Sequence | dict = ()) -> Any:
        row = self._one(sql, params)
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._x(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return row[0] if row else default

    def _emit(
        self, kind: str, item_kind: str | None, item_id: int | None, summary: str, detail: dict | None = None
    ) -> None:
        """Record an event (inside the current transaction). Summaries never quote memory text."""
        at = self.clock()
        detail = detail or {}
        cur = self._x(
            "INSERT INTO event(at, kind, item_kind, item_id, summary, detail) VALUES (?,?,?,?,?,?)",
            (at, kind, item_kind, item_id, summary, _j(detail)),
        )
        self._pending_events.append(
            Event(self._conn.last_insert_rowid(), at, kind, item_kind, item_id, summary, detail)
        )
        del cur

    TOKEN_MEMO_SIZE = 2048  # texts whose token vectors are kept until their page is written

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of `texts` (facts, traits, segment summaries, statements); pages go through
        `_embed_pages`, which also keeps their token vectors."""
        return self._embed_with_tokens(texts, tokens=False)[0]

    def _embed_pages(self, pages: Sequence[tuple[str, str]], contexts: Sequence[str] | None = None) -> np.ndarray:
        """Unit vectors of pages given as (user text, assistant text), each read after `contexts[i]`.
        With a token embedder, each page's packed content-token vectors and side vectors are kept too
        (`_token_memo`): a page is embedded before its write transaction, and `_vec_put_page` finds
        them there."""
        bodies = [page_text(u, a) or " " for u, a in pages]
        vecs, per_text = self._embed_with_tokens(bodies, tokens=True, contexts=contexts)
        if per_text is not None:
            with self._lock:
                for (u, a), t, v, (tv, toks) in zip(pages, bodies, vecs, per_text):
                    sides = token_match.page_sides(tv, toks, u, a)
                    kept = [e for e in self._token_memo.pop(t, []) if float(e[0] @ v) < self.TOKEN_MEMO_SAME]
                    self._token_memo[t] = kept[-3:] + [(v, token_match.pack(tv, toks), sides)]
                while len(self._token_memo) > self.TOKEN_MEMO_SIZE:
                    self._token_memo.pop(next(iter(self._token_memo)))
        return vecs

    # a memo entry belongs to a vector this close to its own (the same text, read after the same context)
    TOKEN_MEMO_SAME = 0.9999

    def _memo_tokens(self, body: str, vec: np.ndarray) -> tuple[bytes, bytes] | None:
        """The packed token rows and side vectors `_embed_pages` kept for `body` embedded as `vec`, if any."""
        with self._lock:
            entries = self._token_memo.get(body if body.strip() else " ", [])
        v = np.asarray(vec, dtype=np.float32)
        return next(
            ((rows, sides) for w, rows, sides in reversed(entries) if float(w @ v) >= self.TOKEN_MEMO_SAME), None
        )

    def _embed_with_tokens(
        self, texts: Sequence[str], *, tokens: bool = True, contexts: Sequence[str] | None = None
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, list[str]]] | None]:
        """Unit vectors of `texts` and, with a token embedder (and `tokens`), each text's token vectors
        and token strings from the same pass (None without). `contexts`: see TokenEmbedFn."""
        texts = [t if t.strip() else " " for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), None
        per_text = None
        if tokens and self._embed_tokens_fn is not None:
            if contexts is not None and any(contexts):
                arr, per_text = self._embed_tokens_fn(list(texts), list(contexts))
            else:
                arr, per_text = self._embed_tokens_fn(list(texts))
            if len(per_text) != len(texts):
                raise ValueError(f"token embedding function returned {len(per_text)} texts, expected {len(texts)}")
        else:
            arr = self._embed_fn(list(texts))
        arr = np.asarray(arr, dtype=np.float32)
        if arr.ndim != 2 or arr.shape != (len(texts), self.dim):
            raise ValueError(f"embedding function returned shape {arr.shape}, expected ({len(texts)}, {self.dim})")
        if not np.all(np.isfinite(arr)):
            raise ValueError("embedding function returned non-finite values")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return (arr / np.clip(norms, 1e-12, None)).astype(np.float32), per_text

    def _check_vec(self, vec: Any) -> np.ndarray:
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
        if v.shape[0] != self.dim or not np.all(np.isfinite(v)):
            raise ValueError(f"embedding must be a finite vector of dimension {self.dim}")
        return _unit(v)

    # ------------------------------------------------------------------ listeners, events, meta
    def add_listener(self, fn: Callable[[Event], None]) -> None:
        """Call `fn(event)` after each commit that produced events (in the committing thread)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[Event], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def events(
        self,
        since_id: int = 0,
        limit: int = 100,
        *,
        kinds: Sequence[str] | None = None,
        exclude_kinds: Sequence[str] | None = None,
        item_kind: str | None = None,
        item_id: int | None = None,
        newest: bool = False,
    ) -> list[Event]:
        """Events after `since_id`, oldest first. Filters are done in SQL; with `newest=True` the
        newest `limit` matching events are returned (still oldest first), e.g. for an activity list."""
        where, args = _equals([("item_kind", item_kind), ("item_id", item_id)])
        where.append("id > ?")
        args.append(since_id)
        if kinds is not None:
            where.append(f"kind IN ({','.join('?' * len(kinds))})")
            args += list(kinds)
        if exclude_kinds:
            where.append(f"kind NOT IN ({','.join('?' * len(exclude_kinds))})")
            args += list(exclude_kinds)
        rows = self._rows(
            f"SELECT {EVENT_COLS} FROM event WHERE {' AND '.join(where)} "
            f"ORDER BY id {'DESC' if newest else 'ASC'} LIMIT ?",
            [*args, limit],
        )
        if newest:
            rows.reverse()
        return [self._event(r) for r in rows]

    @staticmethod
    def _event(r: tuple) -> Event:
        return Event(r[0], r[1], r[2], r[3], r[4], r[5], _pj(r[6]))

    def latest_event_id(self) -> int:
        """The id of the newest event, 0 when the log is empty (a cheap "has memory changed?" check)."""
        return int(self._scalar("SELECT coalesce(max(id), 0) FROM event") or 0)

    def segment_events(self, sid: int) -> list[Event]:
        """Every logged event of one segment, oldest first: its own (created, visited, promoted,
        archived, restored, pinned...) and the pages that moved into it. Feeds its heat history."""
        rows = self._rows(
            f"SELECT {EVENT_COLS} FROM event WHERE item_kind = 'segment' AND item_id = ? "
            f"UNION SELECT {EVENT_COLS} FROM event WHERE kind = 'page_moved' "
            "AND json_extract(detail, '$.segment_id') = ? ORDER BY id",
            (sid, sid),
        )
        return [self._event(r) for r in rows]

    def set_paused(self, paused: bool) -> None:
        """Pause (or resume) memory formation globally: add_page stores nothing while paused."""
        with self.transaction():
            self._set_meta("paused", "1" if paused else "0")
            self._emit("paused" if paused else "resumed", None, None, "memory paused" if paused else "memory resumed")

    def is_paused(self) -> bool:
        return self._get_meta("paused", "0") == "1"

    def stats(self) -> dict:
        with self._lock:
            tiers = dict(self._rows("SELECT tier, count(*) FROM page GROUP BY tier"))
            segs = dict(self._rows("SELECT tier, count(*) FROM segment GROUP BY tier"))
            know = dict(self._rows("SELECT owner, count(*) FROM knowledge WHERE status='active' GROUP BY owner"))
            size = 0
            if self.path != ":memory:":
                for suffix in ("", "-wal"):
                    try:
                        size += os.path.getsize(self.path + suffix)
                    except OSError:
                        pass
            pending = dict(
                self._rows("SELECT kind, count(*) FROM job WHERE status = 'pending' GROUP BY kind ORDER BY kind")
            )
            return {
                "pages": {"stm": tiers.get("stm", 0), "mtm": tiers.get("mtm", 0), "archive": tiers.get("archive", 0)},
                "pages_total": sum(tiers.values()),
                # pages whose words are indexed for the word-by-word match (token_match), and their bytes
                "pages_word_indexed": self._scalar("SELECT count(*) FROM page_tok"),
                "word_index_bytes": self._scalar(
                    "SELECT coalesce(sum(length(vecs) + coalesce(length(sides), 0)), 0) FROM page_tok"
                ),
                "segments": {"mtm": segs.get("mtm", 0), "archive": segs.get("archive", 0)},
                "traits": self._scalar("SELECT count(*) FROM trait WHERE status='active'"),
                "knowledge": {"user": know.get("user", 0), "assistant": know.get("assistant", 0)},
                "conversations": self._scalar("SELECT count(*) FROM conversation"),
                "messages": self._scalar("SELECT count(*) FROM message"),
                "db_size_bytes": size,
                "embed_model_id": self._get_meta("embed_model_id"),
                "embed_dim": int(self._get_meta("embed_dim", str(self.dim))),
                "schema_version": self._scalar("PRAGMA user_version"),
                "pending_jobs": sum(pending.values()),
                "pending_by_kind": pending,
                "paused": self.is_paused(),
            }

    # ------------------------------------------------------------------ conversations
    def _conv(self, r: tuple) -> Conversation:
        return Conversation(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), bool(r[7]))

    def create_conversation(
        self,
        title: str = "New chat",
        *,
        created_at: float | None = None,
        source: str | None = None,
        external_id: str | None = None,
        incognito: bool = False,
    ) -> int:
        now = self.clock() if created_at is None else float(created_at)
        with self.transaction():
            self._x(
                "INSERT INTO conversation(title, created_at, updated_at, source, external_id, incognito) "
                "VALUES (?,?,?,?,?,?)",
                (title, now, now, source, external_id, int(incognito)),
            )
            return self._conn.last_insert_rowid()

    def rename_conversation(self, cid: int, title: str) -> None:
        with self.transaction():
            self._x("UPDATE conversation SET title = ? WHERE id = ?", (title, cid))

    def delete_conversation(self, cid: int) -> None:
        """Delete a conversation and its messages.

        Memory derived from it stays (the user forgets memory explicitly): its STM pages move to
        MTM first, and the pages' `conversation_id` becomes NULL.
        """
        with self.transaction():
            for (pid,) in self._x(
                "SELECT id FROM page WHERE tier = 'stm' AND conversation_id = ? ORDER BY id", (cid,)
            ).fetchall():
                self._move_to_mtm(pid)
            self._x("DELETE FROM conversation WHERE id = ?", (cid,))

    def get_conversation(self, cid: int) -> Conversation | None:
        r = self._one(f"SELECT {CONV_COLS} FROM conversation WHERE id = ?", (cid,))
        return self._conv(r) if r else None

    def list_conversations(self, limit: int = 100, offset: int = 0) -> list[Conversation]:
        rows = self._rows(
            f"SELECT {CONV_COLS} FROM conversation ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?", (limit, offset)
        )
        return [self._conv(r) for r in rows]

    def find_conversation(self, source: str, external_id: str) -> Conversation | None:
        r = self._one(
            f"SELECT {CONV_COLS} FROM conversation WHERE source IS ? AND external_id = ?", (source, external_id)
        )
        return self._conv(r) if r else None

    def search_conversations(self, text: str, limit: int = 50) -> list[tuple[Conversation, str]]:
        """Conversations whose title or messages contain `text` (case-insensitive, any language).

        Returns (conversation, snippet) pairs: title hits first (snippet = title), then message hits
        by relevance (snippet around the match, '…' where cut).
        """
        text = (text or "").strip()
        if not text:
            return []
        out: list[tuple[Conversation, str]] = []
        seen: set[int] = set()
        like = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        for r in self._rows(
            f"SELECT {CONV_COLS} FROM conversation WHERE title LIKE ? ESCAPE '\\' ORDER BY updated_at DESC LIMIT ?",
            (like, limit),
        ):
            out.append((self._conv(r), r[1]))
            seen.add(r[0])
        q = T.fts_and_query(text)
        if q is not None:
            rows = self._rows(
                "SELECT m.conversation_id, snippet(message_fts, 0, '', '', '…', 16) FROM message_fts "
                "JOIN message m ON m.id = message_fts.rowid WHERE message_fts MATCH ? ORDER BY rank LIMIT ?",
                (q, limit * 5),
            )
        else:
            rows = [
                (cid, T.truncate(content, 120))
                for cid, content in self._rows(
                    "SELECT conversation_id, content FROM message WHERE content LIKE ? ESCAPE '\\' "
                    "ORDER BY id DESC LIMIT ?",
                    (like, limit * 5),
                )
            ]
        for cid, snip in rows:
            if cid in seen or len(out) >= limit:
                continue
            conv = self.get_conversation(cid)
            if conv:
                seen.add(cid)
                out.append((conv, snip))
        return out[:limit]

    def set_conversation_flags(
        self, cid: int, *, memory_paused: bool | None = None, incognito: bool | None = None
    ) -> None:
        """memory_paused: pages of this conversation are not stored. incognito: same, and the UI may hide it."""
        with self.transaction():
            if memory_paused is not None:
                self._x("UPDATE conversation SET memory_paused = ? WHERE id = ?", (int(memory_paused), cid))
            if incognito is not None:
                self._x("UPDATE conversation SET incognito = ? WHERE id = ?", (int(incognito), cid))

    def _touch_conversation(self, cid: int, at: float) -> None:
        self._x("UPDATE conversation SET updated_at = max(updated_at, ?) WHERE id = ?", (at, cid))

    # ------------------------------------------------------------------ messages
    def _msg(self, r: tuple) -> Message:
        return Message(r[0], r[1], r[2], r[3], r[4], r[5], r[6], _pj(r[7]))

    def add_message(
        self,
        cid: int,
        role: str,
        content: str,
        *,
        parent_id: Any = _AUTO,
        created_at: float | None = None,
        status: str = "complete",
        meta: dict | None = None,
    ) -> int:
        """Append a message. Without `parent_id` it follows the conversation's current leaf (the newest
        message); pass `parent_id=<id>` to branch (regenerate / edit), or `parent_id=None` for a new root."""
        now = self.clock() if created_at is None else float(created_at)
        with self.transaction():
            if parent_id is _AUTO:
                row = self._x(
                    "SELECT id FROM message WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,)
                ).fetchone()
                parent_id = row[0] if row else None
            elif parent_id is not None:
                prow = self._x("SELECT conversation_id FROM message WHERE id = ?", (parent_id,)).fetchone()
                if not prow or prow[0] != cid:
                    raise ValueError(f"parent message {parent_id} is not in conversation {cid}")
            self._x(
                "INSERT INTO message(conversation_id, parent_id, role, content, created_at, status, meta) "
                "VALUES (?,?,?,?,?,?,?)",
                (cid, parent_id, role, content, now, status, _j(meta or {})),
            )
            mid = self._conn.last_insert_rowid()
            self._touch_conversation(cid, now)
            return mid

    def update_message(
        self,
        mid: int,
        *,
        content: str | None = None,
        status: str | None = None,
        meta: dict | None = None,
        replace_meta: bool = False,
    ) -> None:
        """Update a message; `meta` is merged into the stored dict (or replaces it with replace_meta=True)."""
        with self.transaction():
            row = self._x("SELECT meta, conversation_id FROM message WHERE id = ?", (mid,)).fetchone()
            if not row:
                raise KeyError(f"no message {mid}")
            if content is not None:
                self._x("UPDATE message SET content = ? WHERE id = ?", (content, mid))
            if status is not None:
                self._x("UPDATE message SET status = ? WHERE id = ?", (status, mid))
            if meta is not None:
                new = dict(meta) if replace_meta else {**_pj(row[0]), **meta}
                self._x("UPDATE message SET meta = ? WHERE id = ?", (_j(new), mid))
            self._touch_conversation(row[1], self.clock())

    def delete_message(self, mid: int) -> None:
        """Delete one message (its children re-attach to its parent)."""
        with self.transaction():
            row = self._x("SELECT parent_id FROM message WHERE id = ?", (mid,)).fetchone()
            if row:
                self._x("UPDATE message SET parent_id = ? WHERE parent_id = ?", (row[0], mid))
                self._x("DELETE FROM message WHERE id = ?", (mid,))

    def get_message(self, mid: int) -> Message | None:
        r = self._one(f"SELECT {MSG_COLS} FROM message WHERE id = ?", (mid,))
        return self._msg(r) if r else None

    def list_messages(self, cid: int, leaf_id: int | None = None) -> list[Message]:
        """The current branch, root -> leaf. The leaf is the newest message unless `leaf_id` is given."""
        with self._lock:
            if leaf_id is None:
                leaf_id = self._scalar(
                    "SELECT id FROM message WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,)
                )
            if leaf_id is None:
                return []
            rows = self._rows(
                f"""WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL
                       SELECT m.parent_id, up.depth + 1 FROM message m JOIN up ON m.id = up.id
                       WHERE m.parent_id IS NOT NULL AND up.depth < 100000)
                    SELECT {", ".join("m." + c.strip() for c in MSG_COLS.split(","))}
                    FROM up JOIN message m ON m.id = up.id WHERE m.conversation_id = ? ORDER BY up.depth DESC""",
                (leaf_id, cid),
            )
            return [self._msg(r) for r in rows]

    def list_messages_to(self, mid: int) -> list[Message]:
        """The branch from the root to message `mid` (inclusive), root first."""
        msg = self.get_message(mid)
        return [] if msg is None else self.list_messages(msg.conversation_id, leaf_id=mid)

    def all_messages(self, cid: int) -> list[Message]:
        """Every message of a conversation, every branch (regenerated replies, edits), oldest first."""
        rows = self._rows(f"SELECT {MSG_COLS} FROM message WHERE conversation_id = ? ORDER BY id", (cid,))
        return [self._msg(r) for r in rows]

    def list_messages_with_status(self, status: str, limit: int = 1000) -> list[Message]:
        """Messages in `status` (e.g. replies left 'streaming' by a crash), oldest first."""
        rows = self._rows(f"SELECT {MSG_COLS} FROM message WHERE status = ? ORDER BY id LIMIT ?", (status, limit))
        return [self._msg(r) for r in rows]

    def mark_interrupted_messages(self, from_status: str = "streaming", to_status: str = "interrupted") -> int:
        """After a crash: replies still marked `from_status` become `to_status` (their text is kept)."""
        with self.transaction():
            self._x("UPDATE message SET status = ? WHERE status = ?", (to_status, from_status))
            return self._conn.changes()

    def message_siblings(self, cid: int) -> dict[int, list[int]]:
        """For every message of a conversation that has alternatives (regenerated replies, edited
        messages), the ids of it and its alternatives, oldest first: message id -> sibling ids."""
        groups: dict[Any, list[int]] = {}
        for mid, parent in self._rows(
            "SELECT id, parent_id FROM message WHERE conversation_id = ? ORDER BY id", (cid,)
        ):
            groups.setdefault(parent, []).append(mid)
        return {mid: ids for ids in groups.values() if len(ids) > 1 for mid in ids}

    def message_children(self, mid: int) -> list[Message]:
        rows = self._rows(f"SELECT {MSG_COLS} FROM message WHERE parent_id = ? ORDER BY id", (mid,))
        return [self._msg(r) for r in rows]

    # ------------------------------------------------------------------ record readers
    def _page(self, r: tuple) -> Page:
        return Page(
            id=r[0],
            conversation_id=r[1],
            user_text=r[2],
            assistant_text=r[3],
            timestamp=r[4],
            tier=r[5],
            segment_id=r[6],
            prev_page_id=r[7],
            next_page_id=r[8],
            chain_id=r[9],
            chain_summary=r[10],
            keywords=_pj(r[11], []),
            pinned=bool(r[12]),
            user_message_id=r[13],
            assistant_message_id=r[14],
            meta=_pj(r[15]),
        )

    def _pages_by_ids(self, ids: Sequence[int]) -> dict[int, Page]:
        out: dict[int, Page] = {}
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for r in self._rows(f"SELECT {PAGE_COLS} FROM page p WHERE p.id IN ({marks})", chunk):
                out[r[0]] = self._page(r)
        return out

    def _heat_sql(self, now: float) -> tuple[str, dict]:
        p = self.params
        return (
            "(:alpha * s.n_visit + :beta * s.l_interaction + :gamma * exp(-(max(:now - s.last_access, 0.0)) / :mu))",
            {"alpha": p.alpha, "beta": p.beta, "gamma": p.gamma, "now": now, "mu": p.mu},
        )

    def _segment(self, r: tuple, now: float) -> Segment:
        p = self.params
        recency = math.exp(-max(now - r[6], 0.0) / p.mu)
        heat = p.alpha * r[4] + p.beta * r[5] + p.gamma * recency
        return Segment(
            id=r[0],
            tier=r[1],
            summary=r[2],
            keywords=_pj(r[3], []),
            n_visit=r[4],
            l_interaction=r[5],
            last_access=r[6],
            created_at=r[7],
            updated_at=r[8],
            page_count=r[9],
            pinned=bool(r[10]),
            promotions=r[11],
            recency=recency,
            heat=heat,
        )

    def _trait(self, r: tuple) -> Trait:
        srcs = [
            x
            for (x,) in self._rows(
                "SELECT DISTINCT page_id FROM derivation WHERE item_kind='trait' AND "
                "item_id = ? AND version = ? ORDER BY page_id",
                (r[0], r[6]),
            )
        ]
        return Trait(
            id=r[0],
            dimension=r[1],
            value=r[2],
            evidence=r[3],
            confidence=r[4],
            status=r[5],
            version=r[6],
            pinned=bool(r[7]),
            created_at=r[8],
            updated_at=r[9],
            source_page_ids=srcs,
            conversation_ids=_pj(r[10], []),
            model=r[11],
        )

    def _knowledge(self, r: tuple) -> Knowledge:
        srcs = [
            x
            for (x,) in self._rows(
                "SELECT DISTINCT page_id FROM derivation WHERE item_kind='knowledge' AND "
                "item_id = ? AND version = ? ORDER BY page_id",
                (r[0], r[5]),
            )
        ]
        return Knowledge(
            id=r[0],
            owner=r[1],
            text=r[2],
            confidence=r[3],
            status=r[4],
            version=r[5],
            pinned=bool(r[6]),
            created_at=r[7],
            updated_at=r[8],
            source_page_ids=srcs,
            conversation_ids=_pj(r[9], []),
            model=r[10],
        )

    # ------------------------------------------------------------------ management: reads
    def get_page(self, pid: int) -> Page | None:
        r = self._one(f"SELECT {PAGE_COLS} FROM page p WHERE p.id = ?", (pid,))
        return self._page(r) if r else None

    _PAGE_ORDER = {
        "timestamp": "p.timestamp",
        "id": "p.id",
        "tier": "p.tier",
        "segment": "p.segment_id",
        "conversation": "p.conversation_id",
    }

    def _page_filters(
        self,
        tier,
        conversation_id,
        segment_id,
        text,
        pinned=None,
        user_message_id=None,
        assistant_message_id=None,
        after_id=None,
        deleted_chats=False,
    ) -> tuple[str, list]:
        where, args = _equals(
            [
                ("p.user_message_id", user_message_id),
                ("p.assistant_message_id", assistant_message_id),
                ("p.tier", tier),
                ("p.conversation_id", conversation_id),
                ("p.segment_id", segment_id),
                ("p.pinned", None if pinned is None else int(pinned)),
            ]
        )
        if deleted_chats:  # a deleted chat's pages stay (memory is forgotten explicitly) and name no chat
            where.append("p.conversation_id IS NULL")
        if after_id is not None:
            where.append("p.id > ?")
            args.append(after_id)
        if text:
            like = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where.append("(p.user_text LIKE ? ESCAPE '\\' OR p.assistant_text LIKE ? ESCAPE '\\')")
            args += [like, like]
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def list_pages(
        self,
        *,
        tier: str | None = None,
        conversation_id: int | None = None,
        segment_id: int | None = None,
        text: str | None = None,
        pinned: bool | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        order_by: str = "timestamp",
        descending: bool = True,
        limit: int = 100,
        offset: int = 0,
        after_id: int | None = None,
        deleted_chats: bool = False,
    ) -> list[Page]:
        """Pages filtered, sorted and paged in SQL. `text` is a case-insensitive substring filter;
        `after_id` pages by key (ids above it; with order_by="id" ascending it walks the whole table
        in batches at a constant cost per batch, as an export does); `deleted_chats`: only pages whose
        chat was deleted."""
        if order_by not in self._PAGE_ORDER:
            raise ValueError(f"order_by must be one of {sorted(self._PAGE_ORDER)}")
        where, args = self._page_filters(
            tier,
            conversation_id,
            segment_id,
            text,
            pinned,
            user_message_id,
            assistant_message_id,
            after_id,
            deleted_chats,
        )
        d = "DESC" if descending else "ASC"
        order = f"ORDER BY {self._PAGE_ORDER[order_by]} {d}, p.id {d}"
        if offset < 1000:
            rows = self._rows(f"SELECT {PAGE_COLS} FROM page p{where} {order} LIMIT ? OFFSET ?", [*args, limit, offset])
            return [self._page(r) for r in rows]
        # A deep page (a scrollbar dragged to row 50,000): step over the skipped rows in an index
        # that holds the sort key and the id, without reading the rows themselves, then fetch the
        # `limit` rows by id. Several times faster than OFFSET over full rows on a large table.
        ids = [
            r[0] for r in self._rows(f"SELECT p.id FROM page p{where} {order} LIMIT ? OFFSET ?", [*args, limit, offset])
        ]
        pages = self._pages_by_ids(ids)
        return [pages[i] for i in ids if i in pages]

    def count_pages(
        self,
        *,
        tier: str | None = None,
        conversation_id: int | None = None,
        segment_id: int | None = None,
        text: str | None = None,
        pinned: bool | None = None,
        user_message_id: int | None = None,
        assistant_message_id: int | None = None,
        deleted_chats: bool = False,
        **_: Any,
    ) -> int:
        where, args = self._page_filters(
            tier,
            conversation_id,
            segment_id,
            text,
            pinned,
            user_message_id,
            assistant_message_id,
            deleted_chats=deleted_chats,
        )
        return self._scalar(f"SELECT count(*) FROM page p{where}", args)

    _SEG_ORDER = {
        "heat": "heat",
        "last_access": "s.last_access",
        "created_at": "s.created_at",
        "id": "s.id",
        "n_visit": "s.n_visit",
        "l_interaction": "s.l_interaction",
        "page_count": "s.page_count",
        "updated_at": "s.updated_at",
    }

    def list_segments(
        self,
        *,
        tier: str | None = None,
        text: str | None = None,
        pinned: bool | None = None,
        order_by: str = "heat",
        descending: bool = True,
        limit: int = 100,
        offset: int = 0,
        after_id: int | None = None,
    ) -> list[Segment]:
        if order_by not in self._SEG_ORDER:
            raise ValueError(f"order_by must be one of {sorted(self._SEG_ORDER)}")
        now = self.clock()
        heat, hargs = self._heat_sql(now)
        where, args = self._seg_filters(tier, text, pinned)
        if after_id is not None:  # keyset paging (see list_pages)
            where = (where + " AND" if where else " WHERE") + " s.id > :after_id"
            args["after_id"] = after_id
        d = "DESC" if descending else "ASC"
        rows = self._rows(
            f"SELECT {SEG_COLS}, {heat} AS heat FROM segment s{where} "
            f"ORDER BY {self._SEG_ORDER[order_by]} {d}, s.id {d} LIMIT :limit OFFSET :offset",
            {**hargs, **args, "limit": limit, "offset": offset},
        )
        return [self._segment(r, now) for r in rows]

    def _seg_filters(self, tier, text, pinned) -> tuple[str, dict]:
        where, args = [], {}
        if tier is not None:
            where.append("s.tier = :tier")
            args["tier"] = tier
        if pinned is not None:
            where.append("s.pinned = :pinned")
            args["pinned"] = int(pinned)
        if text:
            where.append("(s.summary LIKE :like ESCAPE '\\' OR s.keywords LIKE :like ESCAPE '\\')")
            args["like"] = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def count_segments(
        self, *, tier: str | None = None, text: str | None = None, pinned: bool | None = None, **_: Any
    ) -> int:
        where, args = self._seg_filters(tier, text, pinned)
        return self._scalar(f"SELECT count(*) FROM segment s{where}", args)

    def get_segment(self, sid: int) -> Segment | None:
        now = self.clock()
        r = self._one(f"SELECT {SEG_COLS} FROM segment s WHERE s.id = ?", (sid,))
        return self._segment(r, now) if r else None

    def list_traits(
        self,
        *,
        include_archived: bool = False,
        dimension: str | None = None,
        text: str | None = None,
        order_by: str = "dimension",
        descending: bool = False,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Trait]:
        orders = {
            "dimension": "t.dimension",
            "confidence": "t.confidence",
            "updated_at": "t.updated_at",
            "created_at": "t.created_at",
            "id": "t.id",
        }
        if order_by not in orders:
            raise ValueError(f"order_by must be one of {sorted(orders)}")
        where, args = [], []
        if not include_archived:
            where.append("t.status = 'active'")
        if dimension is not None:
            where.append("t.dimension = ?")
            args.append(dimension)
        if text:
            where.append("(t.value LIKE ? OR t.dimension LIKE ?)")
            args += [f"%{text}%", f"%{text}%"]
        w = (" WHERE " + " AND ".join(where)) if where else ""
        d = "DESC" if descending else "ASC"
        rows = self._rows(
            f"SELECT {TRAIT_COLS} FROM trait t{w} ORDER BY {orders[order_by]} {d}, t.id {d} LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        return [self._trait(r) for r in rows]

    def count_traits(self, *, include_archived: bool = False) -> int:
        return self._scalar("SELECT count(*) FROM trait" + ("" if include_archived else " WHERE status='active'"))

    def get_trait(self, tid: int) -> Trait | None:
        r = self._one(f"SELECT {TRAIT_COLS} FROM trait t WHERE t.id = ?", (tid,))
        return self._trait(r) if r else None

    def list_knowledge(
        self,
        owner: str | None = None,
        include_archived: bool = False,
        *,
        text: str | None = None,
        order_by: str = "updated_at",
        descending: bool = True,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Knowledge]:
        orders = {
            "updated_at": "k.updated_at",
            "created_at": "k.created_at",
            "confidence": "k.confidence",
            "id": "k.id",
            "text": "k.text",
        }
        if order_by not in orders:
            raise ValueError(f"order_by must be one of {sorted(orders)}")
        w, args = self._knowledge_filters(owner, include_archived, text)
        d = "DESC" if descending else "ASC"
        rows = self._rows(
            f"SELECT {KNOW_COLS} FROM knowledge k{w} ORDER BY {orders[order_by]} {d}, k.id {d} LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
        return [self._knowledge(r) for r in rows]

    def count_knowledge(
        self, owner: str | None = None, include_archived: bool = False, *, text: str | None = None
    ) -> int:
        w, args = self._knowledge_filters(owner, include_archived, text)
        return self._scalar(f"SELECT count(*) FROM knowledge k{w}", args)

    @staticmethod
    def _knowledge_filters(owner, include_archived, text) -> tuple[str, list]:
        where, args = _equals([("k.owner", owner)])
        if not include_archived:
            where.append("k.status = 'active'")
        if text:
            where.append("k.text LIKE ?")
            args.append(f"%{text}%")
        return (" WHERE " + " AND ".join(where)) if where else "", args

    def get_knowledge(self, kid: int) -> Knowledge | None:
        r = self._one(f"SELECT {KNOW_COLS} FROM knowledge k WHERE k.id = ?", (kid,))
        return self._knowledge(r) if r else None

    def item_versions(self, kind: str, item_id: int) -> list[ItemVersion]:
        """Version history of a trait or knowledge item, oldest first; the last entry is the current one."""
        if kind not in ("trait", "knowledge"):
            raise ValueError("kind must be 'trait' or 'knowledge'")
        out = []
        for r in self._rows(
            "SELECT version, text, created_at, archived_at, reason, detail FROM item_version "
            "WHERE item_kind = ? AND item_id = ? ORDER BY version",
            (kind, item_id),
        ):
            out.append(ItemVersion(kind, item_id, r[0], r[1], r[2], r[3], r[4], _pj(r[5])))
        cur = self.get_trait(item_id) if kind == "trait" else self.get_knowledge(item_id)
        if cur is not None:
            text = cur.value if kind == "trait" else cur.text
            detail = {"confidence": cur.confidence, "source_page_ids": cur.source_page_ids, "model": cur.model}
            if kind == "trait":
                detail.update(dimension=cur.dimension, evidence=cur.evidence)
            reason = self._scalar(f"SELECT reason FROM {kind} WHERE id = ?", (item_id,)) or ""
            out.append(ItemVersion(kind, item_id, cur.version, text, cur.updated_at, None, reason, detail))
        return out

    # ------------------------------------------------------------------ jobs
    def enqueue(self, kind: str, payload: dict, *, key: str | None = None) -> int:
        """Persist a job. With `key`, enqueueing the same key again returns the existing job's id."""
        now = self.clock()
        with self.transaction():
            if key is not None:
                row = self._x("SELECT id FROM job WHERE key = ?", (key,)).fetchone()
                if row:
                    return row[0]
            self._x(
                "INSERT INTO job(kind, payload, key, status, created_at, updated_at) VALUES (?,?,?,?,?,?)",
                (kind, _j(payload), key, "pending", now, now),
            )
            return self._conn.last_insert_rowid()

    def cancel_jobs(self, *, key: str | None = None, kind: str | None = None) -> int:
        """Drop pending jobs with this key (or of this kind); returns how many were dropped."""
        if key is None and kind is None:
            raise ValueError("give key= or kind=")
        with self.transaction():
            where, args = ["status = 'pending'"], []
            if key is not None:
                where.append("key = ?")
                args.append(key)
            if kind is not None:
                where.append("kind = ?")
                args.append(kind)
            self._x("DELETE FROM job WHERE " + " AND ".join(where), args)
            return self._conn.changes()

    def pending_jobs(self, *, kinds: Sequence[str] | None = None, exclude_kinds: Sequence[str] | None = None) -> int:
        kind_sql, kind_args = self._job_kind_filter(kinds, exclude_kinds)
        return self._scalar("SELECT count(*) FROM job WHERE status = 'pending' " + kind_sql, kind_args)

    @staticmethod
    def _job_kind_filter(kinds, exclude_kinds) -> tuple[str, list]:
        sql, args = "", []
        if kinds is not None:
            sql += f"AND kind IN ({','.join('?' * len(kinds)) or 'NULL'}) "
            args += list(kinds)
        if exclude_kinds:
            sql += f"AND kind NOT IN ({','.join('?' * len(exclude_kinds))}) "
            args += list(exclude_kinds)
        return sql, args

    def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        w, args = ("WHERE status = ?", [status]) if status else ("", [])
        rows = self._rows(
            f"SELECT id, kind, payload, key, status, attempts, created_at, updated_at, error FROM job "
            f"{w} ORDER BY id DESC LIMIT ?",
            [*args, limit],
        )
        return [Job(r[0], r[1], _pj(r[2]), r[3], r[4], r[5], r[6], r[7], r[8]) for r in rows]

    def run_pending(
        self,
        max_jobs: int | None = None,
        *,
        allow_llm: bool = True,
        kinds: Sequence[str] | None = None,
        exclude_kinds: Sequence[str] | None = None,
    ) -> int:
        """Run queued jobs in order; returns how many completed.

        A job's effects and its 'done' mark commit in one transaction, so a job interrupted by a
        crash simply runs again (from scratch) at the next call. Each job runs at most once per call.
        `kinds`/`exclude_kinds` let a scheduler keep jobs that want the LLM for the thread that owns it.
        """
        done = 0
        tried: set[int] = set()
        kind_sql, kind_args = self._job_kind_filter(kinds, exclude_kinds)
        while max_jobs is None or done < max_jobs:
            marks = ",".join("?" * len(tried))
            row = self._one(
                "SELECT id, kind, payload, key, attempts FROM job WHERE status = 'pending' "
                + kind_sql
                + (f"AND id NOT IN ({marks}) " if tried else "")
                + "ORDER BY id LIMIT 1",
                [*kind_args, *tried],
            )
            if not row:
                break
            jid, kind, payload, key, attempts = row
            tried.add(jid)
            handler = getattr(self, f"_job_{kind}", None)
            try:
                if handler is None:
                    raise ValueError(f"unknown job kind {kind!r}")
                apply = handler(jid, _pj(payload), allow_llm=allow_llm)
                with self.transaction():
                    st = self._x("SELECT status FROM job WHERE id = ?", (jid,)).fetchone()
                    if not st or st[0] != "pending":
                        raise _JobAlreadyDone()
                    if apply is not None:
                        apply()
                    _checkpoint(f"job:{kind}:before_commit")
                    self._x(
                        "UPDATE job SET status = 'done', attempts = attempts + 1, updated_at = ?, error = NULL "
                        "WHERE id = ?",
                        (self.clock(), jid),
                    )
                done += 1
            except _JobAlreadyDone:
                continue
            except LLMDeferred:
                # the LLM is wanted elsewhere: leave this job pending, uncounted, and stop here
                log.info("memory job %s (%s) deferred: the LLM is busy", jid, kind)
                break
            except Exception as exc:
                if not is_storage_full(exc):
                    self._job_failed(jid, kind, attempts, exc)
                    continue
                # a full disk is not the job's fault: it stays pending, uncounted, and runs again
                # once there is space (nothing it would have written is lost; its inputs are kept)
                log.warning("memory job %s (%s) waits: the disk is full (%s)", jid, kind, exc)
                raise
        return done

    def _job_failed(self, jid: int, kind: str, attempts: int, exc: Exception) -> None:
        """Count a failed attempt; the last allowed one marks the job failed and says so."""
        log.exception("memory job %s (%s) failed", jid, kind)
        failed = attempts + 1 >= self.params.job_max_attempts
        with self.transaction():
            self._x(
                "UPDATE job SET attempts = attempts + 1, error = ?, updated_at = ?, status = ? WHERE id = ?",
                (f"{type(exc).__name__}: {exc}"[:2000], self.clock(), "failed" if failed else "pending", jid),
            )
            if failed:
                self._emit(
                    "job_failed",
                    None,
                    None,
                    f"memory job {jid} ({kind}) failed",
                    {"job_id": jid, "error": f"{type(exc).__name__}"},
                )

    def _job_add_page(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None]:
        kw = dict(payload)
        cid = kw.pop("conversation_id", kw.pop("cid", None))
        user_text = kw.pop("user_text", "")
        assistant_text = kw.pop("assistant_text", "")
        emb = kw.pop("embedding", None)
        if emb is not None:
            vec = self._check_vec(emb)
        else:
            ts = kw.get("timestamp")
            with self._lock:
                ctx = self._context_before(cid, None, self.clock() if ts is None else ts)
            vec = self._embed_pages([(user_text, assistant_text)], [ctx])[0]
        if kw.get("assistant_message_id") is None:
            kw.setdefault("dedupe_key", f"job:{jid}")
        allowed = {"timestamp", "user_message_id", "assistant_message_id", "meta", "dedupe_key"}
        extra = set(kw) - allowed
        if extra:
            raise ValueError(f"unknown add_page job fields: {sorted(extra)}")

        def apply() -> None:
            self._add_page_txn(cid, user_text, assistant_text, vec, **kw)
            _checkpoint("add_page:after_insert")

        return apply

    def _report_progress(self, what: str, done: int, total: int) -> None:
        """Tell `on_progress` how far a long job is. A batched job reports where each batch starts and
        ends, and a batch starts where the one before it ended: that report is said once."""
        if (what, done, total) == self._last_progress:
            return
        self._last_progress = (what, done, total)
        if self.on_progress is not None:
            try:
                self.on_progress(what, done, total)
            except Exception:  # a progress display must never break the job
                log.exception("progress callback failed")

    # ------------------------------------------------------------------ invariants (tests, `mnemo doctor`)
    def export(
        self, path: str | Path, *, fmt: str | None = None, on_progress: Callable[[int, int], None] | None = None
    ):
        """Write everything remembered to a JSON or Markdown file (see `memory_core.export`)."""
        from .export import export_memory

        return export_memory(self, path, fmt=fmt, on_progress=on_progress)

    def backup(
        self,
        path: str | Path,
        *,
        pages_per_step: int = 2048,
        on_progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Path:
        """Copy the whole database to `path` with SQLite's online backup, a few thousand pages at a
        time (this connection's lock is held per step only, so other work goes on in between; other
        connections keep writing, WAL). Written to a temp file and renamed: `path` is either the old
        file or a complete new copy. `cancelled()` true between steps stops it (InterruptedError,
        nothing left behind). Returns `path`."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.partial")
        tmp.unlink(missing_ok=True)
        dest = apsw.Connection(str(tmp))
        try:
            with dest.backup("main", self._conn, "main") as b:
                while not b.done:
                    if cancelled is not None and cancelled():
                        raise InterruptedError("backup cancelled")
                    with self._lock:
                        self._check()
                        b.step(pages_per_step)
                    if on_progress is not None:
                        on_progress(b.page_count - b.remaining, b.page_count)
            dest.close()
            os.replace(tmp, path)
        except BaseException:
            dest.close()
            tmp.unlink(missing_ok=True)
            raise
        return path

    def check_integrity(self) -> list[str]:
        """Problems found across base, vector and FTS tables (empty list = consistent)."""
        problems: list[str] = []
        with self._lock:
            pages = {r[0] for r in self._rows("SELECT id FROM page")}
            vec = {r[0] for r in self._rows("SELECT page_id FROM page_vec")}
            fts = {r[0] for r in self._rows("SELECT rowid FROM page_fts")}
            tri = {r[0] for r in self._rows("SELECT rowid FROM page_tri")}
            cjk = {
                r[0]
                for r in self._rows("SELECT id, user_text, assistant_text FROM page")
                if T.has_cjk(page_text(r[1], r[2]))
            }
            if pages != vec:
                problems.append(f"page vs page_vec differ: {sorted(pages ^ vec)[:10]}")
            if pages != fts:
                problems.append(f"page vs page_fts differ: {sorted(pages ^ fts)[:10]}")
            if tri != cjk:
                problems.append(f"page_tri vs CJK pages differ: {sorted(tri ^ cjk)[:10]}")
            bad_tier = self._rows(
                "SELECT p.id FROM page p LEFT JOIN segment s ON s.id = p.segment_id "
                "WHERE (p.tier = 'stm') != (p.segment_id IS NULL) OR "
                "(p.tier != 'stm' AND (s.id IS NULL OR s.tier != p.tier))"
            )
            if bad_tier:
                problems.append(f"pages with inconsistent tier/segment: {[r[0] for r in bad_tier[:10]]}")
            segs = {r[0]: r for r in self._rows("SELECT id, tier, page_count FROM segment")}
            svec = {r[0]: r[1] for r in self._rows("SELECT segment_id, tier FROM segment_vec")}
            if set(segs) != set(svec):
                problems.append(f"segment vs segment_vec differ: {sorted(set(segs) ^ set(svec))[:10]}")
            for sid, (_, tier, _) in segs.items():
                if sid in svec and svec[sid] != tier:
                    problems.append(f"segment {sid} tier {tier} but segment_vec partition {svec[sid]}")
            counts = dict(
                self._rows("SELECT segment_id, count(*) FROM page WHERE segment_id IS NOT NULL GROUP BY segment_id")
            )
            for sid, (_, _, pc) in segs.items():
                if counts.get(sid, 0) != pc or pc == 0:
                    problems.append(f"segment {sid} page_count {pc} but has {counts.get(sid, 0)} pages")
            kn = {r[0] for r in self._rows("SELECT id FROM knowledge")}
            kvec = {r[0] for r in self._rows("SELECT knowledge_id FROM knowledge_vec")}
            kfts = {r[0] for r in self._rows("SELECT rowid FROM knowledge_fts")}
            if kn != kvec:
                problems.append(f"knowledge vs knowledge_vec differ: {sorted(kn ^ kvec)[:10]}")
            if kn != kfts:
                problems.append(f"knowledge vs knowledge_fts differ: {sorted(kn ^ kfts)[:10]}")
            orphan_chain = self._rows(
                "SELECT id FROM chain c WHERE NOT EXISTS (SELECT 1 FROM page p WHERE p.chain_id = c.id)"
            )
            if orphan_chain:
                problems.append(f"chains without pages: {[r[0] for r in orphan_chain[:10]]}")
            orphan_der = self._rows(
                "SELECT d.item_kind, d.item_id, d.page_id FROM derivation d WHERE NOT EXISTS "
                "(SELECT 1 FROM page p WHERE p.id = d.page_id) OR (d.item_kind = 'trait' AND NOT EXISTS "
                "(SELECT 1 FROM trait t WHERE t.id = d.item_id)) OR (d.item_kind = 'knowledge' AND NOT EXISTS "
                "(SELECT 1 FROM knowledge k WHERE k.id = d.item_id))"
            )
            if orphan_der:
                problems.append(f"orphan derivation rows: {orphan_der[:10]}")
            orphan_ver = self._rows(
                "SELECT v.item_kind, v.item_id FROM item_version v WHERE (v.item_kind = 'trait' AND NOT EXISTS "
                "(SELECT 1 FROM trait t WHERE t.id = v.item_id)) OR (v.item_kind = 'knowledge' AND NOT EXISTS "
                "(SELECT 1 FROM knowledge k WHERE k.id = v.item_id))"
            )
            if orphan_ver:
                problems.append(f"orphan version rows: {orphan_ver[:10]}")
            fk = self._rows("PRAGMA foreign_key_check")
            if fk:
                problems.append(f"foreign key violations: {fk[:10]}")
        return problems
