"""The main window: conversation sidebar, chat view, composer, menus, status bar.

Everything slow happens in `ui.bridge.Backend` workers; this module only draws and routes.
Backups, restoring one and the damaged-file dialog live in `ui.backup_restore` (`self.backups`).
Construction is cheap on purpose (no model, no database), so the window paints at once;
`start_background_loading()` then opens the store and loads the models off the UI thread.

Layout: the memory inspector docks on the right and toggles (Ctrl+M, the Memory menu, the header icon);
docked, it never squeezes the chat below `CHAT_MIN_WIDTH`: the chat list gives way first, and on a
window too small for both the inspector floats beside it (`fit_layout`). The chat list collapses too.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import wording
from app.operations import chats as operations
from app.operations.spaces import set_chat_space
from app.wording import count
from models.discover import find_models, find_servers
from models.resolve import default_gguf_path
from ui.pyside_fix import ensure_refcount_fix

ensure_refcount_fix()  # before any widget work: PySide6 6.12 + Python 3.11 would otherwise abort in minutes
# The imports below build widgets, so they come after the fix above (E402 knowingly).

from ui import plain, theme  # noqa: E402  (after ensure_refcount_fix)
from ui.backup_restore import BackupRestore  # noqa: E402  (after ensure_refcount_fix)
from ui.bridge import EDIT, REGENERATE, SEND, WAITING_MEMORY, Backend, Turn  # noqa: E402  (after ensure_refcount_fix)
from ui.chat_view import ChatView, MessageWidget  # noqa: E402  (after ensure_refcount_fix)
from ui.composer import Composer  # noqa: E402  (after ensure_refcount_fix)
from ui.conversation_list import ConversationList  # noqa: E402  (after ensure_refcount_fix)
from ui.drafts import DraftKeeper  # noqa: E402  (after ensure_refcount_fix)
from ui.elided_label import ElidedLabel, ShrinkingLabel  # noqa: E402  (after ensure_refcount_fix)
from ui.model_finder import ModelFinder  # noqa: E402  (after ensure_refcount_fix)
from ui.space_picker import SpacePicker  # noqa: E402  (after ensure_refcount_fix)

log = logging.getLogger(__name__)


def _other_models(configured: list[tuple[str, str]]):
    """(GGUF files in other apps' folders but the bundled one, OpenAI-compatible servers answering here):
    what the empty chat suggests while the bundled model answers. Runs off the UI thread."""
    bundled = default_gguf_path().resolve()
    files = [m for m in find_models() if Path(m.path).resolve() != bundled]
    return files, find_servers(configured)


FLUSH_MS = 40  # streamed tokens are drawn in batches this often (30–50 ms keeps it smooth and cheap)
LIST_LIMIT = 300
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
INCOGNITO_TEXT = "Incognito — this chat is not remembered, and memory is not used for it."
PAUSED_TEXT = "Memory is paused: nothing you say now is remembered (what Mnemo knows is still used)."
CHAT_MIN_WIDTH = 380  # the chat pane stays this wide at least: about 50 characters a line
SIDEBAR_WIDTH = 250
INSPECTOR_DOCK_ATTR = "_mnemo_inspector_dock"  # ui.inspector.panel.DOCK_ATTR: the dock attach() keeps here
PENDING_LOADING = "Loading the model…"
PENDING_PROMPT = "Reading your message and memory…"
PENDING_MEMORY = "Waiting for memory work to finish…"


def _header_button(
    icon_name: str, text: str, name: str, tip: str, parent: QWidget, *, checkable: bool = False
) -> QToolButton:
    b = QToolButton(parent)
    b.setIcon(theme.icon(icon_name))
    b.setIconSize(QSize(18, 18))
    b.setProperty("iconName", icon_name)
    if text:
        b.setText(text)
        b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
    b.setAccessibleName(name)
    b.setToolTip(tip)
    b.setCheckable(checkable)
    b.setAutoRaise(True)
    return b


class MainWindow(QMainWindow):
    def __init__(self, ctx, *, backend: Backend | None = None):
        super().__init__()
        self.ctx = ctx
        self.setWindowTitle("Mnemo")
        self.setWindowIcon(theme.app_icon())
        self.themes = theme.ThemeManager(ctx.settings.ui.theme, self)
        self.themes.changed.connect(self._restyle)
        self.themes.apply()

        self.backend = backend or Backend(ctx, self)
        self.backups = BackupRestore(self, self)
        self.current_id: int | None = None
        self.current_title = "New chat"
        self.current_incognito = False
        self.editing_id: int | None = None
        self._turn_widget: MessageWidget | None = None
        self._turn_user_widget: MessageWidget | None = None
        self._after_turn: list = []  # delete or forget a chat once its stopped reply is saved
        self._load_seq = 0
        self._model_dialog_shown = False
        self.last_tokens_per_s: float | None = None
        self.inspector = None
        self.memory_paused = False
        self._notice_event = None  # the memory event the "Memory updated" notice opens the inspector at
        self._closing = False

        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)

        self._build()
        self._build_actions()
        self._build_status()
        self._connect_backend()
        self._restore_geometry()
        self._update_header()
        self.drafts = DraftKeeper(ctx.paths.data_dir / "draft.txt", self.composer.text, self)
        draft = self.drafts.load()
        if draft.strip():
            self.composer.set_text(draft)
        self.composer.changed.connect(self.drafts.changed)

    # ------------------------------------------------------------------ building
    def _build(self) -> None:
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setChildrenCollapsible(False)
        self.sidebar = ConversationList(self.splitter)
        self.sidebar.selected.connect(self.open_conversation)
        self.sidebar.newRequested.connect(self.new_chat)
        self.sidebar.renameRequested.connect(self.rename_conversation)
        self.sidebar.deleteRequested.connect(self.delete_conversation)
        self.sidebar.forgetRequested.connect(self.forget_conversation_memory)
        self.sidebar.memoryRequested.connect(self.show_chat_memory)
        self.sidebar.exportRequested.connect(self.export_conversation)
        self.sidebar.searchChanged.connect(self.search)

        pane = QWidget(self.splitter)
        lay = QVBoxLayout(pane)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)

        header = QFrame(pane)
        header.setObjectName("chatHeader")
        h = QHBoxLayout(header)
        h.setContentsMargins(8, 6, 8, 6)
        self.sidebar_button = _header_button(
            "sidebar", "", "Chat list", "Hide or show the chat list (Ctrl+Shift+S)", header, checkable=True
        )
        self.sidebar_button.setChecked(True)
        self.sidebar_button.setObjectName("plainToggle")
        self.sidebar_button.toggled.connect(lambda on: self.set_sidebar_visible(on))
        h.addWidget(self.sidebar_button)
        self.title_label = ElidedLabel("New chat", header)
        self.title_label.setObjectName("chatTitle")
        self.title_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        h.addWidget(self.title_label, 1)
        self.incognito_button = _header_button(
            "incognito",
            "Incognito",
            "Incognito",
            "Incognito: this chat is neither remembered nor uses memory (Ctrl+Shift+I)",
            header,
            checkable=True,
        )
        self.incognito_button.toggled.connect(self.set_incognito)
        h.addWidget(self.incognito_button)
        self.space_picker = SpacePicker(header)  # the chat's memory space (ui/space_picker.py)
        self.space_picker.changed.connect(self.set_chat_space)
        self.space_picker.manage_requested.connect(self.manage_spaces)
        h.addWidget(self.space_picker)
        self.memory_button = _header_button(
            "memory", "", "Memory inspector", "What Mnemo remembers: show or hide (Ctrl+M)", header, checkable=True
        )
        self.memory_button.setObjectName("plainToggle")
        self.memory_button.clicked.connect(lambda on: self.toggle_inspector(on))
        h.addWidget(self.memory_button)
        self.settings_button = _header_button("settings", "", "Settings", "Settings (Ctrl+,)", header)
        self.settings_button.clicked.connect(self.open_settings)
        h.addWidget(self.settings_button)
        self.help_button = _header_button(
            "help", "", "Help", "How Mnemo remembers: pages, topics, heat, your profile (F1: shortcuts)", header
        )
        self.help_button.clicked.connect(self.show_help)
        h.addWidget(self.help_button)
        lay.addWidget(header)

        self.incognito_banner = QLabel(INCOGNITO_TEXT, pane)
        self.incognito_banner.setObjectName("incognitoBanner")
        self.incognito_banner.setWordWrap(True)
        self.incognito_banner.hide()
        lay.addWidget(self.incognito_banner)
        self.paused_banner = QWidget(pane)  # memory paused: said in the chat, where the user types
        self.paused_banner.setObjectName("pausedBanner")
        pb = QHBoxLayout(self.paused_banner)
        pb.setContentsMargins(12, 3, 12, 3)
        self.paused_label = QLabel(PAUSED_TEXT, self.paused_banner)
        self.paused_label.setObjectName("pausedBanner")
        self.paused_label.setWordWrap(True)
        pb.addWidget(self.paused_label, 1)
        self.resume_button = QPushButton("Resume", self.paused_banner)
        self.resume_button.setToolTip("Remember again from now on")
        self.resume_button.clicked.connect(lambda: self.set_memory_paused(False))
        pb.addWidget(self.resume_button)
        self.paused_banner.hide()
        lay.addWidget(self.paused_banner)

        self.chat_view = ChatView(pane)
        self.chat_view.regenerateRequested.connect(self.regenerate)
        self.chat_view.editRequested.connect(self.begin_edit)
        self.chat_view.traceRequested.connect(self.show_trace)
        self.chat_view.rememberedRequested.connect(self.show_persona_item)
        self.chat_view.branchRequested.connect(self.show_branch)
        self.chat_view.copied.connect(lambda _t: self.statusBar().showMessage("Copied to the clipboard", 2000))
        self.chat_view.empty.models_hint.linkActivated.connect(lambda _link: self.open_settings())
        lay.addWidget(self.chat_view, 1)

        self.edit_banner = QWidget(pane)
        self.edit_banner.setObjectName("editBanner")
        eb = QHBoxLayout(self.edit_banner)
        eb.setContentsMargins(16, 3, 16, 3)
        self.edit_label = QLabel(
            "Editing your message — sending replaces the reply after it (the old one is kept as a branch).",
            self.edit_banner,
        )
        self.edit_label.setObjectName("editBanner")
        self.edit_label.setWordWrap(True)
        eb.addWidget(self.edit_label, 1)
        cancel = QPushButton("Cancel (Esc)", self.edit_banner)
        cancel.clicked.connect(self.cancel_edit)
        eb.addWidget(cancel)
        self.edit_banner.hide()
        lay.addWidget(self.edit_banner)

        self.composer = Composer(pane)
        self.composer.set_enter_sends(self.ctx.settings.ui.enter_sends)
        self.composer.sendRequested.connect(self.send)
        self.composer.stopRequested.connect(self.stop)
        lay.addWidget(self.composer)

        pane.setMinimumWidth(CHAT_MIN_WIDTH)
        self.chat_pane = pane
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(pane)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([SIDEBAR_WIDTH, 850])
        self._sidebar_wanted = True  # the user's choice; a narrow window may hide the list meanwhile
        self.setCentralWidget(self.splitter)
        self.resize(1100, 720)
        self.setMinimumSize(640, 420)

    def _action(
        self, text: str, slot, shortcut=None, *, icon: str | None = None, checkable: bool = False, menu=None
    ) -> QAction:
        act = QAction(text, self)
        if icon:
            act.setIcon(theme.icon(icon))
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        act.setCheckable(checkable)
        act.triggered.connect(slot)
        self.addAction(act)  # shortcuts work even with the menu bar hidden
        if menu is not None:
            menu.addAction(act)
        return act

    def _build_actions(self) -> None:
        mb = self.menuBar()
        chat = mb.addMenu("&Chat")
        self.new_action = self._action("&New chat", self.new_chat, "Ctrl+N", icon="plus", menu=chat)
        self.search_action = self._action(
            "&Search chats", self.sidebar.focus_search, "Ctrl+K", icon="search", menu=chat
        )
        self.focus_action = self._action("Go to the message box", self.composer.focus, "Ctrl+L", menu=chat)
        chat.addSeparator()
        self.stop_action = self._action("S&top reply", self.escape, "Esc", icon="stop", menu=chat)
        self.regenerate_action = self._action(
            "&Regenerate last reply", self.regenerate_last, "Ctrl+R", icon="regenerate", menu=chat
        )
        self.edit_last_action = self._action("&Edit last message", self.edit_last, "Ctrl+E", icon="edit", menu=chat)
        self.copy_action = self._action("&Copy last reply", self.copy_last, "Ctrl+Shift+C", icon="copy", menu=chat)
        chat.addSeparator()
        self.incognito_action = self._action(
            "&Incognito",
            lambda on: self.incognito_button.setChecked(on),
            "Ctrl+Shift+I",
            icon="incognito",
            checkable=True,
            menu=chat,
        )
        self.rename_action = self._action(
            "Rena&me chat…", lambda: self.rename_conversation(self.current_id), "F2", icon="edit", menu=chat
        )
        self.export_chat_action = self._action(
            "E&xport chat…", lambda: self.export_conversation(self.current_id), "Ctrl+Shift+E", menu=chat
        )
        self.chat_memory_action = self._action(
            "Show &what Mnemo remembers from this chat", lambda: self.show_chat_memory(self.current_id), menu=chat
        )
        self.forget_chat_action = self._action(
            "&Forget what Mnemo learned from this chat…",
            lambda: self.forget_conversation_memory(self.current_id),
            menu=chat,
        )
        self.delete_action = self._action(
            "&Delete chat…", lambda: self.delete_conversation(self.current_id), None, icon="trash", menu=chat
        )
        chat.addSeparator()
        self.import_action = self._action("Im&port conversations…", self.import_dialog, "Ctrl+I", menu=chat)
        self.settings_action = self._action("Settin&gs…", self.open_settings, "Ctrl+,", icon="settings", menu=chat)
        self.quit_action = self._action("&Quit", self.close, "Ctrl+Q", menu=chat)

        memory = mb.addMenu("&Memory")
        self.inspector_action = self._action(
            "Memory &inspector",
            lambda on: self.toggle_inspector(on),
            "Ctrl+M",
            icon="memory",
            checkable=True,
            menu=memory,
        )
        self.saved_memories_action = self._action("&Saved memories", self.show_saved_memories, menu=memory)
        self.prompt_action = self._action("The &last reply's prompt", self.show_last_prompt, menu=memory)
        self.pause_action = self._action(
            "&Pause memory (remember nothing new)", self.set_memory_paused, checkable=True, menu=memory
        )
        self.pause_action.setEnabled(False)  # until the store says whether memory is paused
        self.remember_action = self._action(
            "&Remember something…", self.remember_something, "Ctrl+Shift+R", menu=memory
        )
        self.deleted_memory_action = self._action(
            "Memory from &deleted chats", self.show_deleted_chats_memory, menu=memory
        )
        self.spaces_action = self._action("Memory spa&ces…", self.manage_spaces, menu=memory)  # ui/spaces_dialog.py
        memory.addSeparator()
        self.export_action = self._action("&Export memory…", self.export_memory, menu=memory)
        # memory cubes (ui/cube_dialog.py): import one, and the list of imports with Undo
        self.import_memory_action = self._action("Import &memory…", self.import_memory, menu=memory)
        self.memory_imports_action = self._action("Memory imp&orts…", self.show_memory_imports, menu=memory)
        memory.addSeparator()
        self.backup_action = self._action("&Back up memory now", self.backups.backup_now, menu=memory)
        self.restore_action = self._action("Res&tore from a backup…", self.backups.restore_from_backup, menu=memory)

        view = mb.addMenu("&View")
        themes = view.addMenu("&Theme")
        group = QActionGroup(self)
        self.theme_actions = {}
        for key, label in (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")):
            act = QAction(label, self, checkable=True)
            act.setChecked(self.ctx.settings.ui.theme == key)
            act.triggered.connect(lambda _c=False, k=key: self.set_theme(k))
            group.addAction(act)
            themes.addAction(act)
            self.theme_actions[key] = act
        self.sidebar_action = self._action(
            "Chat &list", lambda on: self.set_sidebar_visible(on), "Ctrl+Shift+S", checkable=True, menu=view
        )
        self.sidebar_action.setChecked(True)

        ext = mb.findChild(QToolButton, "qt_menubar_ext_button")
        if ext is not None:
            ext.setAccessibleName("More menus")
        helpm = mb.addMenu("&Help")
        self.memory_help_action = self._action("How Mnemo &remembers", self.show_help, menu=helpm)
        self.help_action = self._action("&Keyboard shortcuts", self.show_shortcuts, "F1", icon="help", menu=helpm)
        self._action("&About Mnemo", self.show_about, menu=helpm)

    def _build_status(self) -> None:
        sb = self.statusBar()
        self.model_label = ShrinkingLabel("Model: —", self)  # a narrow window elides it, the tooltip has it all
        self.model_label.setAccessibleName("Model")
        self.load_progress = QProgressBar(self)
        self.load_progress.setRange(0, 0)
        self.load_progress.setFixedWidth(90)
        self.load_progress.setAccessibleName("Loading the model")
        self.load_progress.hide()
        self.speed_label = ShrinkingLabel("", self)
        self.speed_label.setAccessibleName("Speed of the last reply")
        self.jobs_label = QLabel("", self)
        self._job_progress_shown = False
        self.jobs_pending = 0  # memory jobs waiting, as the backend last said
        self._unsent_widget: MessageWidget | None = None  # a message whose send failed before it was stored
        self.jobs_label.setAccessibleName("Memory updates waiting")
        self.memory_notice = QPushButton("Memory updated", self)
        self.memory_notice.setObjectName("memoryNotice")
        self.memory_notice.setToolTip("Long-term memory changed — open the memory inspector")
        self.memory_notice.setAccessibleName("Memory updated: open the memory inspector")
        self.memory_notice.clicked.connect(self._notice_clicked)
        self.memory_notice.hide()
        sb.addPermanentWidget(self.memory_notice)
        sb.addPermanentWidget(self.load_progress)
        sb.addPermanentWidget(self.model_label)
        sb.addPermanentWidget(self.speed_label)
        sb.addPermanentWidget(self.jobs_label)
        self._set_jobs(0)

    def _connect_backend(self) -> None:
        b = self.backend
        b.storeReady.connect(self._store_ready)
        b.storeFailed.connect(self.backups.store_failed)
        b.modelLoading.connect(self._model_loading)
        b.modelLoaded.connect(self._model_loaded)
        b.modelFailed.connect(self._model_failed)
        b.jobsChanged.connect(self._set_jobs)
        b.jobProgress.connect(self._job_progress)
        b.memoryEvent.connect(self._memory_event)
        b.conversationCreated.connect(self._conversation_created)
        b.firstToken.connect(self._first_token)
        b.turnWaiting.connect(self._turn_waiting)
        b.turnStarted.connect(self._turn_started)
        b.turnFinished.connect(self._turn_finished)

    # ------------------------------------------------------------------ startup / shutdown
    def start_background_loading(self) -> None:
        """Open the memory store and load the models on worker threads (returns at once)."""
        self.backend.start()
        QTimer.singleShot(300, self.chat_view.prepare)  # after the first paint
        if self._uses_bundled_model():
            chat = self.ctx.settings.chat
            configured = [(chat.server_url, chat.api_key)]
            self.model_finder = ModelFinder(self, lambda: _other_models(configured))
            self.model_finder.done.connect(self._models_found)
            self.model_finder.start()
        if self.ctx.settings_notes:
            QTimer.singleShot(0, self._show_settings_notes)

    def _uses_bundled_model(self) -> bool:
        chat = self.ctx.settings.chat
        return chat.backend == "llama" and not chat.gguf_path.strip()

    def _models_found(self, result) -> None:
        """Models in other apps' folders or served here while the bundled 135M one answers: say so on the
        empty chat."""
        if isinstance(result, Exception) or not self._uses_bundled_model():
            return
        self.chat_view.empty.show_models_hint(*result)

    def _show_settings_notes(self) -> None:
        """settings.json had something Mnemo could not use: say what, once, without blocking."""
        notes, self.ctx.settings_notes = self.ctx.settings_notes, []
        box = QMessageBox(
            QMessageBox.Icon.Warning,
            "Mnemo — settings",
            "Some settings could not be read; defaults are used for them.",
            QMessageBox.StandardButton.Close,
            self,
        )
        box.setInformativeText("\n\n".join(notes) + "\n\nSaving from Settings writes a new settings.json.")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.settings_notes_box = box
        box.open()

    def _settings_store(self) -> QSettings:
        return QSettings(str(self.ctx.paths.config_dir / "window.ini"), QSettings.Format.IniFormat)

    def _restore_geometry(self) -> None:
        qs = self._settings_store()
        geo = qs.value("geometry")
        if isinstance(geo, QByteArray) and not geo.isEmpty():
            self.restoreGeometry(geo)
        split = qs.value("splitter")
        if isinstance(split, QByteArray) and not split.isEmpty():
            self.splitter.restoreState(split)

    def bring_to_front(self) -> None:
        """Mnemo was started again on this memory: show this window instead of a second one."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()
        self.statusBar().showMessage("Mnemo is already open — this is its window", 5000)

    def save_geometry(self) -> None:
        self.ctx.paths.config_dir.mkdir(parents=True, exist_ok=True)
        qs = self._settings_store()
        qs.setValue("geometry", self.saveGeometry())
        qs.setValue("splitter", self.splitter.saveState())
        qs.sync()

    def closeEvent(self, event) -> None:
        if not self._closing:
            self._closing = True
            self.save_geometry()
            self.drafts.save_now()
            self._flush_timer.stop()
            self.hide()  # gone at once, even if a worker takes a moment to stop
            self.backend.shutdown()
        super().closeEvent(event)

    # ------------------------------------------------------------------ backend callbacks
    def _store_ready(self) -> None:
        self.refresh_conversations()
        self.sync_memory_paused()

    def _model_loading(self) -> None:
        self.load_progress.show()
        self.model_label.setText("Loading model…")
        self.statusBar().showMessage("Loading the chat model in the background…", 0)

    def _model_loaded(self, model_id: str) -> None:
        self.load_progress.hide()
        self.model_label.setText(f"Model: {model_id}")
        self.model_label.setToolTip(self._model_description())
        self.statusBar().showMessage("Model ready", 3000)
        if self._turn_widget is not None and self._turn_widget.pending:
            self._turn_widget.set_pending(PENDING_PROMPT)
        self._warm()

    def _model_failed(self, message: str) -> None:
        self.load_progress.hide()
        self.model_label.setText("Model: not loaded")
        self.model_label.setToolTip(message)
        self.statusBar().showMessage("The chat model could not be loaded — see Settings → Model", 0)
        box = QMessageBox(
            QMessageBox.Icon.Critical,
            "Mnemo — chat model",
            "The chat model could not be loaded.",
            QMessageBox.StandardButton.Close,
            self,
        )
        box.setInformativeText(
            f"{message}\n\nChoose another GGUF file or a server in Settings → Model. "
            "You can still read and search your chats."
        )
        settings = box.addButton("Open settings…", QMessageBox.ButtonRole.ActionRole)
        settings.clicked.connect(lambda: QTimer.singleShot(0, self.open_settings))
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.model_error_box = box
        box.open()

    def _model_description(self) -> str:
        c = self.ctx.settings.chat
        if c.backend == "openai":
            return f"OpenAI-compatible server {c.server_url} ({c.server_model or 'default model'})"
        return c.gguf_path or "the bundled SmolLM2-135M (GGUF)"

    def _set_jobs(self, n: int) -> None:
        if n == 0 and self.jobs_pending:
            # memory work just finished: one that used the model replaced its cache, one that changed
            # the persona changed the prompt; either way, prepare the open chat again (cheap when not)
            self._warm()
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

    def _job_progress(self, what: str, done: int, total: int) -> None:
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

    def _memory_event(self, event) -> None:
        kind = getattr(event, "kind", "")
        if kind in ("paused", "resumed"):
            self.show_memory_paused(kind == "paused")
        if kind in MEMORY_UPDATE_KINDS:
            self._notice_event = event  # the notice opens the inspector where this happened
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
            self.statusBar().showMessage(f"Memory: {getattr(event, 'summary', 'a job failed')}", 6000)

    def _notice_clicked(self) -> None:
        self.memory_notice.hide()
        event, self._notice_event = getattr(self, "_notice_event", None), None
        panel = self.show_inspector()
        show = getattr(panel, "show_event", None)
        if event is not None and callable(show):
            show(event)

    # ------------------------------------------------------------------ conversations
    def refresh_conversations(self) -> None:
        if not self.backend.started:
            return
        self.refresh_spaces()
        if self.sidebar.searching:
            self.search(self.sidebar.search.text().strip())
            return

        def show(convs):
            self.sidebar.set_conversations(convs, self.current_id)
            for c in convs:  # keep the header in step (the first message names a new chat)
                if c.id == self.current_id and c.title != self.current_title:
                    self.current_title = c.title
                    self._update_header()

        self.backend.db(lambda s: s.conversations.list_conversations(limit=LIST_LIMIT), show)

    def search(self, text: str) -> None:
        if not self.backend.started:
            return
        if not text:
            self.sidebar.end_search()
            self.refresh_conversations()
            return
        self.backend.db(
            lambda s: s.conversations.search_conversations(text),
            lambda rows: self.sidebar.set_search_results(rows, self.current_id),
        )

    def set_chat_space(self, space_id: int, read_all: bool) -> None:
        """The picker's choice: the open chat writes to `space_id` from now on (a new chat takes it when
        its first message creates it)."""
        cid = self.current_id
        if cid is not None and self.backend.started:
            self.backend.db(lambda s: set_chat_space(s, cid, space_id, read_all=read_all), None, self.show_db_error)

    def refresh_spaces(self) -> None:
        """Read the memory's spaces into the picker (hidden while there is only one)."""
        if self.backend.started:
            self.backend.db(lambda s: [(sp.id, sp.name) for sp in s.spaces.list()], self.space_picker.set_spaces)

    def new_chat(self) -> None:
        self.cancel_edit()
        self._load_seq += 1
        self._detach_turn()
        self.current_id = None
        self.current_title = "New chat"
        self.current_incognito = False
        self.chat_view.clear()
        self.sidebar.select(None)
        self._update_header()
        self.composer.focus()
        self._warm()

    def open_conversation(self, cid: int | None, *, focus_message: int | None = None) -> None:
        if cid is None:
            return self.new_chat()
        if cid == self.current_id and not self.chat_view.is_empty and focus_message is None:
            return
        turn = self.backend.turn
        if focus_message is not None and self.backend.busy and turn is not None and turn.conversation_id == cid:
            focus_message = None  # keep the streaming branch on screen
        self.cancel_edit()
        self._load_seq += 1
        seq = self._load_seq
        self._detach_turn()
        self.current_id = cid
        self.sidebar.select(cid)

        def load(store):
            leaf = None
            if focus_message is not None:  # the branch through that message, to its newest end
                leaf = focus_message
                while True:
                    children = store.conversations.message_children(leaf)
                    if not children:
                        break
                    leaf = children[-1].id
            return (
                store.conversations.get_conversation(cid),
                store.conversations.list_messages(cid, leaf_id=leaf),
                store.conversations.message_siblings(cid),
            )

        def shown(value):
            if seq != self._load_seq:
                return  # the user moved on
            conv, messages, siblings = value
            if conv is None:
                return self.new_chat()
            self.current_title = conv.title
            self.current_incognito = bool(conv.incognito)
            self.space_picker.show_chat(conv.space_id, conv.read_spaces == "all")
            self._update_header()
            self.chat_view.set_messages(messages, siblings)
            self._reattach_turn(cid)
            self.chat_view.set_busy(self.backend.busy)
            self.update_actions()
            if focus_message is not None:
                self.chat_view.reveal(focus_message)
            self._warm()

        self.backend.db(load, shown, self.show_db_error)

    def show_branch(self, message_id: int) -> None:
        """Switch to another version of a message (‹ › on a regenerated reply or an edited message)."""
        if self.backend.busy:
            self.statusBar().showMessage("Wait for the reply to finish (or stop it) to switch versions", 4000)
            return
        if self.current_id is not None:
            self.open_conversation(self.current_id, focus_message=message_id)

    def refresh_siblings(self) -> None:
        """Update the ‹ i/n › navigators of the shown branch (after a regenerate or an edit)."""
        cid = self.current_id
        if cid is None or not self.backend.started:
            return

        def shown(siblings):
            if cid != self.current_id:
                return
            for w in self.chat_view.messages():
                w.set_siblings(siblings.get(w.message_id, []))

        self.backend.db(lambda store: store.conversations.message_siblings(cid), shown, self.show_db_error)

    def latest_reply_id(self) -> int | None:
        """The newest saved reply of the chat on screen (the inspector's trace opens on it)."""
        last = self.chat_view.last("assistant")
        return last.message_id if last is not None else None

    def show_message(self, conversation_id: int, message_id: int) -> None:
        """Open a conversation at one message (the memory inspector's "go to message")."""
        self.open_conversation(conversation_id, focus_message=message_id)

    def show_db_error(self, exc: BaseException) -> None:
        log.error("database call failed: %s", exc)
        from memory_core import is_storage_full

        if is_storage_full(exc):
            self.statusBar().showMessage(
                "The disk is full: the change was not saved. Free some disk space and try again.", 10000
            )
        else:
            self.statusBar().showMessage(f"Database error: {exc}", 8000)

    def rename_conversation(self, cid: int | None) -> None:
        if cid is None:
            return
        old = self.sidebar.title_of(cid) or (self.current_title if cid == self.current_id else "")
        title, ok = QInputDialog.getText(self, "Rename chat", "Title:", text=old)
        title = " ".join(title.split())
        if not ok or not title:
            return

        def done(_):
            if cid == self.current_id:
                self.current_title = title
                self._update_header()
            self.refresh_conversations()

        self.backend.db(lambda s: operations.rename_chat(s, cid, title), done, self.show_db_error)

    def export_conversation(self, cid: int | None, path: str | None = None, fmt: str | None = None) -> None:
        """Chat ▸ Export chat… and the sidebar's Export…: the branch on screen (another chat: its newest
        branch) as a Markdown transcript that Mnemo imports again, or as JSON with every field. Written
        on the database thread, atomically (app.operations.chat_export)."""
        if cid is None:
            self.statusBar().showMessage("Open a chat to export it", 4000)
            return
        title = self.sidebar.title_of(cid) or self.current_title or "chat"
        if path is None:
            from PySide6.QtWidgets import QFileDialog

            name = re.sub(r'[\\/:*?"<>|\s]+', " ", title).strip()[:80] or "chat"
            path, chosen = QFileDialog.getSaveFileName(
                self,
                "Export chat",
                str(Path.home() / f"{name}.md"),
                "Markdown transcript (*.md);;JSON, every field (*.json)",
            )
            if not path:
                return
            fmt = "json" if chosen.startswith("JSON") else "markdown"
            if not Path(path).suffix:
                path += ".json" if fmt == "json" else ".md"
        shown = [w.message_id for w in self.chat_view.messages() if w.message_id is not None]
        leaf = shown[-1] if cid == self.current_id and shown else None

        def work(store):
            return operations.export_chat(store, cid, path, fmt=fmt, leaf_id=leaf)

        def done(result):
            self.statusBar().showMessage(
                f"Exported “{result.title}” ({count(result.messages, 'message')}) to {result.path}", 8000
            )

        def failed(exc):
            from memory_core import is_storage_full

            log.error("exporting chat %s failed: %s", cid, exc)
            why = "the disk is full" if is_storage_full(exc) else str(exc)
            self.statusBar().showMessage(f"The chat was not exported ({why}); nothing was written.", 10000)

        self.backend.db(work, done, failed)

    def _question(self, title: str, text: str, detail: str, yes: str, tick: str | None = None) -> tuple[bool, bool]:
        """A question whose yes-button names the act ("Delete", "Forget"), Cancel by default, with an
        optional tick box. Returns (yes, ticked)."""
        box = QMessageBox(
            QMessageBox.Icon.Question,
            title,
            text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            self,
        )
        plain.label(box).button(QMessageBox.StandardButton.Yes).setText(yes)  # chat names are text
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.setInformativeText(detail)
        check = None
        if tick:
            check = QCheckBox(tick, box)
            box.setCheckBox(check)
        ok = box.exec() == QMessageBox.StandardButton.Yes
        return ok, bool(ok and check is not None and check.isChecked())

    def tell(self, title: str, text: str) -> None:
        """A message to acknowledge, its text shown as written (it may quote a chat's name)."""
        plain.label(
            QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Close, self)
        ).exec()

    def ask_delete(self, name: str, held) -> tuple[bool, bool]:
        """Ask whether to delete chat `name`, offering to forget what memory learned from it (`held`,
        an app.operations.chat_memory.ChatMemory). Returns (delete, forget too). Tests replace this hook."""
        if held.empty:
            return self._question(
                "Delete chat", f"Delete “{name}” and its messages?", "Memory holds nothing from it.", "Delete"
            )
        return self._question(
            "Delete chat",
            f"Delete “{name}” and its messages?",
            "Unticked, what Mnemo learned from it stays in memory (the inspector can forget it later, page by page).",
            "Delete",
            tick=f"Also forget what Mnemo learned from it: {held.describe()}",
        )

    def ask_forget(self, name: str, held) -> bool:
        """Ask whether to forget what memory learned from chat `name` (`held` says what). Tests replace it."""
        return self._question(
            "Forget what Mnemo learned",
            f"Forget what Mnemo learned from “{name}”?",
            f"This forgets {held.describe()}, for good.\n\nThe chat and its messages stay; what "
            "you say in it from now on is remembered again, unless you make it incognito.",
            "Forget",
        )[0]

    def _with_chat_memory(self, cid: int, then) -> None:
        """`then(name, held)` on the UI thread, once the database thread has read what memory holds from
        chat `cid` (app.operations.chat_memory.chat_memory), for a question that names it."""
        name = self.sidebar.title_of(cid) or self.current_title
        self.backend.db(lambda s: operations.chat_taught(s, cid), lambda held: then(name, held), self.show_db_error)

    def delete_conversation(self, cid: int | None) -> None:
        if cid is None:
            return

        def ask(name, held) -> None:
            yes, forget = self.ask_delete(name, held)
            if yes:
                self._after_turn_in(cid, lambda: self._delete_now(cid, forget=forget))

        self._with_chat_memory(cid, ask)

    def forget_conversation_memory(self, cid: int | None) -> None:
        """Forget what memory learned from a chat (app.operations.chat_memory); the chat and its messages stay."""
        if cid is None:
            return

        def ask(name, held) -> None:
            if held.empty:
                self.tell("Forget what Mnemo learned", f"Memory holds nothing from “{name}”.")
            elif self.ask_forget(name, held):
                self._after_turn_in(cid, lambda: self._forget_now(cid, name))

        self._with_chat_memory(cid, ask)

    def _after_turn_in(self, cid: int, action) -> None:
        """Run `action` now, or, while a reply streams in chat `cid`, stop it and run `action` once the
        stopped reply has been saved (so nothing is written to the chat or its memory after it)."""
        turn = self.backend.turn
        if turn is not None and not turn.done and turn.conversation_id == cid:
            self._after_turn.append(action)
            self.backend.stop_turn()
            return
        action()

    def _forget_now(self, cid: int, name: str) -> None:
        def done(gone):
            self.refresh_conversations()
            self.statusBar().showMessage(f"Forgot what Mnemo learned from “{name}”: {gone.describe()}", 8000)
            self.backups.offer_to_drop_forgotten()

        self.backend.db(lambda s: operations.forget_chat(s, cid), done, self.show_db_error)

    def _delete_now(self, cid: int, *, forget: bool = False) -> None:
        def done(gone):
            if cid == self.current_id:
                self.new_chat()
            self.refresh_conversations()
            self.statusBar().showMessage(
                "Chat deleted"
                if gone is None or gone.empty
                else f"Chat deleted, and what Mnemo learned from it forgotten: {gone.describe()}",
                8000,
            )
            self.backups.offer_to_drop_forgotten()

        self.backend.db(lambda s: operations.delete_chat(s, cid, forget=forget), done, self.show_db_error)

    def set_incognito(self, on: bool) -> None:
        if self.incognito_action.isChecked() != on:
            self.incognito_action.setChecked(on)
        if on == self.current_incognito:
            return
        self.current_incognito = on
        self._update_header()
        cid = self.current_id
        if cid is not None and self.backend.started:
            self.backend.db(
                lambda s: operations.set_incognito(s, cid, on),
                lambda _: self.refresh_conversations(),
                self.show_db_error,
            )

    def _update_header(self) -> None:
        self.title_label.setText(self.current_title or "New chat")
        for w in (self.incognito_button, self.incognito_action):
            w.blockSignals(True)
            w.setChecked(self.current_incognito)
            w.blockSignals(False)
        self.incognito_banner.setVisible(self.current_incognito)
        self.paused_banner.setVisible(getattr(self, "memory_paused", False) and not self.current_incognito)
        self.setWindowTitle(f"{self.current_title} — Mnemo" if self.current_id is not None else "Mnemo")
        self.update_actions()

    # ------------------------------------------------------------------ turns
    def send(self) -> None:
        text = self.composer.text()
        if not text.strip() or self.backend.busy:
            return
        if not self.backend.started:
            self.start_background_loading()
        # the workers cannot run a turn without the database; whichever worker found it first (the scheduler's
        # may, before the database worker's own open has failed) says so
        if self.backend.store_ok is False or self.backend.store_error is not None:
            self.statusBar().showMessage("Cannot send: the memory database could not be opened", 8000)
            return
        if self.editing_id is not None:
            mid = self.editing_id
            old = self.chat_view.widget_of(mid)
            self.cancel_edit(keep_text=True)
            if old is not None:
                self.chat_view.remove_from(old)
            turn = Turn(EDIT, self.current_id, text=text, message_id=mid)
        else:
            shown = self.chat_view.last()  # continue the branch on screen (it may be an older version)
            turn = Turn(
                SEND,
                self.current_id,
                text=text,
                incognito=self.current_incognito if self.current_id is None else False,
                space=(self.space_picker.space_id(), self.space_picker.read_all()),
                parent_id=shown.message_id if shown is not None and self.current_id is not None else None,
            )
        self.composer.clear()
        self.drafts.save_now()  # sent: a crash from here on must not bring it back as a draft
        unsent, self._unsent_widget = self._unsent_widget, None
        if unsent is not None and any(w is unsent for w in self.chat_view.messages()):
            self.chat_view.remove_from(unsent)  # the failed try (never stored) gives way to this one
        user = self.chat_view.add_message("user", text)
        self._start_turn(turn, user)

    def regenerate(self, assistant_id: int) -> None:
        if self.backend.busy:
            return
        self.cancel_edit()
        old = self.chat_view.widget_of(assistant_id)
        if old is not None:
            self.chat_view.remove_from(old)
        self._start_turn(Turn(REGENERATE, self.current_id, message_id=assistant_id), None)

    def regenerate_last(self) -> None:
        last = self.chat_view.last("assistant")
        if last is not None and last.message_id is not None:
            self.regenerate(last.message_id)

    def begin_edit(self, user_id: int, text: str) -> None:
        if self.backend.busy:
            return
        self.editing_id = user_id
        self.composer.set_text(text)
        self.edit_banner.show()
        self.composer.focus()

    def edit_last(self) -> None:
        last = self.chat_view.last("user")
        if last is not None and last.message_id is not None:
            self.begin_edit(last.message_id, last.text)

    def cancel_edit(self, *, keep_text: bool = False) -> None:
        if self.editing_id is None:
            return
        self.editing_id = None
        self.edit_banner.hide()
        if not keep_text:
            self.composer.clear()

    def copy_last(self) -> None:
        last = self.chat_view.last("assistant")
        if last is not None:
            last.copy()

    def stop(self) -> None:
        self.backend.stop_turn()

    def escape(self) -> None:
        """Esc: stop a reply; else cancel an edit; else clear the search."""
        if self.backend.busy:
            self.stop()
        elif self.editing_id is not None:
            self.cancel_edit()
        elif self.sidebar.search.text():
            self.sidebar.search.clear()

    def _start_turn(self, turn: Turn, user_widget: MessageWidget | None) -> None:
        assistant = self.chat_view.add_message("assistant", "", status="streaming")
        assistant.set_pending(PENDING_LOADING if self.backend.model_loading else PENDING_PROMPT)
        self._turn_widget = assistant
        self._turn_user_widget = user_widget
        try:
            self.backend.start_turn(turn)
        except RuntimeError as exc:
            assistant.set_final("failed", error=str(exc))
            return
        self.composer.set_busy(True)
        self.chat_view.set_busy(True)
        self.update_actions()
        self._flush_timer.start()

    def _first_token(self, turn: Turn) -> None:
        if turn is self.backend.turn:
            self._flush()

    def _turn_waiting(self, turn: Turn) -> None:
        """The reply is queued behind memory work on the model's thread: say so, not "processing"."""
        w = self._turn_widget
        if turn is self.backend.turn and turn.began_at is None and turn.waiting == WAITING_MEMORY and w is not None:
            w.set_pending(PENDING_MEMORY)
            self.statusBar().showMessage("Your reply waits for memory work to give way (a moment)", 5000)

    def _turn_started(self, turn: Turn) -> None:
        w = self._turn_widget
        if turn is self.backend.turn and w is not None and w.pending and turn.first_token_at is None:
            w.set_pending(PENDING_LOADING if self.backend.model_loading else PENDING_PROMPT)

    def pending_text(self, turn: Turn) -> str:
        """What the reply being waited for says: its state and, after two seconds, how long since sending."""
        w = self._turn_widget
        base = (w.pending_label if w is not None else "") or PENDING_PROMPT
        waited = time.perf_counter() - turn.started_at
        return f"{base} {waited:.0f} s" if waited >= 2 else base

    def _flush(self) -> None:
        turn = self.backend.turn
        if turn is None:
            self._flush_timer.stop()
            return
        chunk = turn.take_new()
        if chunk and self._turn_widget is not None:
            self._turn_widget.append_text(chunk)
        elif self._turn_widget is not None and self._turn_widget.pending and not turn.done:
            self._turn_widget.show_pending_time(self.pending_text(turn))

    def _detach_turn(self) -> None:
        """The view is about to show something else: stop drawing the streaming reply into it."""
        self._turn_widget = None
        self._turn_user_widget = None

    def _reattach_turn(self, cid: int) -> None:
        """Back on the conversation whose reply is still streaming: draw it again."""
        turn = self.backend.turn
        if turn is None or turn.done or turn.conversation_id != cid:
            return
        last = self.chat_view.last()
        if last is not None and last.role == "assistant" and last.status == "streaming":
            widget = last
        else:
            if turn.kind == SEND and (last is None or last.role != "user" or last.text != turn.text):
                self.chat_view.add_message("user", turn.text)
            widget = self.chat_view.add_message("assistant", "", status="streaming")
        turn.take_new()
        widget.set_text(turn.text_so_far())
        pending = PENDING_MEMORY if turn.waiting == WAITING_MEMORY else PENDING_PROMPT
        widget.set_pending(None if turn.first_token_at else pending)
        self._turn_widget = widget

    def _conversation_created(self, turn: Turn) -> None:
        if self.current_id is None and self._turn_widget is not None:
            self.current_id = turn.conversation_id
            self._update_header()
        self.refresh_conversations()

    def _turn_finished(self, turn: Turn) -> None:
        self._flush()
        self._flush_timer.stop()
        self.composer.set_busy(False)
        widget, user_widget = self._turn_widget, self._turn_user_widget
        self._turn_widget = self._turn_user_widget = None
        result = turn.result
        if result is not None:
            if widget is not None:
                if widget.text != result.text:
                    widget.set_text(result.text)
                widget.set_final(
                    result.status, message_id=result.assistant_message_id, error=result.error, stats=result.stats
                )
            if user_widget is not None:
                user_widget.set_message_id(result.user_message_id)
            if (result.stats or {}).get("forgot"):  # "Forget that …": backups may still hold it
                self.backups.offer_to_drop_forgotten()
            if result.error and result.status != "failed":  # e.g. saved, but not added to memory
                self.statusBar().showMessage(result.error, 10000)
            tps = (result.stats or {}).get("tokens_per_s") or 0.0
            if tps:
                self.last_tokens_per_s = float(tps)
                self.speed_label.setText(
                    f"Last reply: {tps:.1f} tokens/s" if tps < 10 else f"Last reply: {tps:.0f} tokens/s"
                )
                st = result.stats
                queued = st.get("queued_s") or 0.0
                self.speed_label.setToolTip(
                    f"{st.get('completion_tokens', 0)} tokens; the first came {st.get('time_to_first_token_s', 0):.2f} s "
                    "after you sent"
                    + (f" (of which {queued:.1f} s waiting for memory work or the model)" if queued >= 0.1 else "")
                    + f"; prompt {st.get('prompt_tokens', 0)} tokens "
                    f"({st.get('cached_prompt_tokens', 0)} of them already processed)"
                )
        else:
            if widget is not None:
                widget.set_final("failed", message_id=turn.failed_reply_id, error=turn.error)
            if turn.user_message_id is not None:  # stored: kept in the chat, its failed reply can be regenerated
                if user_widget is not None:
                    user_widget.set_message_id(turn.user_message_id)
            elif turn.kind in (SEND, EDIT):
                if not self.composer.text().strip():
                    self.composer.set_text(turn.text)  # nothing typed is lost
                if user_widget is not None and user_widget.message_id is None:
                    self._unsent_widget = user_widget  # shown with its error until the next send
            self.statusBar().showMessage(f"The reply failed: {turn.error}", 8000)
        self.chat_view.set_busy(False)
        self.update_actions()
        QTimer.singleShot(100, self.chat_view.prepare)  # ready widgets for the next message
        if self._after_turn:
            actions, self._after_turn = self._after_turn, []
            for action in actions:
                action()
        elif turn.conversation_id == self.current_id and turn.conversation_id is not None:
            self._refresh_title(turn.conversation_id)
            if turn.kind in (REGENERATE, EDIT):
                self.refresh_siblings()
            if result is not None:
                self._warm()  # the exchange just made joins the cached prefix while the user reads
        self.refresh_conversations()

    def _warm(self) -> None:
        """Let the model process the prompt prefix of the chat on screen (system prompt, persona,
        dialogue) while the user reads or types, so the next reply starts sooner (`Backend.warm`)."""
        if (
            not self.backend.started
            or self.backend.busy
            or not self.backend.model_id
            or not self.ctx.settings.ui.prepare_replies
        ):
            return
        ids = [w.message_id for w in self.chat_view.messages() if w.message_id is not None]
        self.backend.warm(self.current_id, ids[-1] if ids else None)

    def _refresh_title(self, cid: int) -> None:
        def done(conv):
            if conv is not None and cid == self.current_id:
                self.current_title = conv.title
                self._update_header()

        self.backend.db(lambda s: s.conversations.get_conversation(cid), done, self.show_db_error)

    # ------------------------------------------------------------------ dialogs and menus
    def open_settings(self) -> None:
        from ui.settings_dialog import SettingsDialog

        dlg = SettingsDialog(self.ctx, self)
        self.settings_dialog = dlg
        dlg.accepted.connect(lambda: self.apply_settings(dlg))
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.open()

    def apply_settings(self, dlg) -> set[str]:
        changed = dlg.apply()
        self.ctx.save()
        self.settings_changed(changed)
        return changed

    def settings_changed(self, changed: set[str]) -> None:
        s = self.ctx.settings
        if "ui" in changed:
            self.composer.set_enter_sends(s.ui.enter_sends)
            if s.ui.theme != self.themes.mode:
                self.set_theme(s.ui.theme, save=False)
        if "chat" in changed and self.backend.started:
            self.backend.reload_model()
        if "chat" in changed and not self._uses_bundled_model():
            self.chat_view.empty.show_models_hint([])
        if "ui" in changed and self.inspector is not None:
            self.inspector.set_details(s.ui.developer)
        if "custom_instructions" in changed:
            self._warm()  # the instructions are part of every prompt's cached beginning
        notes = []
        if "embedding" in changed:
            notes.append("the embedding model")
        if "memory" in changed:
            notes.append("the memory parameters")
        if notes:
            self.statusBar().showMessage(f"Saved. {' and '.join(notes).capitalize()} apply at the next start.", 8000)
        elif "custom_instructions" in changed:
            self.statusBar().showMessage("Saved. Your custom instructions apply from the next reply.", 5000)
        elif changed:
            self.statusBar().showMessage("Settings saved", 3000)

    def set_theme(self, mode: str, *, save: bool = True) -> None:
        self.ctx.settings.ui.theme = mode
        act = self.theme_actions.get(mode)
        if act is not None:
            act.setChecked(True)
        self.themes.set_mode(mode)
        if save:
            self.ctx.save()

    def set_memory_paused(self, paused: bool) -> None:
        """The global pause switch. It lives in the memory database, so the inspector's switch and
        `mnemo memory pause` are the same one; its "paused"/"resumed" event keeps the views in step."""
        paused = bool(paused)

        def done(_):
            self.show_memory_paused(paused)
            self.statusBar().showMessage(
                "Memory paused: nothing new is remembered" if paused else "Memory resumed", 4000
            )

        def failed(exc):
            self.sync_memory_paused()
            self.statusBar().showMessage(f"Could not change the pause switch: {exc}", 6000)

        self.backend.db(lambda store: operations.set_memory_paused(store, paused), done, failed)

    def sync_memory_paused(self) -> None:
        """Read the pause switch from the store (at start, and after another view changed it)."""
        if self.backend.started:
            self.backend.db(
                lambda store: store.is_paused(),
                self.show_memory_paused,
                lambda exc: log.warning("could not read the pause switch: %s", exc),
            )

    def show_memory_paused(self, paused: bool) -> None:
        self.pause_action.blockSignals(True)
        self.pause_action.setChecked(bool(paused))
        self.pause_action.blockSignals(False)
        self.pause_action.setEnabled(True)
        self.memory_paused = bool(paused)
        self.paused_banner.setVisible(self.memory_paused and not self.current_incognito)

    def import_dialog(self) -> None:
        """Chat ▸ Import conversations…: how to get an export from ChatGPT or Claude, then the file, imported
        in the background with progress."""
        from ui.import_help import ImportHelpDialog

        dlg = ImportHelpDialog(self)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.chosen.connect(self.import_file)
        self.import_help = dlg
        dlg.open()

    def import_file(self, path: str):
        from ui.import_dialog import ImportDialog

        dlg = ImportDialog(self.ctx, path, self)

        def imported(_job) -> None:
            self.refresh_conversations()
            self.backend.notify_jobs()

        dlg.finished_import.connect(imported)
        dlg.instructions_found.connect(self._imported_instructions)
        self.import_window = dlg
        dlg.open()
        dlg.start()
        return dlg

    def show_help(self) -> None:
        """Help ▸ How Mnemo remembers: what pages, topics, heat and the profile are."""
        from ui.help_dialog import MemoryHelpDialog

        dlg = MemoryHelpDialog(self)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.shortcuts_requested.connect(self.show_shortcuts)
        self.help_dialog = dlg
        dlg.open()

    def _imported_instructions(self, text: str) -> None:
        """An import brought the user's custom instructions (ChatGPT's "how to respond"): they become Mnemo's
        when the user has none; otherwise the user is told where they can take them from."""
        s = self.ctx.settings
        text = text.strip()
        if not text or text == s.custom_instructions.strip():
            return
        if not s.custom_instructions.strip():
            s.custom_instructions = text
            self.ctx.save()
            self._warm()
            self.statusBar().showMessage("Your ChatGPT custom instructions are now Mnemo's (Settings ▸ Replies)", 10000)
        else:
            self.statusBar().showMessage(
                "The export's custom instructions differ from yours; yours in Settings ▸ Replies were kept", 10000
            )

    def show_shortcuts(self) -> None:
        from ui.help_dialog import ShortcutsDialog

        dlg = ShortcutsDialog(self)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.shortcuts_dialog = dlg
        dlg.open()

    def show_about(self) -> None:
        from app import __version__

        QMessageBox.about(
            self,
            "About Mnemo",
            f"<b>Mnemo {__version__}</b><p>A local-first chat assistant with long-term memory.</p>"
            f"<p>Data folder: {self.ctx.paths.data_dir}</p>",
        )

    def _inspector_dock(self):
        dock = getattr(self, INSPECTOR_DOCK_ATTR, None)
        try:
            return dock if dock is not None and dock.widget() is not None else None
        except RuntimeError:  # deleted
            return None

    def inspector_shown(self) -> bool:
        dock = self._inspector_dock()
        return dock is not None and dock.isVisible()

    def toggle_inspector(self, on: bool | None = None) -> None:
        """Ctrl+M, Memory ▸ Memory inspector and the header's memory icon: show the inspector, or hide it
        when it is shown."""
        if on is None:
            on = not self.inspector_shown()
        dock = self._inspector_dock()
        if not on and dock is not None:
            dock.hide()
        else:
            self.show_inspector()
        self._sync_inspector_toggles()

    def _sync_inspector_toggles(self, *_args) -> None:
        shown = self.inspector_shown()
        for w in (self.memory_button, self.inspector_action):
            w.blockSignals(True)
            w.setChecked(shown)
            w.blockSignals(False)
        QTimer.singleShot(0, self.fit_layout)

    def inspector_attached(self, dock) -> None:
        """ui.inspector.attach made the dock: follow its showing, hiding and floating."""
        dock.visibilityChanged.connect(self._sync_inspector_toggles)
        dock.topLevelChanged.connect(lambda _floating: QTimer.singleShot(0, self.fit_layout))
        dock.widget().write_space = self.space_picker.space_id  # Add… keeps a fact in the chat's space

    def show_saved_memories(self) -> None:
        """Memory ▸ Saved memories: what Mnemo knows about the user, as plain sentences."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_tab("memories")

    def show_last_prompt(self) -> None:
        """Memory ▸ The last reply's prompt: the whole prompt with the tokens of each part."""
        panel = self.show_inspector()
        mid = self.latest_reply_id()
        if panel is not None and mid is not None:
            panel.show_prompt_for_message(mid)
        elif panel is not None:
            panel.show_tab("prompt")

    # ------------------------------------------------------------------ layout
    def set_sidebar_visible(self, on: bool, *, chosen: bool = True) -> None:
        """Show or hide the chat list (the header's list icon, View ▸ Chat list). `chosen`: the user's choice,
        which a narrow window keeps until it is wide enough again."""
        if chosen:
            self._sidebar_wanted = on
        self.sidebar.setVisible(on)
        for w in (self.sidebar_button, self.sidebar_action):
            w.blockSignals(True)
            w.setChecked(on)
            w.blockSignals(False)
        if chosen:
            QTimer.singleShot(0, self.fit_layout)

    def fit_layout(self) -> None:
        """Keep the chat readable: with the inspector docked, the chat list gives way when the chat would be
        narrower than CHAT_MIN_WIDTH, and comes back when there is room; on a window too narrow for the
        chat and the inspector side by side, the inspector floats beside it."""
        dock = self._inspector_dock()
        docked = dock is not None and dock.isVisible() and not dock.isFloating()
        width = self.width()
        self.speed_label.setVisible(width >= 900)  # a narrow status bar keeps room for its messages
        panel_min = dock.widget().minimumWidth() if dock is not None else 0
        if docked and width - panel_min < CHAT_MIN_WIDTH:
            self._float_inspector(dock)
            docked = False
        room = width - (dock.width() if docked else 0)
        if self.sidebar.isVisible() and room - self.sidebar.minimumWidth() < CHAT_MIN_WIDTH:
            self.set_sidebar_visible(False, chosen=False)
        elif not self.sidebar.isVisible() and self._sidebar_wanted and room - SIDEBAR_WIDTH >= CHAT_MIN_WIDTH:
            self.set_sidebar_visible(True, chosen=False)
        if docked:
            side = self.sidebar.width() if self.sidebar.isVisible() else 0
            most = max(panel_min, width - side - CHAT_MIN_WIDTH)
            if dock.width() > most:
                self.resizeDocks([dock], [most], Qt.Orientation.Horizontal)

    def _float_inspector(self, dock) -> None:
        """The window is too narrow for the chat and the docked inspector: the inspector becomes a window
        of its own beside (or over the right of) the main window, on the same screen."""
        dock.setFloating(True)
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        geo = self.frameGeometry()
        w = max(dock.widget().minimumWidth(), 560)
        x = geo.right() + 1
        if screen is not None and x + w > screen.right():
            x = max(screen.left(), screen.right() - w)
        dock.setGeometry(x, geo.top(), w, max(400, geo.height()))
        self.statusBar().showMessage("The window is narrow: the memory inspector opened as a window of its own", 5000)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if hasattr(self, "sidebar"):
            self.fit_layout()

    def update_actions(self) -> None:
        """Chat-menu actions that need an open chat, or a message in it, are off without one."""
        has_chat = self.current_id is not None
        idle = not self.backend.busy
        last_reply = self.chat_view.last("assistant")
        last_user = self.chat_view.last("user")
        for act in (self.rename_action, self.export_chat_action, self.chat_memory_action, self.forget_chat_action):
            act.setEnabled(has_chat)
        self.delete_action.setEnabled(has_chat)
        self.regenerate_action.setEnabled(
            idle and last_reply is not None and last_reply.message_id is not None and last_reply.can_regenerate
        )
        self.edit_last_action.setEnabled(
            idle and last_user is not None and last_user.message_id is not None and last_user.can_edit
        )
        self.copy_action.setEnabled(last_reply is not None and bool(last_reply.text))
        self.prompt_action.setEnabled(last_reply is not None and last_reply.message_id is not None)

    def show_inspector(self):
        """Open the memory inspector (`ui.inspector.attach(self)`) when it is part of this build;
        return its panel, or None."""
        self.memory_notice.hide()
        try:
            module = importlib.import_module("ui.inspector")
            attach = module.attach
        except (ImportError, AttributeError):
            QMessageBox.information(self, "Memory inspector", "The memory inspector is not part of this build yet.")
            return None
        try:
            self.inspector = attach(self)
        except Exception as exc:
            log.exception("the memory inspector failed to open")
            QMessageBox.warning(self, "Memory inspector", f"The memory inspector could not be opened:\n{exc}")
            return None
        self._sync_inspector_toggles()
        return self.inspector

    def import_memory(self, path: str | None = None):
        """Memory ▸ Import memory…: a memory cube, shown first as what it would add, merge and skip."""
        from ui import cube_dialog

        return cube_dialog.import_cube(self, path) if path else cube_dialog.open_import(self)

    def manage_spaces(self):
        """Memory ▸ Memory spaces… and the space picker's "Spaces…": create, rename, merge and delete
        spaces (ui/spaces_dialog.py), each change on the database thread; the picker follows."""
        from ui.spaces_dialog import SpacesDialog

        if not self.backend.started:
            return None
        dlg = SpacesDialog(self.backend.db, self)
        dlg.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.changed.connect(self.refresh_spaces)
        dlg.show()
        return dlg

    def show_memory_imports(self):
        """Memory ▸ Memory imports…: every cube imported, and Undo."""
        from ui import cube_dialog

        return cube_dialog.open_imports(self)

    def export_memory(self) -> None:
        """Memory ▸ Export memory…: the inspector's export (JSON or Markdown), with its progress line."""
        panel = self.show_inspector()
        if panel is not None:
            panel.export_dialog()

    def remember_something(self) -> None:
        """Memory ▸ Remember something…: the inspector's Persona ▸ Add… (a fact or a trait, kept at once)."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_tab("persona")
            panel.persona.add_item()

    def show_chat_memory(self, cid: int | None) -> None:
        """What memory holds from one chat: the inspector's pages, filtered to it."""
        if cid is None:
            return
        panel = self.show_inspector()
        if panel is not None:
            panel.show_chat_pages(cid, self.sidebar.title_of(cid) or self.current_title or "")

    def show_deleted_chats_memory(self) -> None:
        """The pages of chats deleted without forgetting what they taught (select them and Forget…)."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_chat_pages(None, deleted=True)

    def show_persona_item(self, kind: str, item_id: int) -> None:
        """A reply's "remembered as fact N": that item in the inspector, with its versions."""
        panel = self.show_inspector()
        if panel is not None:
            panel.show_persona_item(kind, item_id)

    def show_trace(self, assistant_message_id: int) -> None:
        """What a reply recalled, and why: the inspector's trace view for that message."""
        panel = self.show_inspector()
        show = getattr(panel, "show_trace_for_message", None)
        if callable(show):
            try:
                show(assistant_message_id)
            except Exception as exc:
                log.exception("showing the trace failed")
                self.statusBar().showMessage(f"Could not show what this reply recalled: {exc}", 6000)

    # ------------------------------------------------------------------ theme
    def _restyle(self, _colors) -> None:
        if not hasattr(self, "help_button"):
            return  # the first theme is applied before the widgets exist
        for b in (
            self.sidebar_button,
            self.incognito_button,
            self.memory_button,
            self.settings_button,
            self.help_button,
        ):
            b.setIcon(theme.icon(b.property("iconName")))
        if hasattr(self, "chat_view"):
            self.chat_view.restyle()
            self.composer.restyle()
            self.sidebar.restyle()
        restyle = getattr(self.inspector, "restyle", None)
        if callable(restyle):
            restyle()
