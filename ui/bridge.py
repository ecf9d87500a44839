"""The Qt side of the background workers: every LLM, embedding and database call runs here, off the UI thread.

Two kinds of worker, both on `app.runtime.tasks`:

- the `app.runtime.scheduler.Scheduler` (one LLM thread that owns the chat model and runs chat
  turns, one memory thread for memory jobs);
- a database worker (`ui.tasks.UiWorker`) with its own `MemoryStore` connection for what the
  window reads and edits (conversation list, messages, search, renames, flags), so switching
  conversations never waits behind a reply that is streaming.

A chat turn is the `app.operations.chats` call for its kind on the chat's `app.chat.session.ChatSession`
(kept here, one per chat opened). Workers report back through Qt signals of `Backend`, which
lives on the UI thread, so Qt queues every callback onto the UI thread. Streamed tokens are not
sent one signal per token: the LLM thread appends them to a `Turn` buffer and the window drains
it on a timer (every ~40 ms), which keeps the event loop free however fast the model is.

A reply that has to wait says what for: `turnWaiting` when it is queued behind memory work on the LLM
thread, `turnStarted` once its task begins there; its time to first token is counted from the moment
the user sent (`Turn.started_at`, handed to the agent as `sent_at`). The prompts of the last replies
are kept in memory (`prompt_of`) for the inspector's prompt view.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal, Slot

from app.chat.session import ChatOptions, ChatSession
from app.operations import chats as operations
from models.chat import CancelToken
from ui.tasks import UiWorker

if TYPE_CHECKING:
    from app.runtime.scheduler import Scheduler

log = logging.getLogger(__name__)

SEND, REGENERATE, EDIT = "send", "regenerate", "edit"
PROMPTS_KEPT = 20  # the prompts of this many recent replies stay in memory, for the prompt view
WAITING_MEMORY = "memory"  # Turn.waiting: queued behind a memory job on the LLM thread


@dataclass(eq=False)
class Turn:
    """One chat turn in flight: what was asked, its cancel token and the streamed text so far."""

    kind: str
    conversation_id: int | None
    text: str = ""
    message_id: int | None = None  # the assistant message (regenerate) or user message (edit)
    user_message_id: int | None = None  # send / edit: the user message once stored (before the reply)
    failed_reply_id: int | None = None  # the reply could not begin: the failed reply stored in its place
    parent_id: int | None = None  # send: the last message of the branch on screen (None: newest)
    incognito: bool = False
    space: tuple[int | None, bool] = (None, False)  # a new chat's memory space and whether it reads all
    cancel: CancelToken = field(default_factory=CancelToken)
    started_at: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None
    waiting: str | None = None  # WAITING_MEMORY while queued behind memory work; None once begun
    began_at: float | None = None  # when its task began on the LLM thread
    result: Any = None  # app.chat.agent.TurnResult when finished
    error: str | None = None  # the task failed before or outside the agent (e.g. model load)
    done: bool = False
    _parts: list[str] = field(default_factory=list)
    _read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, chunk: str) -> bool:
        """Called on the LLM thread for every token; returns True for the first one."""
        with self._lock:
            self._parts.append(chunk)
            first = self.first_token_at is None
            if first:
                self.first_token_at = time.perf_counter()
            return first

    def take_new(self) -> str:
        """The text streamed since the last call (UI thread)."""
        with self._lock:
            new = self._parts[self._read :]
            self._read = len(self._parts)
        return "".join(new)

    def text_so_far(self) -> str:
        with self._lock:
            return "".join(self._parts)

    @property
    def token_count(self) -> int:
        with self._lock:
            return len(self._parts)


class Backend(QObject):
    """Owns the workers; everything the window asks of the model or the database goes through here."""

    storeReady = Signal()
    storeFailed = Signal(str)
    modelLoading = Signal()
    modelLoaded = Signal(str)  # model id
    modelFailed = Signal(str)  # a user-facing message (names the file)
    jobsChanged = Signal(int)  # memory jobs pending
    jobProgress = Signal(str, int, int)  # a long memory job: what, done, total (re-embedding)
    memoryEvent = Signal(object)  # memory_core.types.Event
    conversationCreated = Signal(object)  # Turn (its conversation_id is now set)
    firstToken = Signal(object)  # Turn
    turnWaiting = Signal(object)  # Turn: queued behind memory work on the LLM thread (Turn.waiting)
    turnStarted = Signal(object)  # Turn: its task began on the LLM thread (the model may still load)
    turnFinished = Signal(object)  # Turn (result or error set); `busy` is False from here on
    _turnDone = Signal(object)

    def __init__(self, ctx, parent: QObject | None = None, *, scheduler_factory: Callable | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self._scheduler_factory = scheduler_factory
        self.scheduler: Scheduler | None = None
        self._db: UiWorker | None = None
        self._db_open_error: Exception | None = None
        self._started = False
        self._closed = False
        self.store_ok: bool | None = None
        self.store_error: BaseException | None = None  # why the store could not be opened (any worker)
        self.model_id: str | None = None
        self.model_error: str | None = None
        self.model_loading = False
        self.turn: Turn | None = None
        self._active = False
        self._warm_cancel: CancelToken | None = None  # the prompt-cache warming in flight, if any
        self.last_warm: Future | None = None  # its outcome: tokens cached (for tests, diagnostics)
        self._sessions: dict[int, ChatSession] = {}  # the chats opened since the start, by id
        self._prompts: OrderedDict[int, Any] = OrderedDict()  # reply id -> its ComposedPrompt (the newest)
        self._turnDone.connect(self._on_turn_done)

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        """Start the workers and load the chat model in the background (returns at once)."""
        if self._started:
            return
        self._started = True
        from app.operations import backups
        from app.runtime.scheduler import Scheduler
        from app.topic_titles import model_writes_titles

        self._db = UiWorker(self._open_db_store, name="mnemo-ui-db")
        self._db.submit(lambda store: store.jobs.pending(), self._db_opened, on_error=self._db_failed, label="open")
        factory = self._scheduler_factory or Scheduler
        self.scheduler = factory(
            open_store=self._open_scheduler_store,
            get_model=self.ctx.chat_model,
            on_event=self._on_event,
            on_jobs=self._on_jobs,
            on_progress=self._on_progress,
            idle_work=self._daily_backup,
            idle_work_delay_s=backups.START_DELAY_S,
            model_titles=lambda model: model_writes_titles(self.ctx.settings.topic_titles, model),
        )
        self.scheduler.start()
        self.load_model()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop a reply in flight, then the workers (waits for them up to `timeout` each)."""
        if self._closed:
            return
        self._closed = True
        if self.turn is not None:
            self.turn.cancel.cancel()
        self._stop_warming()
        if self.scheduler is not None:
            self.scheduler.stop(timeout=timeout)
        if self._db is not None:
            self._db.stop(timeout, drop_pending=False)  # edits asked for before closing are still saved

    @property
    def started(self) -> bool:
        return self._started and not self._closed

    def _open_scheduler_store(self, llm=None):
        try:
            return self.ctx.open_store(llm=llm)
        except Exception as exc:
            self._store_failed(exc)
            raise

    def _open_db_store(self):
        """The database worker's connection; a failed open is not tried again (every call says why)."""
        if self._db_open_error is not None:
            raise RuntimeError(f"the memory database could not be opened: {self._db_open_error}")
        try:
            store = self.ctx.open_store()
            operations.recover_interrupted(store)  # what a crash cut short: kept, its memory queued
        except Exception as exc:
            log.exception("could not open the memory store")
            self._db_open_error = exc
            raise
        return store

    def _db_opened(self, pending: int) -> None:
        self.store_ok = True
        self._emit(self.storeReady)
        self._emit(self.jobsChanged, pending)

    def _db_failed(self, error: BaseException) -> None:
        self.store_ok = False
        self._store_failed(error)

    def _store_failed(self, error: BaseException) -> None:
        """Any worker that could not open the store: keep the error (its type says what to offer)."""
        self.store_error = error
        self._emit(self.storeFailed, f"{type(error).__name__}: {error}")

    def _emit(self, signal, *args) -> None:
        if not self._closed:
            try:
                signal.emit(*args)
            except RuntimeError:  # the QObject is gone (window closed mid-callback)
                pass

    def _on_event(self, event) -> None:
        self._emit(self.memoryEvent, event)

    def _on_jobs(self, n: int) -> None:
        self._emit(self.jobsChanged, int(n))

    def _daily_backup(self, store) -> None:
        """On the memory thread, once per start (a minute in, chat idle): today's copy, if due."""
        from app.operations.backups import maybe_backup

        try:
            made = maybe_backup(
                store, self.ctx.paths, keep=self.ctx.settings.backup_keep, cancelled=lambda: self._closed
            )
        except InterruptedError:
            log.info("the daily backup was cut short: Mnemo is closing")
            return
        if made is not None:
            log.info("memory backed up to %s", made)

    def _on_progress(self, what: str, done: int, total: int) -> None:
        self._emit(self.jobProgress, what, int(done), int(total))

    # -- the database thread ----------------------------------------------------------
    def db(
        self,
        fn: Callable[[Any], Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> Future:
        """Run `fn(store)` on the database thread; `on_done(value)` / `on_error(exc)` run on the UI thread."""
        if self._db is None:
            raise RuntimeError("backend not started")
        return self._db.submit(fn, on_done, on_error=on_error)

    # -- the LLM thread ---------------------------------------------------------------
    def submit(self, fn: Callable[[Any, Any], Any]) -> Future:
        """Run `fn(store, model)` on the LLM thread (model work, chat turns)."""
        if self.scheduler is None:
            raise RuntimeError("backend not started")
        return self.scheduler.submit(fn)

    def notify_jobs(self) -> None:
        if self.scheduler is not None:
            self.scheduler.notify_jobs()

    def load_model(self) -> Future:
        """Load (or reload) the chat model on the LLM thread; modelLoaded/modelFailed report the outcome."""
        self.model_loading = True
        self.model_error = None
        self.modelLoading.emit()
        future = self.submit(lambda store, model: getattr(model, "model_id", str(model)))
        future.add_done_callback(self._model_done)
        return future

    def _model_done(self, future: Future) -> None:
        exc = future.exception()
        self.model_loading = False
        if exc is None:
            self.model_id = future.result()
            self._emit(self.modelLoaded, self.model_id)
        else:
            self.model_id = None
            self.model_error = str(exc) or type(exc).__name__
            self._emit(self.modelFailed, self.model_error)

    def reload_model(self) -> Future:
        """Drop the loaded model (after the settings changed) and load the configured one."""
        sched = self.scheduler
        if sched is not None:
            # On the LLM thread, which owns the model: close it, then forget it (and a failed load).
            sched.submit_raw(lambda store: self.ctx.reset_chat_model())
            sched.reset_model()
        return self.load_model()

    def warm(self, conversation_id: int | None, leaf_id: int | None = None) -> None:
        """While the user reads or types, let the model process the conversation's prompt prefix
        (`ChatAgent.warm`) on the LLM thread, after any chat task. A newer call or a chat turn stops
        the one in flight within a chunk of tokens."""
        if self.scheduler is None or self._closed:
            return
        self._stop_warming()
        token = self._warm_cancel = CancelToken()
        session = self.session(conversation_id)

        def task(store, model):
            if token.cancelled or store is None:
                return 0
            t0 = time.perf_counter()
            n = operations.warm(session, store, model, leaf_id=leaf_id, cancel=token)
            log.debug(
                "warmed %s tokens of conversation %s in %.2f s%s",
                n,
                conversation_id,
                time.perf_counter() - t0,
                " (stopped)" if token.cancelled else "",
            )
            return n

        from app.runtime.scheduler import PRIORITY_NORMAL

        self.last_warm = self.scheduler.submit(task, priority=PRIORITY_NORMAL)
        self.last_warm.add_done_callback(self._warm_done)

    @staticmethod
    def _warm_done(future: Future) -> None:
        exc = future.exception()
        if exc is not None:  # only an optimisation: the next reply processes its whole prompt
            log.info("warming the prompt cache failed: %s", exc)

    def _stop_warming(self) -> None:
        if self._warm_cancel is not None:
            self._warm_cancel.cancel()

    def session(
        self, conversation_id: int | None, *, incognito: bool = False, space: tuple[int | None, bool] = (None, False)
    ) -> ChatSession:
        """The session of chat `conversation_id` (kept from turn to turn); None: a new chat's, which its
        first message creates (`incognito` then says how). Its options follow the settings now."""
        session = self._sessions.get(conversation_id) if conversation_id is not None else None
        if session is None:
            session = ChatSession(conversation_id, incognito=incognito, space_id=space[0], read_all=space[1])
            if conversation_id is not None:
                self._sessions[conversation_id] = session
        session.options = ChatOptions.from_settings(self.ctx.settings)
        return session

    def start_turn(self, turn: Turn) -> Turn:
        """Run one chat turn (send / regenerate / edit-and-resend). What was typed is stored first, on
        the database worker, so it is kept even when the app dies while the model loads; the reply
        then runs on the LLM thread."""
        if self._active:
            raise RuntimeError("a reply is already being generated")
        self._stop_warming()
        self.turn = turn
        self._active = True
        session = self.session(turn.conversation_id, incognito=turn.incognito, space=turn.space)
        if turn.kind == REGENERATE:
            self._reply(turn, session)
            return turn

        def post(store) -> int:
            created = session.conversation_id is None
            if turn.kind == EDIT:
                assert turn.message_id is not None, "an edit names the message it replaces"
                uid = operations.post_edited(store, turn.message_id, turn.text)
            else:
                uid = operations.post(session, store, turn.text, parent_id=turn.parent_id)
            if created and session.conversation_id is not None:
                turn.conversation_id = session.conversation_id
                self._sessions[session.conversation_id] = session
                self._emit(self.conversationCreated, turn)
            return uid

        def posted(uid: int) -> None:
            turn.user_message_id = uid
            if self._closed:
                self._finish(turn, error="Mnemo closed before the reply began")
            else:
                self._reply(turn, session)

        def not_posted(exc: BaseException) -> None:
            log.warning("the message could not be stored: %s", exc)
            self._finish(turn, error=str(exc) or type(exc).__name__)

        self.db(post, posted, not_posted)
        return turn

    def _reply(self, turn: Turn, session: ChatSession) -> None:
        """The LLM-thread half of a turn: the reply (to the stored message, or a regenerated one)."""

        def task(store, model):
            def on_token(chunk: str) -> None:
                if turn.push(chunk):
                    self._emit(self.firstToken, turn)

            sent = turn.started_at  # the user's clock: the reply's time to first token counts any wait
            if turn.kind == REGENERATE:
                return operations.regenerate(
                    session, store, model, turn.message_id, on_token=on_token, cancel=turn.cancel, sent_at=sent
                )
            return operations.reply(
                session, store, model, turn.user_message_id, on_token=on_token, cancel=turn.cancel, sent_at=sent
            )

        def finished(future: Future) -> None:
            exc = future.exception()
            if exc is None:
                self._finish(turn, result=future.result())
                return
            log.warning("chat turn failed: %s", exc)
            error = str(exc) or type(exc).__name__
            uid = turn.user_message_id
            if uid is None or self._closed or self._db is None:
                self._finish(turn, error=error)
                return

            def answered(aid: int) -> None:  # the stored message gets a failed reply the user can regenerate
                turn.failed_reply_id = aid
                self._finish(turn, error=error)

            self._db.submit(
                lambda store: operations.reply_failed(store, uid, error),
                answered,
                on_error=lambda _: self._finish(turn, error=error),
            )

        def began() -> None:  # on the LLM thread
            turn.began_at = time.perf_counter()
            turn.waiting = None
            self._emit(self.turnStarted, turn)

        sched = self.scheduler
        if sched is None:
            raise RuntimeError("backend not started")
        waits = bool(getattr(sched, "memory_job_running", False))
        sched.submit(task, on_start=began).add_done_callback(finished)
        if waits and turn.began_at is None:  # memory work holds the thread: it gives way within a moment
            turn.waiting = WAITING_MEMORY
            self._emit(self.turnWaiting, turn)

    def _finish(self, turn: Turn, *, result=None, error: str | None = None) -> None:
        """The turn is over (any thread): its outcome is kept and the window told on the UI thread."""
        turn.result = result
        turn.error = error if result is None else (result.error if result.status == "failed" else None)
        turn.done = True
        turn.waiting = None
        if result is not None and getattr(result, "prompt", None) is not None:
            self._prompts[result.assistant_message_id] = result.prompt
            while len(self._prompts) > PROMPTS_KEPT:
                self._prompts.popitem(last=False)
        self.notify_jobs()
        self._emit(self._turnDone, turn)

    @Slot(object)
    def _on_turn_done(self, turn: Turn) -> None:
        # On the UI thread: only now may the next turn start, so the window never mixes two turns up.
        if turn is self.turn:
            self._active = False
        self.turnFinished.emit(turn)

    def prompt_of(self, message_id: int | None):
        """The whole prompt (app.chat.prompting.ComposedPrompt) of a recent reply of this session, or None."""
        return self._prompts.get(message_id) if message_id is not None else None

    def stop_turn(self) -> None:
        if self.turn is not None and not self.turn.done:
            self.turn.cancel.cancel()

    @property
    def busy(self) -> bool:
        """A turn was started and the window has not yet been told it finished."""
        return self._active
