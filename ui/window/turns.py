"""The turn controller: send, regenerate, edit and stop, and the drawing of a reply as it streams.

A room of the main window (`MainWindow.turns`). It owns the reply being drawn (`turn_widget`),
the edit in progress (`editing_id`) and the flush timer that drains streamed tokens every
`FLUSH_MS`; the turn itself runs on the backend's LLM thread (`ui.bridge.Backend.start_turn`),
whose signals come back here on the UI thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMainWindow

from ui.bridge import EDIT, REGENERATE, SEND, WAITING_MEMORY, Turn
from ui.chat_view import MessageWidget
from ui.window.host import ChatWindow

FLUSH_MS = 40  # streamed tokens are drawn in batches this often (30–50 ms keeps it smooth and cheap)
PENDING_LOADING = "Loading the model…"
PENDING_PROMPT = "Reading your message and memory…"
PENDING_MEMORY = "Waiting for memory work to finish…"


class TurnController:
    """Starts turns from what the user did and draws them on the chat view until they finish."""

    def __init__(self, window: ChatWindow, parent: QMainWindow):
        self.window = window
        self.parent = parent  # the window as a Qt parent
        self.editing_id: int | None = None
        self.turn_widget: MessageWidget | None = None
        self.turn_user_widget: MessageWidget | None = None
        self.unsent_widget: MessageWidget | None = None  # a message whose send failed before it was stored
        self.after_turn: list[Callable[[], None]] = []  # delete or forget a chat once its stopped reply is saved
        self.last_tokens_per_s: float | None = None
        self.flush_timer = QTimer(parent)
        self.flush_timer.setInterval(FLUSH_MS)
        self.flush_timer.timeout.connect(self.flush)

    def connect(self) -> None:
        """Follow the backend's turn signals (the window calls this once its widgets exist)."""
        b = self.window.backend
        b.conversationCreated.connect(self.conversation_created)
        b.firstToken.connect(self.first_token)
        b.turnWaiting.connect(self.turn_waiting)
        b.turnStarted.connect(self.turn_started)
        b.turnFinished.connect(self.turn_finished)

    # ------------------------------------------------------------------ what the user does
    def send(self) -> None:
        w = self.window
        text = w.composer.text()
        if not text.strip() or w.backend.busy:
            return
        if not w.backend.started:
            w.start_background_loading()
        # the workers cannot run a turn without the database; whichever worker found it first (the scheduler's
        # may, before the database worker's own open has failed) says so
        if w.backend.store_ok is False or w.backend.store_error is not None:
            w.statusBar().showMessage("Cannot send: the memory database could not be opened", 8000)
            return
        if self.editing_id is not None:
            mid = self.editing_id
            old = w.chat_view.widget_of(mid)
            self.cancel_edit(keep_text=True)
            if old is not None:
                w.chat_view.remove_from(old)
            turn = Turn(EDIT, w.current_id, text=text, message_id=mid)
        else:
            shown = w.chat_view.last()  # continue the branch on screen (it may be an older version)
            turn = Turn(
                SEND,
                w.current_id,
                text=text,
                incognito=w.current_incognito if w.current_id is None else False,
                space=(w.space_picker.space_id(), w.space_picker.read_all()),
                parent_id=shown.message_id if shown is not None and w.current_id is not None else None,
            )
        w.composer.clear()
        w.drafts.save_now()  # sent: a crash from here on must not bring it back as a draft
        unsent, self.unsent_widget = self.unsent_widget, None
        if unsent is not None and any(m is unsent for m in w.chat_view.messages()):
            w.chat_view.remove_from(unsent)  # the failed try (never stored) gives way to this one
        user = w.chat_view.add_message("user", text)
        self._start_turn(turn, user)

    def regenerate(self, assistant_id: int) -> None:
        w = self.window
        if w.backend.busy:
            return
        self.cancel_edit()
        old = w.chat_view.widget_of(assistant_id)
        if old is not None:
            w.chat_view.remove_from(old)
        self._start_turn(Turn(REGENERATE, w.current_id, message_id=assistant_id), None)

    def regenerate_last(self) -> None:
        last = self.window.chat_view.last("assistant")
        if last is not None and last.message_id is not None:
            self.regenerate(last.message_id)

    def begin_edit(self, user_id: int, text: str) -> None:
        w = self.window
        if w.backend.busy:
            return
        self.editing_id = user_id
        w.composer.set_text(text)
        w.edit_banner.show()
        w.composer.focus()

    def edit_last(self) -> None:
        last = self.window.chat_view.last("user")
        if last is not None and last.message_id is not None:
            self.begin_edit(last.message_id, last.text)

    def cancel_edit(self, *, keep_text: bool = False) -> None:
        if self.editing_id is None:
            return
        self.editing_id = None
        self.window.edit_banner.hide()
        if not keep_text:
            self.window.composer.clear()

    def copy_last(self) -> None:
        last = self.window.chat_view.last("assistant")
        if last is not None:
            last.copy()

    def stop(self) -> None:
        self.window.backend.stop_turn()

    def escape(self) -> None:
        """Esc: stop a reply; else cancel an edit; else clear the search."""
        w = self.window
        if w.backend.busy:
            self.stop()
        elif self.editing_id is not None:
            self.cancel_edit()
        elif w.sidebar.search.text():
            w.sidebar.search.clear()

    def after_turn_in(self, cid: int, action: Callable[[], None]) -> None:
        """Run `action` now, or, while a reply streams in chat `cid`, stop it and run `action` once the
        stopped reply has been saved (so nothing is written to the chat or its memory after it)."""
        turn = self.window.backend.turn
        if turn is not None and not turn.done and turn.conversation_id == cid:
            self.after_turn.append(action)
            self.window.backend.stop_turn()
            return
        action()

    # ------------------------------------------------------------------ the reply as it streams
    def _start_turn(self, turn: Turn, user_widget: MessageWidget | None) -> None:
        w = self.window
        assistant = w.chat_view.add_message("assistant", "", status="streaming")
        assistant.set_pending(PENDING_LOADING if w.backend.model_loading else PENDING_PROMPT)
        self.turn_widget = assistant
        self.turn_user_widget = user_widget
        try:
            w.backend.start_turn(turn)
        except RuntimeError as exc:
            assistant.set_final("failed", error=str(exc))
            return
        w.composer.set_busy(True)
        w.chat_view.set_busy(True)
        w.menus.update_enabled()
        self.flush_timer.start()

    def model_ready(self) -> None:
        """The model loaded: a reply waiting for it now waits for its prompt."""
        if self.turn_widget is not None and self.turn_widget.pending:
            self.turn_widget.set_pending(PENDING_PROMPT)

    def first_token(self, turn: Turn) -> None:
        if turn is self.window.backend.turn:
            self.flush()

    def turn_waiting(self, turn: Turn) -> None:
        """The reply is queued behind memory work on the model's thread: say so, not "processing"."""
        w = self.turn_widget
        if (
            turn is self.window.backend.turn
            and turn.began_at is None
            and turn.waiting == WAITING_MEMORY
            and w is not None
        ):
            w.set_pending(PENDING_MEMORY)
            self.window.statusBar().showMessage("Your reply waits for memory work to give way (a moment)", 5000)

    def turn_started(self, turn: Turn) -> None:
        w = self.turn_widget
        if turn is self.window.backend.turn and w is not None and w.pending and turn.first_token_at is None:
            w.set_pending(PENDING_LOADING if self.window.backend.model_loading else PENDING_PROMPT)

    def pending_text(self, turn: Turn) -> str:
        """What the reply being waited for says: its state and, after two seconds, how long since sending."""
        w = self.turn_widget
        base = (w.pending_label if w is not None else "") or PENDING_PROMPT
        waited = time.perf_counter() - turn.started_at
        return f"{base} {waited:.0f} s" if waited >= 2 else base

    def flush(self) -> None:
        turn = self.window.backend.turn
        if turn is None:
            self.flush_timer.stop()
            return
        chunk = turn.take_new()
        if chunk and self.turn_widget is not None:
            self.turn_widget.append_text(chunk)
        elif self.turn_widget is not None and self.turn_widget.pending and not turn.done:
            self.turn_widget.show_pending_time(self.pending_text(turn))

    def detach(self) -> None:
        """The view is about to show something else: stop drawing the streaming reply into it."""
        self.turn_widget = None
        self.turn_user_widget = None

    def reattach(self, cid: int) -> None:
        """Back on the conversation whose reply is still streaming: draw it again."""
        view = self.window.chat_view
        turn = self.window.backend.turn
        if turn is None or turn.done or turn.conversation_id != cid:
            return
        last = view.last()
        if last is not None and last.role == "assistant" and last.status == "streaming":
            widget = last
        else:
            if turn.kind == SEND and (last is None or last.role != "user" or last.text != turn.text):
                view.add_message("user", turn.text)
            widget = view.add_message("assistant", "", status="streaming")
        turn.take_new()
        widget.set_text(turn.text_so_far())
        pending = PENDING_MEMORY if turn.waiting == WAITING_MEMORY else PENDING_PROMPT
        widget.set_pending(None if turn.first_token_at else pending)
        self.turn_widget = widget

    def conversation_created(self, turn: Turn) -> None:
        w = self.window
        if w.current_id is None and self.turn_widget is not None:
            w.current_id = turn.conversation_id
            w.update_header()
        w.refresh_conversations()

    def turn_finished(self, turn: Turn) -> None:
        w = self.window
        self.flush()
        self.flush_timer.stop()
        w.composer.set_busy(False)
        widget, user_widget = self.turn_widget, self.turn_user_widget
        self.turn_widget = self.turn_user_widget = None
        if turn.result is not None:
            self._show_result(turn.result, widget, user_widget)
        else:
            self._show_failure(turn, widget, user_widget)
        w.chat_view.set_busy(False)
        w.menus.update_enabled()
        QTimer.singleShot(100, w.chat_view.prepare)  # ready widgets for the next message
        if self.after_turn:
            actions, self.after_turn = self.after_turn, []
            for action in actions:
                action()
        elif turn.conversation_id == w.current_id and turn.conversation_id is not None:
            w.refresh_title(turn.conversation_id)
            if turn.kind in (REGENERATE, EDIT):
                w.refresh_siblings()
            if turn.result is not None:
                w.warm()  # the exchange just made joins the cached prefix while the user reads
        w.refresh_conversations()

    def _show_result(self, result, widget: MessageWidget | None, user_widget: MessageWidget | None) -> None:
        """A finished reply (app.chat.agent.TurnResult): its final text, ids and status, and its speed."""
        w = self.window
        if widget is not None:
            if widget.text != result.text:
                widget.set_text(result.text)
            widget.set_final(
                result.status, message_id=result.assistant_message_id, error=result.error, stats=result.stats
            )
        if user_widget is not None:
            user_widget.set_message_id(result.user_message_id)
        if (result.stats or {}).get("forgot"):  # "Forget that …": backups may still hold it
            w.backups.offer_to_drop_forgotten()
        if result.error and result.status != "failed":  # e.g. saved, but not added to memory
            w.statusBar().showMessage(result.error, 10000)
        tps = (result.stats or {}).get("tokens_per_s") or 0.0
        if tps:
            self.last_tokens_per_s = float(tps)
            w.status.show_speed(float(tps), result.stats)

    def _show_failure(self, turn: Turn, widget: MessageWidget | None, user_widget: MessageWidget | None) -> None:
        """A turn that failed: its reply says why; a message never stored goes back to the composer."""
        w = self.window
        if widget is not None:
            widget.set_final("failed", message_id=turn.failed_reply_id, error=turn.error)
        if turn.user_message_id is not None:  # stored: kept in the chat, its failed reply can be regenerated
            if user_widget is not None:
                user_widget.set_message_id(turn.user_message_id)
        elif turn.kind in (SEND, EDIT):
            if not w.composer.text().strip():
                w.composer.set_text(turn.text)  # nothing typed is lost
            if user_widget is not None and user_widget.message_id is None:
                self.unsent_widget = user_widget  # shown with its error until the next send
        w.statusBar().showMessage(f"The reply failed: {turn.error}", 8000)
