"""Automatic copies of the memory database, so a damaged disk or file never takes all of it.

Once a day (a minute into the first start after 24 h, while chat is idle) the memory thread
copies the database into `<data dir>/backups/mnemo-YYYYmmdd-HHMMSS.sqlite3` with SQLite's online
backup; the newest `KEEP` copies are kept. `mnemo memory backup` makes one now, `mnemo memory
backups` lists them and `mnemo memory restore FILE` (with Mnemo closed) or Memory ▸ Restore from a
backup… puts one back; the current file is kept aside. Backups are the user's alone (0600).

A backup copied before a forget still holds what was forgotten. Mnemo does not rewrite it (see
docs/decisions/0017-backups-that-hold-forgotten-memory.md): after a forget the user is told which
backups may still hold it (`holding_forgotten`: made while it existed, by the spans of time the memory
records, memory_core.storage.purge) and offered to delete them (`drop_forgotten`), a new backup being made at
once so that one is always there.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.private_files import ensure_private_dir, make_private_file
from app.settings import Paths
from memory_core import check_file
from memory_core.storage.vecindex import drop_shared

if TYPE_CHECKING:
    from collections.abc import Callable

    from memory_core import MemoryStore

BACKUP_DIR = "backups"
PREFIX = "mnemo-"
SUFFIX = ".sqlite3"
KEEP = 2
EVERY_S = 24 * 3600.0
START_DELAY_S = 60.0  # the app makes it a minute after start, when chat is idle


def backup_dir(paths: Paths) -> Path:
    return paths.data_dir / BACKUP_DIR


def list_backups(paths: Paths) -> list[Path]:
    """Backups made by Mnemo, newest first."""
    d = backup_dir(paths)
    if not d.is_dir():
        return []
    found = [p for p in d.iterdir() if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX)]
    return sorted(found, key=lambda p: p.name, reverse=True)


def due(paths: Paths, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    newest = list_backups(paths)
    return not newest or now - newest[0].stat().st_mtime >= EVERY_S


def make_backup(
    store: MemoryStore,
    paths: Paths,
    *,
    now: float | None = None,
    keep: int = KEEP,
    on_progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path:
    """Copy the database now; keep the newest `keep` backups (older ones are deleted)."""
    stamp = dt.datetime.fromtimestamp(time.time() if now is None else now).strftime("%Y%m%d-%H%M%S")
    ensure_private_dir(backup_dir(paths))
    for stale in backup_dir(paths).glob(f".{PREFIX}*.partial"):  # left by a killed process
        stale.unlink(missing_ok=True)
    path = store.backup(backup_dir(paths) / f"{PREFIX}{stamp}{SUFFIX}", on_progress=on_progress, cancelled=cancelled)
    for old in list_backups(paths)[max(1, keep) :]:
        old.unlink(missing_ok=True)
    return path


def maybe_backup(
    store: MemoryStore,
    paths: Paths,
    *,
    keep: int = KEEP,
    now: float | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path | None:
    """The daily backup, when one is due and backups are on (`keep` > 0; called by the memory
    thread at start). `cancelled()` (the app closing) stops it between steps."""
    if keep <= 0 or not due(paths, now):
        return None
    return make_backup(store, paths, now=now, keep=keep, cancelled=cancelled)


def checkpoint_and_close(db: Path) -> None:
    """Fold the database's write-ahead log into the file itself (no connection may be open). A
    damaged file is left as it is."""
    import apsw

    try:
        conn = apsw.Connection(str(db))
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
    except apsw.Error:
        pass


def _keep_aside(db: Path, aside: Path) -> None:
    """`aside` becomes a second name of `db` (a copy where hard links are not allowed)."""
    try:
        os.link(db, aside)
    except OSError:
        shutil.copyfile(db, aside)


def _made(backup: Path) -> float:
    """When a backup's copy was finished: what it holds is the memory as it was then."""
    return backup.stat().st_mtime


def holding_forgotten(paths: Paths, spans: list[tuple[float, float]]) -> list[Path]:
    """The backups, newest first, made while memory since forgotten existed (`spans`: from
    `store.db.purge.spans()`): each may still hold some of it."""
    out = []
    for backup in list_backups(paths):
        try:
            made = _made(backup)
        except OSError:  # deleted meanwhile
            continue
        if any(start < made < end for start, end in spans):
            out.append(backup)
    return out


def drop_forgotten(store: MemoryStore, paths: Paths, *, keep: int = KEEP) -> tuple[list[Path], Path | None]:
    """Delete the backups that may still hold forgotten memory; first, when backups are on (`keep` >
    0), make a new one of the memory as it is now, so a backup is left whatever fails. Returns the
    deleted backups and the new one."""
    stale = holding_forgotten(paths, store.db.purge.spans())
    if not stale:
        return [], None
    fresh = make_backup(store, paths, keep=max(keep, 1) + len(stale)) if keep > 0 else None
    for backup in stale:
        if backup != fresh:  # (one made in the same second has just been replaced by the new one)
            backup.unlink(missing_ok=True)
    if fresh is not None:
        for old in list_backups(paths)[max(1, keep) :]:  # the usual number kept
            old.unlink(missing_ok=True)
    return stale, fresh


def describe_holding(backups: list[Path]) -> str:
    """'2 backups (of 2024-05-01 10:00 and 2024-05-02 10:00)'."""
    n = len(backups)
    return f"{n} backup{'s' if n != 1 else ''} (of {', '.join(made_at(b) for b in reversed(backups))})"


class UnusableBackupError(ValueError):
    """The chosen file is not a Mnemo memory, or is damaged: nothing was changed."""


def check(backup: Path) -> None:
    """Raise UnusableBackupError unless `backup` is a sound Mnemo memory database (read-only;
    SQLite's quick_check reads the whole file, so seconds for a big one)."""
    problem = check_file(backup)
    if problem is not None:
        raise UnusableBackupError(problem)


def made_at(backup: Path) -> str:
    """When a backup was made, for people, to the minute: the time in a Mnemo backup's name (it
    survives copying the file), else the file's modification time."""
    backup = Path(backup)
    stamp = backup.name[len(PREFIX) : -len(SUFFIX)] if backup.name.startswith(PREFIX) else ""
    try:
        return dt.datetime.strptime(stamp, "%Y%m%d-%H%M%S").strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(backup.stat().st_mtime))


def restore(paths: Paths, backup: Path, *, now: float | None = None) -> Path:
    """Put `backup` back as the memory database; every connection to the current one must be
    closed. A file that is not a sound Mnemo memory is refused before anything changes. The
    current database (its write-ahead log folded in) is kept aside, never deleted; returns where
    it went."""
    backup = Path(backup)
    if not backup.is_file():
        raise FileNotFoundError(f"no such backup: {backup}")
    check(backup)
    db = paths.db_file
    stamp = dt.datetime.fromtimestamp(time.time() if now is None else now).strftime("%Y%m%d-%H%M%S")
    aside = db.with_name(f"{db.name}.before-restore-{stamp}")
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    tmp = db.with_name(f".{db.name}.restoring")
    shutil.copyfile(backup, tmp)  # copy first: a failure here leaves everything as it was
    make_private_file(tmp)
    # Every step below leaves a whole memory in place whenever the process dies: the current file
    # first takes in its write-ahead log (a crash may have left one), so the file alone is complete;
    # it is then kept aside under a second name (a hard link) while still in place, and the backup
    # replaces it in one rename. Never a moment without a database, or with another file's log.
    if db.exists():
        checkpoint_and_close(db)
        _keep_aside(db, aside)
    for extra in ("-wal", "-shm"):  # gone after a checkpoint; a damaged file's are kept with it
        side = db.with_name(db.name + extra)
        if side.exists():
            _keep_aside(side, aside.with_name(aside.name + extra))
            side.unlink()
    os.replace(tmp, db)
    drop_shared(str(db))  # this process's cached page vectors belong to the file that was replaced
    return aside
