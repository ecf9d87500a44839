"""Background work: one thread owns the LLM, another runs LLM-free memory jobs.

llama.cpp is not thread-safe, so every use of the chat model — chat turns and the
memory-update calls that ask it for JSON — runs on the single LLM thread. Chat tasks
have priority; memory jobs that need the LLM run there only after it has been idle
for `idle_s` (so they never delay a reply and disturb the KV cache only between
turns), and a chat task (or `stop()`) that arrives while one is generating cancels it
within a token: the job raises `memory_core.LLMDeferred`, stays pending and runs again
at the next idle moment. LLM-free memory steps (embedding a page, STM → MTM paging, heat) run on the
memory thread with their own database connection; it starts no job while a chat task waits for the LLM
thread (the reply comes first), and yields between jobs while one runs. A chat task that has to wait is
told so (`memory_job_running`, `submit(on_start=…)`), so the window can say "waiting for memory work"
instead of a silent "processing". Memory events and job counts are reported through callbacks so a UI
can show progress and "memory updated".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from app.runtime.tasks import TaskQueue
from memory_core import LLMDeferred
from models.chat import CancelToken

if TYPE_CHECKING:
    from memory_core import MemoryStore
    from models.chat import ChatModel

log = logging.getLogger(__name__)

PRIORITY_CHAT = 0
PRIORITY_NORMAL = 5
# memory job kinds that ask the LLM for JSON; the others are LLM-free
LLM_JOB_KINDS = ("promote_segment", "title_segment")


class Scheduler:
    def __init__(
        self,
        *,
        open_store: Callable[..., Any],
        get_model: Callable[[], Any] | None,
        on_event: Callable[[Any], None] | None = None,
        on_jobs: Callable[[int], None] | None = None,
        on_progress: Callable[[str, int, int], None] | None = None,
        idle_work: Callable[[Any], Any] | None = None,
        idle_work_delay_s: float = 60.0,
        idle_s: float = 2.0,
        poll_s: float = 1.0,
        model_titles: Callable[[Any], bool] | None = None,
    ) -> None:
        """`open_store(llm=None)` opens a new MemoryStore connection; `get_model()` loads the chat model;
        `model_titles(model)` says whether that model writes topic titles (app.topic_titles; None: it does not)."""
        self._open_store = open_store
        self._get_model = get_model
        self.model_titles = model_titles
        self.on_event = on_event
        self.on_jobs = on_jobs
        self.on_progress = on_progress  # (what, done, total) of a long memory job (re-embedding)
        # run once by the memory thread, idle_work_delay_s after start when chat is idle (the daily
        # backup): never in the way of the first minutes of use, nor of a reply
        self.idle_work = idle_work
        self.idle_work_delay_s = idle_work_delay_s
        self.idle_s = idle_s
        self.poll_s = poll_s
        # the two threads (app.runtime.tasks): the LLM one polls for idle LLM jobs, the memory one for jobs
        self._llm = TaskQueue(
            "mnemo-llm", open_resource=self._open_llm_store, on_idle=self._idle_llm_work, idle_s=poll_s
        )
        self._memory = TaskQueue(
            "mnemo-memory", open_resource=self._open_memory_store, on_idle=self._memory_round, idle_s=poll_s
        )
        self._stop = threading.Event()
        self._started_at = 0.0
        self._last_chat = 0.0
        self._busy_chat = False
        self.model: ChatModel | None = None
        self.model_error: Exception | None = None
        self.last_error: str | None = None
        self._job_cancel: CancelToken | None = None  # the LLM memory job generating now, if any
        self.jobs_deferred = 0  # how many were cut short for a chat turn or a stop
        self._chat_waiting = 0  # chat tasks submitted that have not begun: memory work waits for them
        self._waiting_lock = threading.Lock()

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        self._started_at = time.monotonic()
        self._llm.start()
        self._memory.start()
        self._llm.submit(lambda store: None, label="open")  # the LLM thread's store, at once
        self._memory.wake()  # the memory thread's store and page index, at once

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._preempt_job()
        self._llm.stop(0, drop_pending=True)
        self._memory.stop(0, drop_pending=True)
        self._llm.join(timeout)
        self._memory.join(timeout)

    @property
    def llm_store(self) -> MemoryStore | None:
        """The LLM thread's store (None before it opened, or when it could not be opened)."""
        return self._llm.resource

    # -- API ------------------------------------------------------------------------
    def submit(
        self, fn: Callable[[Any, Any], Any], *, priority: int = PRIORITY_CHAT, on_start: Callable[[], Any] | None = None
    ) -> Future:
        """Run `fn(store, model)` on the LLM thread; chat tasks (priority 0) go first. `on_start()` is
        called on the LLM thread when the task begins (before the model loads, if it must), so a caller
        can tell waiting for the thread from waiting for the model."""
        chat = priority <= PRIORITY_CHAT
        if chat:
            self._waiting(+1)

        def task(store: MemoryStore | None) -> Any:
            if chat:
                self._waiting(-1)
            if on_start is not None:
                on_start()
            return self._chat_task(lambda: fn(store, self._model()))

        future = self._llm.submit(task, priority=priority)
        if chat:
            self._preempt_job()
            future.add_done_callback(lambda f: self._waiting(-1) if f.cancelled() else None)
        return future

    def _waiting(self, step: int) -> None:
        with self._waiting_lock:
            self._chat_waiting = max(0, self._chat_waiting + step)

    @property
    def chat_waiting(self) -> bool:
        """A chat task is queued for the LLM thread and has not begun."""
        return self._chat_waiting > 0

    @property
    def memory_job_running(self) -> bool:
        """A memory job holds the LLM thread now: a chat task submitted meanwhile waits for it to give way."""
        return self._job_cancel is not None

    def submit_raw(self, fn: Callable[[Any], Any], *, priority: int = PRIORITY_CHAT) -> Future:
        """Run `fn(store)` on the LLM thread without loading the model first."""
        return self._llm.submit(lambda store: self._chat_task(lambda: fn(store)), priority=priority)

    def _chat_task(self, run: Callable[[], Any]) -> Any:
        """On the LLM thread: chat is busy while `run` runs; afterwards the memory thread may go on."""
        self._busy_chat = True
        try:
            return run()
        finally:
            self._busy_chat = False
            self._last_chat = time.monotonic()
            self._memory.wake()

    def _preempt_job(self) -> None:
        """Stop the LLM memory job that is generating (if any): chat goes first."""
        token = self._job_cancel
        if token is not None:
            token.cancel()

    def notify_jobs(self) -> None:
        """Wake the memory thread (call after enqueueing a job)."""
        self._memory.wake()

    # -- the LLM thread ---------------------------------------------------------------
    def _model(self) -> ChatModel | None:
        """The chat model, loaded on first use; a failed load is remembered (see `reset_model`)."""
        if self.model is None and self._get_model is not None:
            if self.model_error is not None:
                raise self.model_error
            try:
                self.model = self._get_model()
            except Exception as exc:
                self.model_error = exc
                raise
        return self.model

    def reset_model(self, get_model: Callable[[], Any] | None = None) -> Future:
        """Drop the loaded model (after the user changed settings); the next use loads it anew."""

        def reset(store: MemoryStore | None) -> None:
            if get_model is not None:
                self._get_model = get_model
            self.model, self.model_error = None, None

        return self.submit_raw(reset)

    def _complete_json(self, messages: list[dict[str, str]], schema: dict) -> Any:
        token = self._job_cancel
        if token is not None and (token.cancelled or self._stop.is_set() or self._llm.pending()):
            self.jobs_deferred += 1
            raise LLMDeferred("a chat task is waiting for the model")
        model = self._model()
        if model is None:
            raise RuntimeError("no chat model")
        try:
            result = model.complete_json(messages, schema, max_tokens=512, cancel=token)
        except Exception:
            if token is None or not token.cancelled:
                raise  # bad output: memory_core falls back
            result = None
        if token is not None and token.cancelled:  # cut short: the output is partial, not bad
            self.jobs_deferred += 1
            raise LLMDeferred("preempted by a chat task")
        return result

    def _open_llm_store(self) -> MemoryStore | None:
        try:
            store = self._open_store(llm=self._complete_json)
        except Exception as exc:
            # Without the store, tasks that need it fail on their own; loading the model does not.
            self.last_error = str(exc)
            log.error("the LLM thread works without the memory store: %s", exc)
            return None
        self._subscribe(store)
        return store

    def _idle_llm_work(self, store: MemoryStore | None) -> None:
        """Memory jobs that want the LLM, one at a time, only when chat has been idle a while."""
        if store is None or time.monotonic() - self._last_chat < self.idle_s or self._llm.pending():
            return
        try:
            if store.jobs.pending(kinds=LLM_JOB_KINDS):
                self._name_model(store)
                self._job_cancel = CancelToken()
                try:
                    store.jobs.run_pending(max_jobs=1, allow_llm=True, kinds=LLM_JOB_KINDS)
                finally:
                    self._job_cancel = None
                self._report_jobs(store)
        except Exception as exc:  # a broken job must not kill the thread
            self.last_error = str(exc)
            log.exception("memory job on the LLM thread failed")

    def _name_model(self, store: MemoryStore) -> None:
        """Tell the store which model answers its LLM jobs: the persona records it as provenance, and a model
        whose answers keep being rejected is skipped by its id (a newly chosen model is asked again)."""
        try:
            model = self._model()
        except Exception:
            return
        store.promotion.llm_model_id = getattr(model, "model_id", None)
        store.titles.model_writes = self.model_titles is not None and self.model_titles(model)

    # -- the memory thread ------------------------------------------------------------
    def _open_memory_store(self) -> MemoryStore | None:
        try:
            store = self._open_store(llm=None)
        except Exception as exc:
            self.last_error = str(exc)
            log.error("memory jobs cannot run: %s", exc)
            return None
        self._subscribe(store)
        store.jobs.on_progress = self.on_progress
        try:  # load the page-vector matrix now (seconds at 100k pages), not at the first reply
            store.retrieval.warm_up()
        except Exception:
            log.exception("warming up the memory index failed")
        return store

    def _memory_round(self, store: MemoryStore | None) -> None:
        """Woken by a new job or a finished chat task, or every `poll_s`: the idle work when due, then
        the LLM-free jobs, yielding the CPU to a reply that is streaming."""
        if store is None or self._stop.is_set():
            return
        self._maybe_idle_work(store)
        exclude = LLM_JOB_KINDS if self._get_model is not None else None
        try:
            while not self.chat_waiting and store.jobs.run_pending(max_jobs=8, allow_llm=False, exclude_kinds=exclude):
                self._report_jobs(store)
                if self._busy_chat:  # yield the CPU to a streaming reply
                    time.sleep(0.02)
            self._report_jobs(store)
        except Exception as exc:
            self.last_error = str(exc)
            log.exception("memory job failed")

    def _maybe_idle_work(self, store: MemoryStore) -> None:
        work = self.idle_work
        if (
            work is None
            or time.monotonic() - self._started_at < self.idle_work_delay_s
            or self._busy_chat
            or self.chat_waiting
            or time.monotonic() - self._last_chat < self.idle_s
        ):
            return
        self.idle_work = None  # once per start
        try:
            work(store)
        except Exception as exc:
            self.last_error = str(exc)
            log.exception("idle memory work failed")

    def _subscribe(self, store: MemoryStore) -> None:
        if self.on_event is not None:
            store.db.add_listener(self.on_event)

    def _report_jobs(self, store: MemoryStore) -> None:
        if self.on_jobs is not None:
            self.on_jobs(store.jobs.pending())

    # -- helpers for callers --------------------------------------------------------
    def wait_idle(self, timeout: float = 60.0, *, include_llm_jobs: bool = False) -> bool:
        """Block until no LLM-free job (or no job at all) is pending; tests and the CLI use this."""
        deadline = time.monotonic() + timeout
        probe = self._open_store(llm=None)
        exclude = None if include_llm_jobs else LLM_JOB_KINDS
        try:
            while time.monotonic() < deadline:
                self.notify_jobs()
                if not probe.jobs.pending(exclude_kinds=exclude):
                    return True
                time.sleep(0.1)
            return False
        finally:
            probe.close()
