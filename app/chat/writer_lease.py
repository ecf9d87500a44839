"""Which process is writing a reply: so crash recovery never takes a live turn for a dead one.

A chat turn marks the rows it is still writing (its user message 'pending', its reply
'streaming') with this process's writer token. The token names a lock file,
`<data dir>/writers/<token>.lock`, that the process holds (an OS lock, dropped however the
process ends) from its first turn to its end. Crash recovery (`app.chat.recovery`) then treats a row
as cut short only when nobody holds its writer's lock: the desktop app, `mnemo chat`, `mnemo
serve` and an MCP server can run on one memory at once, and each recovers only what a dead one
left. Rows from before writer tokens carry none, and count as cut short.
"""

from __future__ import annotations

import atexit
import os
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from app.runtime.instance_lock import InstanceLock

if TYPE_CHECKING:
    from memory_core import MemoryStore

WRITERS_DIR = "writers"

_lock = threading.Lock()
_held: dict[Path, tuple[str, InstanceLock]] = {}  # per writers folder: this process's token and its lock


def writers_dir(db_path: str | os.PathLike) -> Path | None:
    """Where the writer locks of the database at `db_path` live (None for an in-memory one)."""
    if str(db_path) == ":memory:":
        return None
    return Path(db_path).resolve().parent / WRITERS_DIR


def token(store: MemoryStore) -> str | None:
    """This process's writer token for `store`'s database, its lock taken on first use."""
    folder = writers_dir(store.path)
    if folder is None:
        return None
    with _lock:
        held = _held.get(folder)
        if held is None:
            name = uuid.uuid4().hex
            lease = InstanceLock(folder, f"{name}.lock")
            if not lease.acquire():  # a fresh random name: only a folder we cannot write
                return None
            if not _held:
                atexit.register(release)  # a clean exit leaves no lock file behind
            held = _held[folder] = (name, lease)
        return held[0]


def is_alive(store: MemoryStore, writer: str | None) -> bool:
    """Whether the process that marked a row with `writer` still runs (False: it died, or the row
    has no writer). A dead writer's lock file is removed."""
    folder = writers_dir(store.path)
    if folder is None or not writer or not all(c in "0123456789abcdef" for c in writer):
        return False
    with _lock:
        mine = _held.get(folder)
        if mine is not None and mine[0] == writer:
            return True
    path = folder / f"{writer}.lock"
    if not path.exists():
        return False
    probe = InstanceLock(folder, path.name)
    if not probe.acquire():
        return True
    probe.release()
    path.unlink(missing_ok=True)
    return False


def release() -> None:
    """Drop this process's writer locks (at exit; a test that plays a restart in one process). What
    it marked and did not finish then counts as cut short."""
    with _lock:
        for folder, (name, lease) in list(_held.items()):
            lease.release()
            (folder / f"{name}.lock").unlink(missing_ok=True)
        _held.clear()
