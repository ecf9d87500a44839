"""Forgetting for good: what a transaction forgot leaves no text in the file once it commits.

SQLite deletes a row by unlinking it; with `secure_delete` on (every connection, memory_core.storage.schema) the
freed bytes are zeroed, but four other places keep a forgotten item's words:

- the FTS5 indexes: the page and fact tables are contentless (`contentless_delete=1`), so a deleted
  row is only masked and its terms stay in the segment b-trees until a merge rewrites them; the
  messages' table keeps delete markers beside the old entries the same way. FTS5's own 'secure-delete'
  option cannot help a contentless table (it needs the deleted text to find the entries), so the
  tables a transaction deleted from are optimized (`optimize`: every segment merged into one, the
  deleted entries dropped). It rewrites the index (what that costs: tests/bench/forget_cost.py);
- the traces of replies that recalled the item (memory_core.traces), rewritten in the transaction by the
  message table's owner (`at_seal`);
- the write-ahead log, which holds the pages as they were before: checkpointed and truncated;
- after a wipe, the free pages of a file that has shrunk: VACUUM.

The purge runs right after the commit, on the thread that forgot (never the UI's: the app runs memory
work on its own threads). Until it has run, `purge_pending` in `meta` says what is left to do, so a
crash between the commit and the purge is finished at the next open (`at_open`).

Backups copied before a forget still hold it. So each forget also records, in `meta` and without any
text, the span of time in which what it removed existed (`forgotten_spans`): a backup made inside a
span may hold forgotten memory, and the app tells the user which (app.operations.backups).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import apsw

from . import tables
from .codec import from_json, to_json


class Database(Protocol):
    """What the purge uses of memory_core.storage.database.Database (named here: that module imports this one)."""

    clock: Callable[[], float]
    lock: Any  # a threading.RLock

    def transaction(self) -> AbstractContextManager: ...
    def execute(self, sql: str, params: Any = ()) -> Any: ...
    def scalar(self, sql: str, params: Any = ()) -> Any: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def delete_meta(self, *keys: str) -> None: ...
    def get_meta(self, key: str, default: str | None = None) -> str | None: ...


log = logging.getLogger("memory_core")

FTS_TABLES = tables.fts_tables()  # every full-text table (memory_core.storage.tables)
PENDING_KEY = "purge_pending"
SPANS_KEY = "forgotten_spans"
PURGED_KEY, PURGED_VERSION = "purged", "1"  # the file has been purged since purging began
MAX_SPANS = 64


@dataclass
class Forgetting:
    """What the open transaction removes for good."""

    items: list[tuple[str, int]] = field(default_factory=list)  # (kind, id) whose text traces must drop
    fts: set[str] = field(default_factory=set)  # full-text tables it deleted rows from
    since: float | None = None  # when the oldest of it was made (a backup from before cannot hold it)
    spans: bool = False  # a span of time to record for the backups
    wiped: bool = False

    @property
    def empty(self) -> bool:
        return not (self.items or self.fts or self.spans or self.wiped)


class Purge:
    """The forget bookkeeping of one Database: noted inside a transaction, sealed before its commit,
    carried out after it."""

    def __init__(self, db: Database):
        self.db = db
        self.open = Forgetting()
        # what the owners of other tables do the first time a file is purged (storage.jobs: finished
        # jobs lose their text), inside that transaction
        self._first_purge: list[Callable[[], None]] = []
        # what the owners of other tables change in the forgetting transaction before it commits
        # (memory_core.conversations: replies' traces lose the forgotten text)
        self._at_seal: list[Callable[[Forgetting], None]] = []

    def at_seal(self, fn: Callable[[Forgetting], None]) -> None:
        self._at_seal.append(fn)

    def at_first_purge(self, fn: Callable[[], None]) -> None:
        self._first_purge.append(fn)

    # ------------------------------------------------------------------ noted inside a transaction
    def note(self, kind: str, ids: Iterable[int], since: float | None) -> None:
        """Items of `kind` ("page", "knowledge", "trait") removed for good (or whose text was replaced),
        the oldest made at `since`."""
        self.open.items.extend((kind, int(i)) for i in ids)
        self.note_span(since)

    def note_fts(self, tables: Iterable[str]) -> None:
        self.open.fts.update(tables)

    def note_span(self, since: float | None) -> None:
        """Something made at `since` is gone (a deleted chat's messages, say): backups from after it hold it."""
        self.open.spans = True
        if since is not None and (self.open.since is None or since < self.open.since):
            self.open.since = float(since)

    def note_wipe(self, since: float | None) -> None:
        self.open.wiped = True
        self.note_fts(tables.fts_tables("memory"))
        if since is not None:
            self.note_span(since)

    def mark(self) -> tuple:
        """Where a savepoint begins (`rollback_to` goes back there)."""
        f = self.open
        return len(f.items), set(f.fts), f.since, f.spans, f.wiped

    def rollback_to(self, mark: tuple) -> None:
        """A savepoint rolled back: what it forgot was not removed after all."""
        n, fts, since, spans, wiped = mark
        del self.open.items[n:]
        self.open.fts, self.open.since, self.open.spans, self.open.wiped = fts, since, spans, wiped

    def discard(self) -> None:
        self.open = Forgetting()

    # ------------------------------------------------------------------ the transaction's end
    def seal(self) -> Forgetting | None:
        """Before COMMIT, inside the transaction: traces drop the forgotten text, the span is recorded
        and the purge noted as pending. Returns what to purge after the commit (None: nothing)."""
        f, self.open = self.open, Forgetting()
        if f.empty:
            return None
        for fn in self._at_seal:
            fn(f)
        if f.spans:
            self._add_span(f.since, self.db.clock())
        pending = self._pending()
        self.db.set_meta(
            PENDING_KEY,
            to_json({"fts": sorted(set(pending["fts"]) | f.fts), "vacuum": bool(pending["vacuum"] or f.wiped)}),
        )
        return f

    def finish(self, f: Forgetting) -> None:
        """After COMMIT: optimize the full-text tables, VACUUM after a wipe, empty the write-ahead log."""
        try:
            self._run(f.since if f.spans else None, f.spans)
        except Exception:  # the forget itself is committed: what is left is done at the next open
            log.exception("forgotten memory could not be purged from the file yet")

    def at_open(self) -> None:
        """At open: finish a purge a crash (or a busy reader) left undone. A file from before purging
        (no `purged` mark) is purged once: finished jobs lose their text and every full-text table is
        optimized. Not vacuumed: that would hold the write lock for seconds on a large file while the
        app's other threads open it (their busy timeout is 10 s); the free pages a forget before left
        unzeroed go at the next wipe."""
        db = self.db
        if db.get_meta(PURGED_KEY) != PURGED_VERSION:
            with db.transaction():
                for fn in self._first_purge:
                    fn()
                db.set_meta(PENDING_KEY, to_json({"fts": list(FTS_TABLES), "vacuum": False}))
                db.set_meta(PURGED_KEY, PURGED_VERSION)
        if db.get_meta(PENDING_KEY) is not None:
            self._run()

    def _pending(self) -> dict:
        got = from_json(self.db.get_meta(PENDING_KEY), {})
        return {"fts": list(got.get("fts") or []), "vacuum": bool(got.get("vacuum"))}

    def _run(self, since: float | None = None, span: bool = False) -> None:
        """The purge `purge_pending` names; with `span`, the forget's span is extended to now (a backup
        started while it committed may hold it too)."""
        db = self.db
        pending = self._pending()
        for table in sorted(set(pending["fts"])):
            if table not in FTS_TABLES:
                continue
            with db.transaction():
                tables.optimize(db, table)
        if pending["vacuum"]:
            with db.lock:
                db.execute("VACUUM")
        with db.transaction():
            db.delete_meta(PENDING_KEY)
            if span:
                self._add_span(since, db.clock())
        with db.lock:
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:  # another connection was reading the log: it keeps old pages until the next purge
            log.warning("the write-ahead log could not be emptied now (another connection is reading it)")
            with db.transaction():
                db.set_meta(PENDING_KEY, to_json({"fts": [], "vacuum": False}))

    # ------------------------------------------------------------------ spans, for the backups
    def spans(self) -> list[tuple[float, float]]:
        """The spans of time in which memory since forgotten existed, oldest first: (from, to)."""
        return _parse_spans(self.db.get_meta(SPANS_KEY))

    def _add_span(self, since: float | None, until: float) -> None:
        spans = sorted([*self.spans(), (float("-inf") if since is None else since, until)])
        merged: list[list[float]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        while len(merged) > MAX_SPANS:  # the two oldest become one (wider: a backup is only flagged more)
            merged[0:2] = [[merged[0][0], merged[1][1]]]
        self.db.set_meta(SPANS_KEY, to_json([[a if a != float("-inf") else None, b] for a, b in merged]))


def read_forgotten_spans(path: str | Path) -> list[tuple[float, float]]:
    """`Purge.spans` of the memory file at `path`, read without opening it as a store (no embedder:
    `mnemo memory backups`). Read-only; a file that cannot be read gives no spans."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return []
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (SPANS_KEY,)).fetchone()
    except apsw.Error:
        return []
    finally:
        conn.close()
    return _parse_spans(row[0] if row else None)


def _parse_spans(value: str | None) -> list[tuple[float, float]]:
    return [(float("-inf") if a is None else float(a), float(b)) for a, b in from_json(value, [])]
