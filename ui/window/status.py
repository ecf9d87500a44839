"""The status bar room: the model's state, the last reply's speed, memory work waiting, the "Memory
updated" notice, and the memory pause switch.

A room of the main window (`MainWindow.status`), fed by the backend's model, job and memory-event
signals. The pause switch lives in the memory database (so the inspector's switch and
`mnemo memory pause` are the same one); this room reads and writes it through `Backend.db` and shows
it on the Memory menu and the banner above the chat.
"""

from __future__ import annotations

import logging
from typing import Any

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox, QProgressBar, QPushButton

from app import wording
from app.operations import chats as operations
from app.wording import count
from ui import plain
from ui.elided_label import ShrinkingLabel
from ui.window.host import ChatWindow

log = logging.getLogger(__name__)

# Memory events that mean long-term memory changed (mid-term paging, persona and knowledge).
MEMORY_UPDATE_KINDS = {
    "page_moved",
    "segment_created",
    "segment_archived",
    "promoted",
    "knowledge_added",
    "knowledge_updated",
    "knowledge_confirmed",
    "trait_added",
    "trait_updated",
    "trait_confirmed",
    "trait_archived",
}


class StatusRoom:
    """The status bar's widgets and what updates them."""

    def __init__(self, window: ChatWindow, parent: QMainWindow):
        self.window = window
        self.parent = parent  # the window as a Qt parent
        self.memory_paused = False
        self.jobs_pending = 0  # memory jobs waiting, as the backend last said
        self.notice_event: Any = None  # the memory event the "Memory updated" notice opens the inspector at
        self._job_progress_shown = False
        self.model_error_box: QMessageBox | None = None
        self.build()

    def build(self) -> None:
        w = self.window
        sb = w.statusBar()
        self.model_label = ShrinkingLabel("Model: —", self.parent)  # a narrow window elides it, the tooltip has it all
        self.model_label.setAccessibleName("Model")
        self.load_progress = QProgressBar(self.parent)
        self.load_progress.setRange(0, 0)
        self.load_progress.setFixedWidth(90)
        self.load_progress.setAccessibleName("Loading the model")
        self.load_progress.hide()
        self.speed_label = ShrinkingLabel("", self.parent)
        self.speed_label.setAccessibleName("Speed of the last reply")
        self.jobs_label = QLabel("", self.parent)
        self.jobs_label.setAccessibleName("Memory updates waiting")
        self.memory_notice = QPushButton("Memory updated", self.parent)
        self.memory_notice.setObjectName("memoryNotice")
        self.memory_notice.setToolTip("Long-term memory changed — open the memory inspector")
        self.memory_notice.setAccessibleName("Memory updated: open the memory inspector")
        self.memory_notice.clicked.connect(self.notice_clicked)
        self.memory_notice.hide()
        sb.addPermanentWidget(self.memory_notice)
        sb.addPermanentWidget(self.load_progress)
        sb.addPermanentWidget(self.model_label)
        sb.addPermanentWidget(self.speed_label)
        sb.addPermanentWidget(self.jobs_label)
        self.set_jobs(0)

    def connect(self) -> None:
        """Follow the backend's model, job and memory signals."""
        b = self.window.backend
        b.modelLoading.connect(self.model_loading)
        b.modelLoaded.connect(self.model_loaded)
        b.modelFailed.connect(self.model_failed)
        b.jobsChanged.connect(self.set_jobs)
        b.jobProgress.connect(self.job_progress)
        b.memoryEvent.connect(self.memory_event)

    # ------------------------------------------------------------------ the model
    def model_loading(self) -> None:
        self.load_progress.show()
        self.model_label.setText("Loading model…")
        self.window.statusBar().showMessage("Loading the chat model in the background…", 0)

    def model_loaded(self, model_id: str) -> None:
        self.load_progress.hide()
        self.model_label.setText(f"Model: {model_id}")
        self.model_label.setToolTip(self.model_description())
        self.window.statusBar().showMessage("Model ready", 3000)
        self.window.turns.model_ready()
        self.window.warm()

    def model_failed(self, message: str) -> None:
        w = self.window
        self.load_progress.hide()
        self.model_label.setText("Model: not loaded")
        self.model_label.setToolTip(message)
        w.statusBar().showMessage("The chat model could not be loaded — see Settings → Model", 0)
        box = QMessageBox(
            QMessageBox.Icon.Critical,
            "Mnemo — chat model",
            "The chat model could not be loaded.",
            QMessageBox.StandardButton.Close,
            self.parent,
        )
        box.setInformativeText(
            f"{message}\n\nChoose another GGUF file or a server in Settings → Model. "
            "You can still read and search your chats."
        )
        settings = box.addButton("Open settings…", QMessageBox.ButtonRole.ActionRole)
        settings.clicked.connect(lambda: QTimer.singleShot(0, w.dialogs.open_settings))
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.model_error_box = box
        box.open()

    def model_description(self) -> str:
        c = self.window.ctx.settings.chat
        if c.backend == "openai":
            return f"OpenAI-compatible server {c.server_url} ({c.server_model or 'default model'})"
        return c.gguf_path or "the bundled SmolLM2-135M (GGUF)"

    def show_speed(self, tps: float, st: dict) -> None:
        """The last reply's tokens per second, its tooltip saying where the time went."""
        self.speed_label.setText(f"Last reply: {tps:.1f} tokens/s" if tps < 10 else f"Last reply: {tps:.0f} tokens/s")
        queued = st.get("queued_s") or 0.0
        self.speed_label.setToolTip(
            f"{st.get('completion_tokens', 0)} tokens; the first came {st.get('time_to_first_token_s', 0):.2f} s "
            "after you sent"
            + (f" (of which {queued:.1f} s waiting for memory work or the model)" if queued >= 0.1 else "")
            + f"; prompt {st.get('prompt_tokens', 0)} tokens "
            f"({st.get('cached_prompt_tokens', 0)} of them already processed)"
        )

    # ------------------------------------------------------------------ memory work
    def set_jobs(self, n: int) -> None:
        if n == 0 and self.jobs_pending:
            # memory work just finished: one that used the model replaced its cache, one that changed
            # the persona changed the prompt; either way, prepare the open chat again (cheap when not)
            self.window.warm()
        self.jobs_pending = n
        if self._job_progress_shown and n:
            return  # a long job is still running: keep its progress in view
        self._job_progress_shown = False
        self.jobs_label.setText(f"Memory: {count(n, 'update')} waiting" if n else "Memory: up to date")
        self.jobs_label.setToolTip(
            "Memory updates run in the background: saving replies as pages, sorting them into topics, and "
            "reading busy topics for your profile when the model is free (the inspector's Overview says which)"
            if n
            else ""
        )

    def job_progress(self, what: str, done: int, total: int) -> None:
        """A long memory job (re-embedding after a model change, indexing words) says how far it is."""
        self._job_progress_shown = done < total
        if done < total:
            pct = 100 * done // max(1, total)
            self.jobs_label.setText(f"{what[:1].upper()}{what[1:]}: {done:,}/{total:,} pages ({pct}%)")
            self.jobs_label.setToolTip(
                "Recall matches your words one by one in every page once this finishes."
                if what == "indexing words"
                else "Recall uses the new embedding model fully once this finishes."
            )
        else:
            self.jobs_label.setText(f"{what[:1].upper()}{what[1:]}: saving…")

    def memory_event(self, event) -> None:
        kind = getattr(event, "kind", "")
        if kind in ("paused", "resumed"):
            self.show_memory_paused(kind == "paused")
        if kind in MEMORY_UPDATE_KINDS:
            self.notice_event = event  # the notice opens the inspector where this happened
            said = wording.event_sentence(
                kind,
                getattr(event, "item_kind", None),
                getattr(event, "item_id", None),
                getattr(event, "detail", None),
                getattr(event, "summary", ""),
            )
            self.memory_notice.setToolTip(plain.tip(f"{said}\nClick to see it in the memory inspector"))
            self.memory_notice.show()
        elif kind == "job_failed":
            self.window.statusBar().showMessage(f"Memory: {getattr(event, 'summary', 'a job failed')}", 6000)

    def notice_clicked(self) -> None:
        self.memory_notice.hide()
        event, self.notice_event = self.notice_event, None
        panel = self.window.dock.show_inspector()
        show = getattr(panel, "show_event", None)
        if event is not None and callable(show):
            show(event)

    # ------------------------------------------------------------------ the pause switch
    def set_memory_paused(self, paused: bool) -> None:
        """The global pause switch. It lives in the memory database, so the inspector's switch and
        `mnemo memory pause` are the same one; its "paused"/"resumed" event keeps the views in step."""
        paused = bool(paused)
        w = self.window

        def done(_):
            self.show_memory_paused(paused)
            w.statusBar().showMessage("Memory paused: nothing new is remembered" if paused else "Memory resumed", 4000)

        def failed(exc):
            self.sync_memory_paused()
            w.statusBar().showMessage(f"Could not change the pause switch: {exc}", 6000)

        w.backend.db(lambda store: operations.set_memory_paused(store, paused), done, failed)

    def sync_memory_paused(self) -> None:
        """Read the pause switch from the store (at start, and after another view changed it)."""
        if self.window.backend.started:
            self.window.backend.db(
                lambda store: store.is_paused(),
                self.show_memory_paused,
                lambda exc: log.warning("could not read the pause switch: %s", exc),
            )

    def show_memory_paused(self, paused: bool) -> None:
        w = self.window
        pause = w.menus.pause_action
        pause.blockSignals(True)
        pause.setChecked(bool(paused))
        pause.blockSignals(False)
        pause.setEnabled(True)
        self.memory_paused = bool(paused)
        w.paused_banner.setVisible(self.memory_paused and not w.current_incognito)
