"""An import running in the background: its progress, read from another thread, and a way to
cancel it. The desktop app's import dialog runs `run_import` on a worker thread and polls
the job; `mnemo ingest` does the same work in the foreground with a progress bar.

Cancelling stops at the next progress report: the conversation being written is rolled
back (its transaction never commits), the ones written before it are kept, and importing
the same file again finishes the rest (see app.importers.writer).

A file with a dialogue between two named people (LoCoMo) stops after reading, in phase "asking":
the dialog asks who the user is (`speakers`), `answer(name or None)` records it, and `run_import`
again writes the file it has read (app.importers.people).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.context import AppContext


class ImportCancelled(Exception):
    """Raised inside the writer when the user cancels an import."""


DISK_FULL = (
    "The disk is full, so the import stopped. The conversations written before are kept; "
    "free some disk space and import the file again to finish."
)


@dataclass
class ImportJob:
    path: Path
    fmt: str = "auto"
    total_turns: int = 0
    done_turns: int = 0
    note: str = ""  # the conversation being written
    phase: str = "reading"  # reading → (asking →) writing → done | failed | cancelled
    report: Any = None  # app.importers.writer.ImportReport when written
    error: str | None = None
    # "who are you" for a dialogue between named people: asked (phase "asking") when ask_people is set,
    # else such a dialogue is other people's; `me` is the answer once `told`
    ask_people: bool = True
    speakers: list[str] = field(default_factory=list)
    dialogues: int = 0  # how many of the file's conversations are between named people
    me: str | None = None
    told: bool = False
    parsed: Any = None  # the file as read, kept while the user answers
    started: float = field(default_factory=time.monotonic)
    _cancel: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the writer's progress protocol (app.importers.writer.write_all) ---------------------
    def update(self, n: int = 1) -> None:
        if self._cancel.is_set():
            raise ImportCancelled("import cancelled")
        with self._lock:
            self.done_turns = min(self.total_turns, self.done_turns + n) if self.total_turns else self.done_turns + n

    def answer(self, me: str | None) -> None:
        """Who the user is in the file's dialogues: one of `speakers`, or None for other people."""
        if me is not None and me not in self.speakers:
            raise ValueError(f"{me!r} is not one of the speakers {self.speakers}")
        self.me, self.told = me, True

    def cancel(self) -> None:
        self._cancel.set()
        with self._lock:
            if self.phase == "asking":  # nothing is running and nothing was written
                self.phase, self.parsed = "cancelled", None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def finished(self) -> bool:
        return self.phase in ("done", "failed", "cancelled")

    def snapshot(self) -> tuple[str, int, int, str]:
        with self._lock:
            return self.phase, self.done_turns, self.total_turns, self.note


def run_import(ctx: AppContext, job: ImportJob) -> ImportJob:
    """Parse `job.path` and write it into the profile's memory store (call on a worker thread).
    Never raises: the outcome is in `job.phase`, `job.report` and `job.error`."""
    from app.importers import ImportFatalError, load, write_all
    from app.importers.people import assign, dialogues, speaker_names

    store = None
    try:
        parsed = job.parsed if job.parsed is not None else load(job.path, job.fmt)
        named = dialogues(parsed)
        if named:
            if job.ask_people and not job.told:
                with job._lock:  # a cancel while reading ends here
                    job.speakers, job.dialogues = speaker_names(named), len(named)
                    job.parsed, job.phase = (None, "cancelled") if job.cancelled else (parsed, "asking")
                return job
            assign(named, job.me if job.told else None, what=job.path.name)
        job.parsed = None
        job.total_turns = sum(c.n_turns for c in parsed.conversations)
        job.report = None
        store = ctx.open_store()
        if store.is_paused():
            job.error = (
                "Memory is paused, so the imported conversations would get no memory pages. "
                "Resume memory (Memory menu), then import."
            )
            job.phase = "failed"
            return job
        job.phase = "writing"
        job.report = write_all(store, parsed, path=str(job.path), progress=job)
        job.phase = "done"
    except ImportFatalError as exc:
        job.error, job.phase = str(exc), "failed"
    except ImportCancelled:
        job.phase = "cancelled"
    except Exception as exc:
        from memory_core import is_storage_full

        if is_storage_full(exc):
            job.error = DISK_FULL
        else:
            job.error = f"{type(exc).__name__}: {exc}"
        job.phase = "failed"
    finally:
        if store is not None:
            store.close()
    return job
