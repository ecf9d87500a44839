"""The Qt side of `app.runtime.tasks`: callbacks of background tasks run on the UI thread.

`MainThread` is a `deliver` for `app.runtime.tasks.TaskQueue`: it posts each callback through a queued
signal to the thread it lives in (the UI thread), so a callback may touch widgets. `UiWorker`
is a task queue (with a store connection of its own, or none) whose callbacks run there, counting
what is in flight (`busy_changed`, `wait_idle`) and giving failures without an `on_error` to one sink.

`UiWorker` is the one way the UI runs work in the background: the window's database reads and edits
(ui.bridge's `Backend.db`), the memory inspector (ui.inspector: `panel.worker`), the import and
memory-cube dialogs each own one, so the UI thread never waits on SQLite, the embedder or the model.
(The chat model's own thread is the scheduler's, reached through `Backend.submit`.) A task that wants a
store connection of its own for one call, opened and closed around it, wraps its function in
`on_own_store`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Qt, Signal, Slot

from app.runtime.tasks import Callback, TaskQueue

log = logging.getLogger(__name__)


class MainThread(QObject):
    """Runs callbacks on the thread this object lives in (create it on the UI thread)."""

    _call = Signal(object)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._call.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def __call__(self, callback: Callback) -> None:
        try:
            self._call.emit(callback)
        except RuntimeError:  # the QObject is gone: the application is closing
            pass

    @Slot(object)
    def _run(self, callback: Callback) -> None:
        callback()


class UiWorker:
    """A `TaskQueue` whose callbacks run on the UI thread; its tasks get the store connection `open_store()`
    made on the worker thread (None: tasks get None and open what they need)."""

    def __init__(self, open_store: Callable[[], Any] | None, *, name: str):
        self._main = MainThread()
        self.tasks = TaskQueue(name, open_resource=open_store, deliver=self._main)
        self._deliver_late = False  # stopped with deliver_late: callbacks still run
        self._lock = threading.Lock()
        self._submitted = 0
        self._finished = 0  # delivered (or skipped) on the UI thread
        self.on_error: Callable[[str, BaseException], None] | None = None  # failures without their own on_error
        self.busy_changed: Callable[[bool], None] | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        self.tasks.start()

    def stop(self, timeout: float = 10.0, *, drop_pending: bool = True, deliver_late: bool = False) -> None:
        """End the worker after the task in progress (and, unless `drop_pending`, the queued ones);
        callbacks due after this are not run: their widgets may be gone. With `deliver_late` they are
        (a dialog that closes while its task finishes, whose outcome the window still follows)."""
        self._deliver_late = deliver_late
        self.tasks.stop(timeout, drop_pending=drop_pending)

    @property
    def stopped(self) -> bool:
        return self.tasks.stopped

    @property
    def timings(self) -> list[tuple[str, float]]:
        return self.tasks.timings

    def submit(
        self,
        fn: Callable[[Any], Any],
        on_done: Callable[[Any], None] | None = None,
        *,
        on_error: Callable[[BaseException], None] | None = None,
        wanted: Callable[[], bool] | None = None,
        on_skip: Callable[[], None] | None = None,
        label: str = "",
    ) -> Future:
        """Run `fn(store)` on the worker; `on_done(result)` / `on_error(exc)` / `on_skip()` on the UI thread."""
        label = label or getattr(fn, "__name__", "request")
        if self.stopped:
            return self.tasks.submit(fn)  # refused: a cancelled future
        with self._lock:
            self._submitted += 1
            was_idle = self._submitted - self._finished == 1
        if was_idle and self.busy_changed is not None:
            self.busy_changed(True)

        def done(value: Any) -> None:
            self._settle(label, on_done, value)

        def failed(exc: BaseException) -> None:
            log.warning("background request %s failed: %s", label, exc, exc_info=exc)
            if not self.stopped:
                self.last_error = f"{type(exc).__name__}: {exc}"
            if on_error is not None:
                self._settle(label, on_error, exc)
            else:
                self._settle(label, self._sink(label), exc)

        def skipped() -> None:
            self._settle(label, (lambda _: on_skip()) if on_skip is not None else None, None)

        return self.tasks.submit(fn, done, failed, wanted=wanted, on_skip=skipped, label=label)

    def _sink(self, label: str) -> Callable[[BaseException], None]:
        def sink(exc: BaseException) -> None:
            if self.on_error is not None:
                self.on_error(label, exc)
            else:
                log.error("background call %s failed: %s", label, exc)

        return sink

    def _settle(self, label: str, callback: Callable[[Any], None] | None, value: Any) -> None:
        """On the UI thread: run the callback unless the worker was stopped, then count it done."""
        try:
            if callback is not None and (not self.stopped or self._deliver_late):
                callback(value)
        except RuntimeError as exc:  # a callback touched a widget Qt already deleted (a panel closing)
            log.debug("callback of %s skipped: %s", label, exc)
        finally:
            with self._lock:
                self._finished += 1
                now_idle = self._submitted == self._finished
            if now_idle and self.busy_changed is not None:
                try:
                    self.busy_changed(False)
                except RuntimeError:
                    pass

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._submitted == self._finished

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Process Qt events until every request was delivered (tests, benchmarks, a panel closing)."""
        deadline = time.monotonic() + timeout
        app = QCoreApplication.instance()
        while time.monotonic() < deadline:
            if app is not None:
                app.processEvents()
            if self.idle:
                if app is not None:  # callbacks may have submitted follow-up requests: settle once more
                    app.processEvents()
                if self.idle:
                    return True
            time.sleep(0.002)
        return False


def on_own_store(open_store: Callable[[], Any], fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A task for a `UiWorker` without a store: `fn(store)` on a connection opened for it and closed
    after (a dialog that reads or writes memory now and then holds no connection in between)."""

    def task(_resource: Any) -> Any:
        store = open_store()
        try:
            return fn(store)
        finally:
            store.close()

    task.__name__ = getattr(fn, "__name__", "task")
    return task
