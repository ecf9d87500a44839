"""The job queue: persisted background work (pages to store, promotions, re-embedding...), run in order by
`run_pending` through an explicit handler table that each component fills for the kinds it owns."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from ..types import Job, LLMDeferred
from .codec import from_json, to_json
from .database import Database, checkpoint
from .schema import is_storage_full

log = logging.getLogger("memory_core")


class JobHandler(Protocol):
    """Does a job's slow part (embedding, the LLM) outside any transaction and returns what to write,
    which runs inside the transaction that marks the job done (None: nothing to write)."""

    def __call__(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None: ...


class _JobAlreadyDone(Exception):
    pass


def kind_filter(kinds: Sequence[str] | None, exclude_kinds: Sequence[str] | None) -> tuple[str, list]:
    sql, args = "", []
    if kinds is not None:
        sql += f"AND kind IN ({','.join('?' * len(kinds)) or 'NULL'}) "
        args += list(kinds)
    if exclude_kinds:
        sql += f"AND kind NOT IN ({','.join('?' * len(exclude_kinds))}) "
        args += list(exclude_kinds)
    return sql, args


class Jobs:
    def __init__(self, db: Database):
        self.db = db
        self._handlers: dict[str, JobHandler] = {}
        # progress of a long job (re-embedding): on_progress(what, done, total), called on the
        # thread that runs the job; the app forwards it to a progress display
        self.on_progress: Callable[[str, int, int], None] | None = None
        self._last_progress: tuple[str, int, int] | None = None
        db.add_pruner(self._prune)
        db.purge.at_first_purge(self._forget_done_payloads)

    def register(self, kind: str, handler: JobHandler) -> None:
        """Make `handler` run the jobs of `kind` (one handler per kind)."""
        if kind in self._handlers:
            raise ValueError(f"job kind {kind!r} already has a handler")
        self._handlers[kind] = handler

    def handler(self, kind: str) -> JobHandler:
        return self._handlers[kind]

    def enqueue(self, kind: str, payload: dict, *, key: str | None = None) -> int:
        """Persist a job. With `key`, enqueueing the same key again returns the existing job's id."""
        db = self.db
        now = db.clock()
        with db.transaction():
            if key is not None:
                row = db.execute("SELECT id FROM job WHERE key = ?", (key,)).fetchone()
                if row:
                    return row[0]
            db.execute(
                "INSERT INTO job(kind, payload, key, status, created_at, updated_at) VALUES (?,?,?,?,?,?)",
                (kind, to_json(payload), key, "pending", now, now),
            )
            return db.last_insert_rowid()

    def cancel(self, *, key: str | None = None, kind: str | None = None) -> int:
        """Drop pending jobs with this key (or of this kind); returns how many were dropped."""
        if key is None and kind is None:
            raise ValueError("give key= or kind=")
        with self.db.transaction():
            where, args = ["status = 'pending'"], []
            if key is not None:
                where.append("key = ?")
                args.append(key)
            if kind is not None:
                where.append("kind = ?")
                args.append(kind)
            self.db.execute("DELETE FROM job WHERE " + " AND ".join(where), args)
            return self.db.changes()

    def delete(self, ids: Sequence[int]) -> None:
        """Drop these jobs whatever their status (a forget takes the replies waiting to become pages)."""
        for jid in ids:
            self.db.execute("DELETE FROM job WHERE id = ?", (jid,))

    def _prune(self) -> None:
        """Finished jobs go after a week (keyed ones, whose key says the work was done, after 90 days)."""
        now = self.db.clock()
        self.db.execute(
            "DELETE FROM job WHERE status = 'done' AND ((key IS NULL AND updated_at < ?) OR updated_at < ?)",
            (now - 7 * 86400, now - 90 * 86400),
        )

    def _forget_done_payloads(self) -> None:
        """A file from before purging: its finished jobs lose the text they were given."""
        self.db.execute("UPDATE job SET payload = '{}' WHERE status = 'done' AND payload != '{}'")

    def pending(self, *, kinds: Sequence[str] | None = None, exclude_kinds: Sequence[str] | None = None) -> int:
        kind_sql, kind_args = kind_filter(kinds, exclude_kinds)
        return self.db.scalar("SELECT count(*) FROM job WHERE status = 'pending' " + kind_sql, kind_args)

    def list_jobs(self, status: str | None = None, limit: int = 100) -> list[Job]:
        w, args = ("WHERE status = ?", [status]) if status else ("", [])
        rows = self.db.rows(
            f"SELECT id, kind, payload, key, status, attempts, created_at, updated_at, error FROM job "
            f"{w} ORDER BY id DESC LIMIT ?",
            [*args, limit],
        )
        return [Job(r[0], r[1], from_json(r[2], {}), r[3], r[4], r[5], r[6], r[7], r[8]) for r in rows]

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
        kind_sql, kind_args = kind_filter(kinds, exclude_kinds)
        while max_jobs is None or done < max_jobs:
            row = self.db.one(
                "SELECT id, kind, payload, key, attempts FROM job WHERE status = 'pending' "
                + kind_sql
                + (f"AND id NOT IN ({','.join('?' * len(tried))}) " if tried else "")
                + "ORDER BY id LIMIT 1",
                [*kind_args, *tried],
            )
            if not row:
                break
            jid, kind, payload, _key, attempts = row
            tried.add(jid)
            try:
                self._run_one(jid, kind, from_json(payload, {}), allow_llm)
                done += 1
            except _JobAlreadyDone:
                continue
            except LLMDeferred:
                # the LLM is wanted elsewhere: leave this job pending, uncounted, and stop here
                log.info("memory job %s (%s) deferred: the LLM is busy", jid, kind)
                break
            except Exception as exc:
                if not is_storage_full(exc):
                    self._failed(jid, kind, attempts, exc)
                    continue
                # a full disk is not the job's fault: it stays pending, uncounted, and runs again
                # once there is space (nothing it would have written is lost; its inputs are kept)
                log.warning("memory job %s (%s) waits: the disk is full (%s)", jid, kind, exc)
                raise
        return done

    def _run_one(self, jid: int, kind: str, payload: dict, allow_llm: bool) -> None:
        """One job: its handler's slow part, then its writes and its 'done' mark in one transaction."""
        handler = self._handlers.get(kind)
        if handler is None:
            raise ValueError(f"unknown job kind {kind!r}")
        apply = handler(jid, payload, allow_llm=allow_llm)
        db = self.db
        with db.transaction():
            st = db.execute("SELECT status FROM job WHERE id = ?", (jid,)).fetchone()
            if not st or st[0] != "pending":
                raise _JobAlreadyDone()
            if apply is not None:
                apply()
            checkpoint(f"job:{kind}:before_commit")
            # a finished job keeps no text (an add_page payload is the whole exchange): its row stays,
            # so its key still says the work was done
            db.execute(
                "UPDATE job SET status = 'done', payload = '{}', attempts = attempts + 1, updated_at = ?, "
                "error = NULL WHERE id = ?",
                (db.clock(), jid),
            )

    def _failed(self, jid: int, kind: str, attempts: int, exc: Exception) -> None:
        """Count a failed attempt; the last allowed one marks the job failed and says so."""
        log.exception("memory job %s (%s) failed", jid, kind)
        failed = attempts + 1 >= self.db.params.jobs.job_max_attempts
        with self.db.transaction():
            self.db.execute(
                "UPDATE job SET attempts = attempts + 1, error = ?, updated_at = ?, status = ? WHERE id = ?",
                (f"{type(exc).__name__}: {exc}"[:2000], self.db.clock(), "failed" if failed else "pending", jid),
            )
            if failed:
                self.db.emit(
                    "job_failed",
                    None,
                    None,
                    f"memory job {jid} ({kind}) failed",
                    {"job_id": jid, "error": f"{type(exc).__name__}"},
                )

    def report_progress(self, what: str, done: int, total: int) -> None:
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
