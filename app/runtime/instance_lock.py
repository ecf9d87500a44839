"""Whether a Mnemo window runs on a memory, for the CLI commands that must not run beside one
(`mnemo memory restore` swaps the database file).

The window holds an exclusive OS lock on `<data dir>/mnemo.lock` for its whole life (flock on
POSIX, msvcrt.locking on Windows). The OS drops it when the process ends, however it ends, so a
crash never leaves a stale lock behind. The window's single-instance hand-over is separate (a Qt
local socket, ui/single_instance.py): this module stays Qt-free for the CLI.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from app.private_files import PRIVATE_FILE, ensure_private_dir, private_fd

LOCK_NAME = "mnemo.lock"


class InstanceLock:
    def __init__(self, data_dir: Path, name: str = LOCK_NAME):
        self.path = Path(data_dir) / name
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another process (or handle) holds it."""
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            private_fd(fd)  # a lock file an older Mnemo made 0644
            _lock(fd)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            try:
                _unlock(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None


def app_is_running(data_dir: Path) -> bool:
    """True while a Mnemo window holds the memory in `data_dir`."""
    probe = InstanceLock(data_dir)
    if probe.acquire():
        probe.release()
        return False
    return True


def held_message(data_dir: Path, why: str) -> str:
    """The one line a CLI command that must not run beside the window says (`why`: what it would do)."""
    lock = Path(data_dir) / LOCK_NAME
    return f"Mnemo is open on this memory (its window holds {lock}): close its window first ({why})"


if sys.platform == "win32":  # pragma: no cover - Windows
    import msvcrt

    def _lock(fd: int) -> None:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
