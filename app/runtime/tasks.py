"""The one background-task mechanism: a worker thread that runs tasks on a resource of its own.

Every slow call (the chat model, the embedder, a large query) runs on a `TaskQueue`, never on the
thread of a user interface. A queue owns one thread and one resource that only that thread
touches, usually a `MemoryStore` connection (apsw connections are per thread; llama.cpp is not
thread-safe), opened at the first need. Tasks are `fn(resource)` callables run one at a time, by
priority and then in the order given; each returns a `Future`, and its outcome goes to
`on_done(value)` / `on_error(exc)` through `deliver`: called at once on the worker thread by
default, posted to the UI thread by the Qt adapter (`ui.tasks`). A task may carry `wanted()`,
asked just before it runs: a request the user no longer waits for (they scrolled on) is skipped
and `on_skip()` is delivered instead. `on_idle(resource)` runs when no task came for `idle_s`,
or at once after `wake()`: the memory scheduler's polling rounds.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Callback = Callable[[], None]
Deliver = Callable[[Callback], None]
_FIRST, _LAST = float("-inf"), float("inf")  # where stop() puts its marker: before or after the tasks queued
_WAKE_PRIORITY = 1_000_000  # after every task
_WAKE = object()


def call_now(callback: Callback) -> None:
    """The default `deliver`: run the callback on the worker thread."""
    callback()


@dataclass(eq=False)
class _Task:
    fn: Callable[[Any], Any]
    future: Future
    on_done: Callable[[Any], None] | None = None
    on_error: Callable[[BaseException], None] | None = None
    wanted: Callable[[], bool] | None = None
    on_skip: Callable[[], None] | None = None
    label: str = ""


class TaskQueue:
    """One worker thread running `fn(resource)` tasks; see the module docstring."""

    def __init__(
        self,
        name: str,
        *,
        open_resource: Callable[[], Any] | None = None,
        close_resource: Callable[[Any], None] | None = None,
        deliver: Deliver = call_now,
        on_idle: Callable[[Any], None] | None = None,
        idle_s: float | None = None,
    ):
        """`open_resource()` makes the thread's resource (an exception: tried again at the next need; it
        may return None for "none"); `close_resource(resource)` ends it (default: its `close()`)."""
        self.name = name
        self._open_resource = open_resource
        self._close_resource = close_resource or _close
        self._deliver = deliver
        self._on_idle = on_idle
        self._idle_s = idle_s
        self._queue: queue.PriorityQueue = queue.PriorityQueue()
        self._counter = itertools.count()
        self._thread: threading.Thread | None = None
        self._opened = open_resource is None
        self._stopping = False
        self._lock = threading.Lock()
        self._wake_queued = False
        self.resource: Any = None
        self.timings: list[tuple[str, float]] = []  # (label, seconds) of the last tasks (diagnostics)

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None and not self._stopping:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0, *, drop_pending: bool = False) -> None:
        """End the thread once the task running (and, unless `drop_pending`, those queued) is done;
        then the resource is closed. Waits up to `timeout`. Later tasks never run."""
        if self._stopping:
            return
        self._stopping = True  # submit() refuses new tasks from now on
        self._put(_FIRST if drop_pending else _LAST, None)
        self.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after `stop`)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stopping

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- API ------------------------------------------------------------------------
    def submit(
        self,
        fn: Callable[[Any], Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        *,
        wanted: Callable[[], bool] | None = None,
        on_skip: Callable[[], None] | None = None,
        priority: int = 0,
        label: str = "",
    ) -> Future:
        """Run `fn(resource)` on the worker thread (lower `priority` first); the callbacks go through `deliver`."""
        future: Future = Future()
        if self._stopping:
            future.cancel()
            return future
        self.start()
        task = _Task(fn, future, on_done, on_error, wanted, on_skip, label or getattr(fn, "__name__", "task"))
        self._put(priority, task)
        return future

    def wake(self) -> None:
        """Run `on_idle` as soon as the tasks queued now are done (once, however often it is asked)."""
        with self._lock:
            if self._wake_queued:
                return
            self._wake_queued = True
        self._put(_WAKE_PRIORITY, _WAKE)

    def pending(self) -> bool:
        """Something is queued (a chat task waiting: an LLM memory job gives way)."""
        return not self._queue.empty()

    def _put(self, priority: float, item: Any) -> None:
        self._queue.put((priority, next(self._counter), item))

    # -- the worker thread ----------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                try:
                    _, _, item = self._queue.get(timeout=self._idle_s)
                except queue.Empty:
                    item = _WAKE
                if item is None:
                    break
                if item is _WAKE:
                    with self._lock:
                        self._wake_queued = False
                    self._idle()
                else:
                    self._run_task(item)
        finally:
            resource, self.resource = self.resource, None
            if resource is not None:
                try:
                    self._close_resource(resource)
                except Exception:  # closing must never raise out of the thread
                    log.exception("closing the resource of %s failed", self.name)

    def _ensure_open(self) -> Any:
        if not self._opened:
            assert self._open_resource is not None  # _opened starts True when there is none to open
            self.resource = self._open_resource()
            self._opened = True
        return self.resource

    def _idle(self) -> None:
        if self._on_idle is None:
            return
        try:
            self._on_idle(self._ensure_open())
        except Exception:  # a broken round must not end the thread
            log.exception("idle work on %s failed", self.name)

    def _run_task(self, task: _Task) -> None:
        if not task.future.set_running_or_notify_cancel():
            return
        if task.wanted is not None and not task.wanted():
            task.future.set_result(None)
            if task.on_skip is not None:
                self._deliver(task.on_skip)
            return
        t0 = time.perf_counter()
        try:
            value = task.fn(self._ensure_open())
        except BaseException as exc:
            log.debug("task %s on %s failed: %s", task.label, self.name, exc)
            task.future.set_exception(exc)
            if task.on_error is not None:
                self._deliver(_bind(task.on_error, exc))
        else:
            task.future.set_result(value)
            if task.on_done is not None:
                self._deliver(_bind(task.on_done, value))
        self.timings.append((task.label, time.perf_counter() - t0))
        del self.timings[:-200]


def _bind(callback: Callable[[Any], None], value: Any) -> Callback:
    return lambda: callback(value)


def _close(resource: Any) -> None:
    close = getattr(resource, "close", None)
    if close is not None:
        close()
