"""One import of a file into a memory at a time: the claim a second, simultaneous import of the
same file fails on at once, before it embeds anything.

The claim is an OS lock on `<data dir>/.import-<key>.lock`, the key a hash of the conversations
being written (so the export's .zip and its extracted conversations.json are the same import). An
OS lock rather than a row in the database, because the OS drops it when the process ends however
it ends: a crashed import leaves no stale claim to block the import that finishes its work. Two
overlapping but different files can still run side by side; the writer re-checks each conversation
inside its transaction (app.importers.writer), so neither fails there either.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.importers.base import ImportFatalError, ParsedConversation
from app.runtime.instance_lock import InstanceLock

if TYPE_CHECKING:
    from memory_core import MemoryStore


class ImportBusyError(ImportFatalError):
    """The same file is being imported into this memory by another window, command or thread."""

    exit_code = 1  # not bad input: it works once the other import is done


def claim_key(conversations: Sequence[ParsedConversation]) -> str:
    ids = sorted(f"{c.source}\x1f{c.external_id}" for c in conversations)
    return hashlib.sha256("\x1e".join(ids).encode("utf-8")).hexdigest()[:24]


class _ClaimLock(InstanceLock):
    """The instance lock's OS lock, on a file removed when the import ends (none pile up)."""

    def acquire(self) -> bool:
        while super().acquire():
            if self._fd is not None and _same_file(self._fd, self.path):
                return True
            super().release()  # the file of an import that just ended and removed it: take the new one
        return False

    def release(self) -> None:
        if self._fd is not None and sys.platform != "win32":  # Windows cannot remove an open file
            self.path.unlink(missing_ok=True)
        super().release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def import_claim(store: MemoryStore, conversations: Sequence[ParsedConversation], name: str) -> Iterator[None]:
    """Hold the claim on importing `conversations` into `store` for the block; ImportBusyError at once
    when another import holds it. An in-memory store (tests, evaluation) needs none."""
    db_path = getattr(store, "path", ":memory:")
    if not conversations or db_path == ":memory:":
        yield
        return
    lock = _ClaimLock(Path(db_path).parent, f".import-{claim_key(conversations)}.lock")
    if not lock.acquire():
        raise ImportBusyError(
            f"{name}: already being imported into this memory by another Mnemo window or command; "
            f"wait for it to finish (importing it again then adds only what is missing)"
        )
    try:
        yield
    finally:
        lock.release()
