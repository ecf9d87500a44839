"""Memory cubes for the CLI and the window: exporting with the app's version and chat model named in the
manifest, the dates a selection is given in, and an import running in the background (checked and
planned first, then written with progress), read from another thread and cancellable.

Cancelling an import undoes what it wrote (nothing of it is kept); an import cut short otherwise (the app
closed, a crash) is finished by the app's memory thread, or by importing the same file again."""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import __version__

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from app.context import AppContext
    from memory_core import MemoryStore
    from memory_core.cubes.export import CubeExport, CubeSelection

SUFFIX = ".mnemocube"
FILE_FILTER = "Memory cubes (*.mnemocube);;All files (*)"


def parse_when(text: str, *, end: bool = False) -> float:
    """A date ("2024-05-01") or a date and time ("2024-05-01T14:30", "2024-05-01 14:30") in local time, as
    Unix seconds. A date alone given as an end (`end`) means the end of that day, so "--until 2024-05-01"
    takes that day too."""
    raw = text.strip()
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"{text!r} is not a date; write it as 2024-05-01 or 2024-05-01T14:30") from None
    if end and len(raw) <= 10:
        when += dt.timedelta(days=1)
    return when.timestamp()


def chat_model_label(settings: Any) -> str:
    """The chat model a cube's manifest names (what made its persona, when an LLM did)."""
    chat = settings.chat
    if chat.backend == "openai":
        return chat.server_model or chat.server_url
    return Path(chat.gguf_path).name if chat.gguf_path else "SmolLM2-135M-Instruct (bundled)"


def export_cube(
    ctx: AppContext,
    store: MemoryStore,
    path: str | Path,
    selection: CubeSelection | None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    extras: Sequence[tuple[str, bytes | Path]] = (),
) -> CubeExport:
    """Write `selection` of memory as a cube, naming this Mnemo and its chat model in the manifest;
    `extras`: optional members (the adapters: app.parametric.adapters.cube_extras)."""
    return store.cubes.export(
        path,
        selection,
        app_version=__version__,
        chat_model_id=chat_model_label(ctx.settings),
        on_progress=on_progress,
        cancelled=cancelled,
        extras=extras,
    )


@dataclass
class CubeImportJob:
    """A cube import the window runs on a worker thread: `run_plan`, then (after the user agreed)
    `run_import`. Its state is read from the UI thread through `snapshot`."""

    path: Path
    phase: str = "checking"  # checking → planned → importing → done | failed | cancelled
    space_name: str | None = None  # import as a new memory space of this name (app.operations.spaces)
    plan: Any = None  # memory_core.cubes.ImportPlan
    record: Any = None  # memory_core.cubes.ImportRecord when written
    error: str | None = None
    what: str = ""
    done: int = 0
    total: int = 0
    started: float = field(default_factory=time.monotonic)
    _cancel: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def progress(self, what: str, done: int, total: int) -> None:
        with self._lock:
            self.what, self.done, self.total = what, done, total

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def finished(self) -> bool:
        return self.phase in ("done", "failed", "cancelled")

    def snapshot(self) -> tuple[str, str, int, int]:
        with self._lock:
            return self.phase, self.what, self.done, self.total


def run_plan(ctx: AppContext, job: CubeImportJob) -> CubeImportJob:
    """Check the cube and say what importing it would do (call on a worker thread; never raises)."""

    def plan(store: MemoryStore) -> None:
        job.plan = store.cubes.plan(job.path)
        job.phase = "planned"

    return _run(ctx, job, plan)


def run_import(ctx: AppContext, job: CubeImportJob) -> CubeImportJob:
    """Import the cube with progress; a cancel undoes what was written (call on a worker thread; never
    raises: the outcome is in `job.phase`, `job.record` and `job.error`)."""

    def write(store: MemoryStore) -> None:
        job.phase = "importing"
        if job.space_name:
            from app.operations.spaces import import_as_space

            job.record, _sid = import_as_space(
                store, job.path, job.space_name, cancelled=lambda: job.cancelled, on_progress=job.progress
            )
        else:
            job.record = store.cubes.import_cube(job.path, cancelled=lambda: job.cancelled, on_progress=job.progress)
        if job.record.status == "done":
            job.phase = "done"
        else:
            job.error = job.record.error or "the import stopped before it was finished"
            job.phase = "failed"

    return _run(ctx, job, write)


def _run(ctx: AppContext, job: CubeImportJob, work: Callable[[MemoryStore], None]) -> CubeImportJob:
    """`work(store)` on a store of its own; what goes wrong is said in the job, never raised."""
    from memory_core.cubes import CubeCancelled, CubeError

    store = None
    try:
        store = ctx.open_store()
        work(store)
    except CubeCancelled:
        job.phase = "cancelled"
    except CubeError as exc:
        job.error, job.phase = str(exc), "failed"
    except Exception as exc:
        job.error, job.phase = _failure(exc), "failed"
    finally:
        if store is not None:
            store.close()
    return job


def _failure(exc: BaseException) -> str:
    from memory_core import is_storage_full

    if is_storage_full(exc):
        return (
            "The disk is full, so the import stopped. What was written is kept and listed under Memory ▸ "
            "Memory imports…; free some space and import the file again to finish, or undo it there."
        )
    return f"{type(exc).__name__}: {exc}"
