"""The inspector's database worker: one thread, one store connection, results delivered as Qt signals.

The UI thread never touches SQLite. It submits `fn(store) -> result` callables; the worker
thread runs them in order on its own `MemoryStore` (opened lazily with `ctx.open_store()`,
one apsw connection per thread) and hands `(callback, result)` back to the UI thread through
a queued Qt signal. Callbacks therefore always run in the UI thread.

Requests can carry a `wanted()` predicate: a request that is no longer wanted when its turn
comes (the user scrolled on, re-sorted, closed the panel) is skipped, so a burst of scrolling
never builds a queue of stale queries.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Signal, Slot

log = logging.getLogger(__name__)

SWITCH_INTERVAL_S = 0.001


@dataclass
class _Request:
    fn: Callable[[Any], Any]
    on_done: Callable[[Any], None] | None
    on_error: Callable[[BaseException], None] | None
    wanted: Callable[[], bool] | None
    on_skip: Callable[[], None] | None
    label: str


class _Relay(QObject):
    """Lives in the UI thread; the worker thread emits `done`, Qt queues it to the UI thread."""

    done = Signal(object)

    def __init__(self, owner: StoreWorker):
        super().__init__()
        self._owner = owner
        self.done.connect(self._dispatch)

    @Slot(object)
    def _dispatch(self, item) -> None:
        self._owner._deliver(item)


class StoreWorker:
    """A single worker thread owning one MemoryStore connection."""

    def __init__(self, open_store: Callable[[], Any], *, name: str = "mnemo-inspector-db"):
        self._open_store = open_store
        self._name = name
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._relay = _Relay(self)
        self._thread: threading.Thread | None = None
        self._store = None
        self._stopped = False
        self._submitted = 0
        self._finished = 0  # delivered (or skipped) in the UI thread
        self._lock = threading.Lock()
        self.on_error: Callable[[str, BaseException], None] | None = None  # default error sink (UI thread)
        self.busy_changed: Callable[[bool], None] | None = None
        self.last_error: str | None = None
        self.timings: list[tuple[str, float]] = []  # (label, seconds) of the last requests (diagnostics)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._thread is None and not self._stopped:
            # A Python-busy worker thread makes the UI thread wait for the GIL at every Qt → Python
            # call (data(), paint...), up to the switch interval each time (5 ms by default): keep
            # that wait short so the UI stays fluid while the worker runs.
            if sys.getswitchinterval() > SWITCH_INTERVAL_S:
                sys.setswitchinterval(SWITCH_INTERVAL_S)
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the request in progress, drop the rest, close the store."""
        if self._stopped:
            return
        self._stopped = True
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        self._queue.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    @property
    def stopped(self) -> bool:
        return self._stopped

    # ------------------------------------------------------------------ API (UI thread)
    def submit(
        self,
        fn: Callable[[Any], Any],
        on_done: Callable[[Any], None] | None = None,
        *,
        on_error: Callable[[BaseException], None] | None = None,
        wanted: Callable[[], bool] | None = None,
        on_skip: Callable[[], None] | None = None,
        label: str = "",
    ) -> None:
        """Run `fn(store)` in the worker thread; `on_done(result)` / `on_error(exc)` run in the UI thread.

        `wanted()` is checked (in the worker thread) just before running: when it returns False the
        request is skipped and `on_skip()` runs in the UI thread instead.
        """
        if self._stopped:
            return
        self.start()
        with self._lock:
            self._submitted += 1
            was_idle = self._submitted - self._finished == 1
        if was_idle and self.busy_changed is not None:
            self.busy_changed(True)
        self._queue.put(_Request(fn, on_done, on_error, wanted, on_skip, label or getattr(fn, "__name__", "request")))

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._submitted == self._finished

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Process Qt events until every submitted request was delivered (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        app = QCoreApplication.instance()
        while time.monotonic() < deadline:
            if app is not None:
                app.processEvents()
            if self.idle:
                # callbacks may have submitted follow-up requests: settle once more
                if app is not None:
                    app.processEvents()
                if self.idle:
                    return True
            time.sleep(0.002)
        return False

    # ------------------------------------------------------------------ worker thread
    def _run(self) -> None:
        while True:
            req = self._queue.get()
            if req is None:
                break
            if self._stopped:
                continue
            ok, result = True, None
            skipped = False
            t0 = time.perf_counter()
            try:
                if req.wanted is not None and not req.wanted():
                    skipped = True
                else:
                    if self._store is None:
                        self._store = self._open_store()
                    result = req.fn(self._store)
            except BaseException as exc:
                ok, result = False, exc
                log.warning("inspector request %s failed: %s", req.label, exc, exc_info=exc)
            dt = time.perf_counter() - t0
            if not skipped:
                self.timings.append((req.label, dt))
                del self.timings[:-200]
            try:
                self._relay.done.emit((req, ok, result, skipped))
            except RuntimeError:  # the relay was deleted (application shutting down)
                break
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception:  # pragma: no cover - closing must never raise into Qt
                log.exception("closing the inspector's store failed")

    # ------------------------------------------------------------------ delivery (UI thread)
    def _deliver(self, item) -> None:
        req, ok, result, skipped = item
        try:
            if self._stopped:
                return
            if skipped:
                if req.on_skip is not None:
                    req.on_skip()
                return
            if ok:
                if req.on_done is not None:
                    req.on_done(result)
            else:
                self.last_error = f"{type(result).__name__}: {result}"
                if req.on_error is not None:
                    req.on_error(result)
                elif self.on_error is not None:
                    self.on_error(req.label, result)
        except RuntimeError as exc:
            # a callback touched a widget that Qt already deleted (panel closing): ignore
            log.debug("inspector callback %s skipped: %s", req.label, exc)
        finally:
            with self._lock:
                self._finished += 1
                now_idle = self._submitted == self._finished
            if now_idle and self.busy_changed is not None:
                try:
                    self.busy_changed(False)
                except RuntimeError:
                    pass
