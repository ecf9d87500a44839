"""The one database object every memory component shares: the apsw connection and its lock, write
transactions (nested ones become savepoints), the events of a transaction and the listeners told of them
after it commits, meta values and the small SQL helpers.

Threading: one Database owns one connection and serialises its own calls with a re-entrant lock. Open
another MemoryStore on the same file for another thread (WAL: one writer, concurrent readers).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import apsw

from ..types import Event, MemoryParams, StoreClosedError
from .codec import to_json
from .purge import Purge

log = logging.getLogger("memory_core")

CHECKPOINT_ENV = "MNEMO_MEMORY_CHECKPOINT"  # test hook: "<name>" -> sleep forever at that checkpoint

SqlParams = Sequence[Any] | dict[str, Any]


class Cursor(Protocol):
    """An apsw cursor as the components read it: the types of a row's values are the query's columns,
    which the query (not the type checker) knows, so rows are typed Any."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


def checkpoint(name: str) -> None:
    """Test hook for crash tests: block here when MNEMO_MEMORY_CHECKPOINT names this point."""
    if os.environ.get(CHECKPOINT_ENV) == name:
        sys.stderr.write(f"CHECKPOINT {name}\n")
        sys.stderr.flush()
        while True:
            time.sleep(3600)


def equals(pairs: Sequence[tuple[str, Any]]) -> tuple[list[str], list[Any]]:
    """`column = ?` conditions and their arguments for the pairs whose value is not None."""
    used = [(col, v) for col, v in pairs if v is not None]
    return [f"{col} = ?" for col, _ in used], [v for _, v in used]


def like_pattern(text: str) -> str:
    """A LIKE pattern (with ESCAPE '\\') that matches `text` anywhere, its wildcards taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _as_dict(cursor: apsw.Cursor, row: apsw.SQLiteValues) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.get_description(), row, strict=True)}


class Database:
    """One connection to one memory file, shared by the components of a MemoryStore."""

    def __init__(self, conn: apsw.Connection, path: str, *, dim: int, params: MemoryParams, clock: Callable[[], float]):
        self.conn = conn
        self.path = path
        self.dim = dim
        self.params = params
        self.clock = clock
        self.lock = threading.RLock()
        self._depth = 0
        # the events of the open transaction, told to the listeners once it commits
        self.pending_events: list[Event] = []
        self._listeners: list[Callable[[Event], None]] = []
        self._closed = False
        self._events_since_prune = 0
        # other owners' pruning of their logs, run with this one's (storage.jobs: finished jobs)
        self._pruners: list[Callable[[], None]] = []
        # what the open transaction forgets, purged from the file once it commits (memory_core.storage.purge)
        self.purge = Purge(self)

    # ------------------------------------------------------------------ open / close
    def close(self) -> None:
        with self.lock:
            if not self._closed:
                self._closed = True
                try:
                    self.conn.close()
                except apsw.Error:  # pragma: no cover
                    pass

    @property
    def closed(self) -> bool:
        return self._closed

    def check(self) -> None:
        """Raise StoreClosedError once the connection is closed."""
        if self._closed:
            raise StoreClosedError("this MemoryStore is closed")

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """One write transaction (BEGIN IMMEDIATE); nested calls become savepoints.

        Listeners get the events of a transaction after it commits.
        """
        with self.lock:
            self.check()
            if self._depth == 0:
                with self._outermost():
                    yield self
            else:
                with self._savepoint():
                    yield self

    @contextmanager
    def _outermost(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
            forgotten = self.purge.seal()  # traces lose the forgotten text in this same transaction
        except BaseException:
            self._rollback()
            raise
        try:
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._depth = 0
        events, self.pending_events = self.pending_events, []
        if forgotten is not None:
            self.purge.finish(forgotten)
        self._after_commit(events)

    def _rollback(self) -> None:
        self._depth = 0
        self.pending_events = []
        self.purge.discard()
        try:
            self.conn.execute("ROLLBACK")
        except apsw.Error:  # pragma: no cover - already rolled back by SQLite
            pass

    @contextmanager
    def _savepoint(self) -> Iterator[None]:
        name = f"sp{self._depth}"
        mark, forgot_mark = len(self.pending_events), self.purge.mark()
        self.conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            del self.pending_events[mark:]
            self.purge.rollback_to(forgot_mark)
            raise
        else:
            self.conn.execute(f"RELEASE {name}")
        finally:
            self._depth -= 1

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    # ------------------------------------------------------------------ events
    def add_listener(self, fn: Callable[[Event], None]) -> None:
        """Call `fn(event)` after each commit that produced events (in the committing thread)."""
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[Event], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def emit(
        self, kind: str, item_kind: str | None, item_id: int | None, summary: str, detail: dict | None = None
    ) -> None:
        """Record an event (inside the current transaction). Summaries never quote memory text."""
        at = self.clock()
        detail = detail or {}
        self.conn.execute(
            "INSERT INTO event(at, kind, item_kind, item_id, summary, detail) VALUES (?,?,?,?,?,?)",
            (at, kind, item_kind, item_id, summary, to_json(detail)),
        )
        self.pending_events.append(Event(self.conn.last_insert_rowid(), at, kind, item_kind, item_id, summary, detail))

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
        keep = max(100, self.params.jobs.events_keep)
        with self.transaction():
            self.execute("DELETE FROM event WHERE id <= (SELECT max(id) FROM event) - ?", (keep,))
            self.execute("DELETE FROM vec_log WHERE seq < (SELECT max(seq) FROM vec_log) - 50000")
            for prune in self._pruners:
                prune()

    def add_pruner(self, fn: Callable[[], None]) -> None:
        """Run `fn` (inside the transaction) each time the logs are pruned: a table's owner prunes its own rows."""
        self._pruners.append(fn)

    # ------------------------------------------------------------------ small SQL helpers
    def execute(self, sql: str, params: SqlParams = ()) -> Cursor:
        """A cursor over `sql`, without taking the lock: for use inside a transaction (or the lock)."""
        return self.conn.execute(sql, params)

    def rows(self, sql: str, params: SqlParams = ()) -> list[Any]:
        with self.lock:
            self.check()
            return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: SqlParams = ()) -> Any:
        with self.lock:
            self.check()
            return self.conn.execute(sql, params).fetchone()

    def named(self, sql: str, params: SqlParams = ()) -> list[dict[str, Any]]:
        """The rows of `sql` as dicts keyed by column name: for code that reads many columns, where
        `r[7]` says nothing. The connection's row type stays the tuple (the hot paths read those)."""
        with self.lock:
            self.check()
            cursor = self.conn.cursor()
            cursor.row_trace = _as_dict
            rows: list[Any] = cursor.execute(sql, params).fetchall()  # dicts: the row trace made them
            return rows

    def scalar(self, sql: str, params: SqlParams = ()) -> Any:
        row = self.one(sql, params)
        return row[0] if row else None

    def last_insert_rowid(self) -> int:
        return self.conn.last_insert_rowid()

    def changes(self) -> int:
        return self.conn.changes()

    def set_meta(self, key: str, value: str) -> None:
        self.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def delete_meta(self, *keys: str) -> None:
        for key in keys:
            self.execute("DELETE FROM meta WHERE key = ?", (key,))

    def bump_meta(self, key: str) -> None:
        """Add one to the counter `key` (which exists)."""
        self.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = ?", (key,))

    def log_vec(self, kind: str, ids: Iterable[int], op: str) -> None:
        """Note in `vec_log` that the vectors of `kind` ("page"...) with these ids were put ("put") or
        deleted ("del"), so the in-memory matrix caches (storage.vecindex) sync incrementally."""
        for item_id in ids:
            self.execute("INSERT INTO vec_log(kind, item_id, op) VALUES (?, ?, ?)", (kind, item_id, op))

    def log_vec_reset(self) -> None:
        """Every vector table was emptied (a wipe): the caches drop what they hold."""
        self.execute("INSERT INTO vec_log(kind, item_id, op) VALUES ('*', 0, 'reset')")

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.one("SELECT value FROM meta WHERE key = ?", (key,))
        return row[0] if row else default

    def memory_paused(self) -> bool:
        """Memory formation is paused globally (`MemoryStore.set_paused`)."""
        return self.get_meta("paused", "0") == "1"
