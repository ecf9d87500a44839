"""The main window: conversation sidebar, chat view, composer and header, and the rooms that run them.

The window lays out its widgets and wires them to its rooms, each a class of its own holding the window:
`turns` (ui.window.turns: send, regenerate, edit, stop and the streaming reply), `chats`
(ui.window.chat_ops: rename, delete, forget, export a chat), `menus` (ui.window.menus: the actions),
`dock` (ui.window.inspector_dock: the memory inspector), `dialogs` (ui.window.dialogs: settings,
imports, help), `status` (ui.window.status: the status bar and the memory pause switch) and `backups`
(ui.backup_restore). What stays here is the layout, opening chats, and the header.

Everything slow happens in `ui.bridge.Backend` workers; this module only draws and routes.
Construction is cheap on purpose (no model, no database), so the window paints at once;
`start_background_loading()` then opens the store and loads the models off the UI thread.

Layout: the memory inspector docks on the right and toggles (Ctrl+M, the Memory menu, the header icon);
docked, it never squeezes the chat below `CHAT_MIN_WIDTH`: the chat list gives way first, and on a
window too small for both the inspector floats beside it (`fit_layout`). The chat list collapses too.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, QSize, Qt, QTimer
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.operations import chats as operations
from app.operations.spaces import set_chat_space
from models.discover import find_models, find_servers
from models.resolve import default_gguf_path
from ui.pyside_fix import ensure_refcount_fix

ensure_refcount_fix()  # before any widget work: PySide6 6.12 + Python 3.11 would otherwise abort in minutes
# The imports below build widgets, so they come after the fix above (E402 knowingly).

from ui import theme  # noqa: E402  (after ensure_refcount_fix)
from ui.backup_restore import BackupRestore  # noqa: E402  (after ensure_refcount_fix)
from ui.bridge import Backend  # noqa: E402  (after ensure_refcount_fix)
from ui.chat_view import ChatView  # noqa: E402  (after ensure_refcount_fix)
from ui.composer import Composer  # noqa: E402  (after ensure_refcount_fix)
from ui.conversation_list import ConversationList  # noqa: E402  (after ensure_refcount_fix)
from ui.drafts import DraftKeeper  # noqa: E402  (after ensure_refcount_fix)
from ui.elided_label import ElidedLabel  # noqa: E402  (after ensure_refcount_fix)
from ui.model_finder import ModelFinder  # noqa: E402  (after ensure_refcount_fix)
from ui.space_picker import SpacePicker  # noqa: E402  (after ensure_refcount_fix)
from ui.window.chat_ops import ChatListOps  # noqa: E402  (after ensure_refcount_fix)
from ui.window.dialogs import WindowDialogs  # noqa: E402  (after ensure_refcount_fix)
from ui.window.inspector_dock import InspectorDock  # noqa: E402  (after ensure_refcount_fix)
from ui.window.menus import WindowMenus  # noqa: E402  (after ensure_refcount_fix)
from ui.window.status import StatusRoom  # noqa: E402  (after ensure_refcount_fix)
from ui.window.turns import TurnController  # noqa: E402  (after ensure_refcount_fix)

log = logging.getLogger(__name__)


def _other_models(configured: list[tuple[str, str]]):
    """(GGUF files in other apps' folders but the bundled one, OpenAI-compatible servers answering here):
    what the empty chat suggests while the bundled model answers. Runs off the UI thread."""
    bundled = default_gguf_path().resolve()
    files = [m for m in find_models() if Path(m.path).resolve() != bundled]
    return files, find_servers(configured)


LIST_LIMIT = 300
INCOGNITO_TEXT = "Incognito — this chat is not remembered, and memory is not used for it."
PAUSED_TEXT = "Memory is paused: nothing you say now is remembered (what Mnemo knows is still used)."
CHAT_MIN_WIDTH = 380  # the chat pane stays this wide at least: about 50 characters a line
SIDEBAR_WIDTH = 250


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
    """Lays out the chat and wires it to the rooms; opens chats and keeps the header in step."""

    # the rooms and the widgets they reach through the window (declared: the rooms import this module)
    backups: BackupRestore
    turns: TurnController
    chats: ChatListOps
    dock: InspectorDock
    dialogs: WindowDialogs
    menus: WindowMenus
    status: StatusRoom
    composer: Composer
    drafts: DraftKeeper

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
        self._load_seq = 0
        self._closing = False
        self._built = False  # resizes before the rooms have their widgets lay nothing out
        # the rooms: each holds this window and reaches the widgets and the other rooms through it
        self.turns = TurnController(self, self)
        self.chats = ChatListOps(self, self)
        self.dock = InspectorDock(self, self)
        self.dialogs = WindowDialogs(self, self)
        self.menus = WindowMenus(self, self)

        self._build()
        self.status = StatusRoom(self, self)
        self.menus.build()
        self._built = True
        self._connect_backend()
        self._restore_geometry()
        self.update_header()
        self.drafts = DraftKeeper(ctx.paths.data_dir / "draft.txt", self.composer.text, self)
        draft = self.drafts.load()
        if draft.strip():
            self.composer.set_text(draft)
        self.composer.changed.connect(self.drafts.changed)

    # ------------------------------------------------------------------ building
    def _build(self) -> None:
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setChildrenCollapsible(False)
        self._build_sidebar()
        pane = QWidget(self.splitter)
        lay = QVBoxLayout(pane)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self._build_header(pane))
        self._build_banners(pane, lay)
        self._build_chat(pane, lay)
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

    def _build_sidebar(self) -> None:
        self.sidebar = ConversationList(self.splitter)
        self.sidebar.selected.connect(self.open_conversation)
        self.sidebar.newRequested.connect(self.new_chat)
        self.sidebar.renameRequested.connect(self.chats.rename_conversation)
        self.sidebar.deleteRequested.connect(self.chats.delete_conversation)
        self.sidebar.forgetRequested.connect(self.chats.forget_conversation_memory)
        self.sidebar.memoryRequested.connect(self.dock.show_chat_memory)
        self.sidebar.exportRequested.connect(self.chats.export_conversation)
        self.sidebar.searchChanged.connect(self.search)

    def _build_header(self, pane: QWidget) -> QFrame:
        """The row above the chat: the chat list toggle, the title, incognito, the space, and the icons."""
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
        self.space_picker.manage_requested.connect(self.dialogs.manage_spaces)
        h.addWidget(self.space_picker)
        self.memory_button = _header_button(
            "memory", "", "Memory inspector", "What Mnemo remembers: show or hide (Ctrl+M)", header, checkable=True
        )
        self.memory_button.setObjectName("plainToggle")
        self.memory_button.clicked.connect(lambda on: self.dock.toggle_inspector(on))
        h.addWidget(self.memory_button)
        self.settings_button = _header_button("settings", "", "Settings", "Settings (Ctrl+,)", header)
        self.settings_button.clicked.connect(self.dialogs.open_settings)
        h.addWidget(self.settings_button)
        self.help_button = _header_button(
            "help", "", "Help", "How Mnemo remembers: pages, topics, heat, your profile (F1: shortcuts)", header
        )
        self.help_button.clicked.connect(self.dialogs.show_help)
        h.addWidget(self.help_button)
        return header

    def _build_banners(self, pane: QWidget, lay: QVBoxLayout) -> None:
        """The incognito and memory-paused banners under the header (hidden until they apply)."""
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
        self.resume_button.clicked.connect(lambda: self.status.set_memory_paused(False))
        pb.addWidget(self.resume_button)
        self.paused_banner.hide()
        lay.addWidget(self.paused_banner)

    def _build_chat(self, pane: QWidget, lay: QVBoxLayout) -> None:
        """The chat view, the edit banner and the composer."""
        self.chat_view = ChatView(pane)
        self.chat_view.regenerateRequested.connect(self.turns.regenerate)
        self.chat_view.editRequested.connect(self.turns.begin_edit)
        self.chat_view.traceRequested.connect(self.dock.show_trace)
        self.chat_view.rememberedRequested.connect(self.dock.show_persona_item)
        self.chat_view.branchRequested.connect(self.show_branch)
        self.chat_view.copied.connect(lambda _t: self.statusBar().showMessage("Copied to the clipboard", 2000))
        self.chat_view.empty.models_hint.linkActivated.connect(lambda _link: self.dialogs.open_settings())
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
        cancel.clicked.connect(self.turns.cancel_edit)
        eb.addWidget(cancel)
        self.edit_banner.hide()
        lay.addWidget(self.edit_banner)

        self.composer = Composer(pane)
        self.composer.set_enter_sends(self.ctx.settings.ui.enter_sends)
        self.composer.sendRequested.connect(self.turns.send)
        self.composer.stopRequested.connect(self.turns.stop)
        lay.addWidget(self.composer)

    def _connect_backend(self) -> None:
        b = self.backend
        b.storeReady.connect(self._store_ready)
        b.storeFailed.connect(self.backups.store_failed)
        self.status.connect()
        self.turns.connect()

    # ------------------------------------------------------------------ what other UI code asks of the window
    @property
    def inspector(self):
        """The memory inspector's panel once opened (ui.window.inspector_dock), else None."""
        return self.dock.inspector

    def show_memory_paused(self, paused: bool) -> None:
        """The inspector's pause switch changed (ui.inspector.attach connects it here)."""
        self.status.show_memory_paused(paused)

    def inspector_attached(self, dock) -> None:
        """ui.inspector.attach made the dock (it calls this on the window it docks on)."""
        self.dock.attached(dock)

    # ------------------------------------------------------------------ startup / shutdown
    def start_background_loading(self) -> None:
        """Open the memory store and load the models on worker threads (returns at once)."""
        self.backend.start()
        QTimer.singleShot(300, self.chat_view.prepare)  # after the first paint
        if self.uses_bundled_model():
            chat = self.ctx.settings.chat
            configured = [(chat.server_url, chat.api_key)]
            self.model_finder = ModelFinder(self, lambda: _other_models(configured))
            self.model_finder.done.connect(self._models_found)
            self.model_finder.start()
        if self.ctx.settings_notes:
            QTimer.singleShot(0, self.dialogs.show_settings_notes)

    def uses_bundled_model(self) -> bool:
        chat = self.ctx.settings.chat
        return chat.backend == "llama" and not chat.gguf_path.strip()

    def _models_found(self, result) -> None:
        """Models in other apps' folders or served here while the bundled 135M one answers: say so on the
        empty chat."""
        if isinstance(result, Exception) or not self.uses_bundled_model():
            return
        self.chat_view.empty.show_models_hint(*result)

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
            self.turns.flush_timer.stop()
            self.hide()  # gone at once, even if a worker takes a moment to stop
            self.backend.shutdown()
        super().closeEvent(event)

    def _store_ready(self) -> None:
        self.refresh_conversations()
        self.status.sync_memory_paused()

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
                    self.update_header()

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
        self.turns.cancel_edit()
        self._load_seq += 1
        self.turns.detach()
        self.current_id = None
        self.current_title = "New chat"
        self.current_incognito = False
        self.chat_view.clear()
        self.sidebar.select(None)
        self.update_header()
        self.composer.focus()
        self.warm()

    def open_conversation(self, cid: int | None, *, focus_message: int | None = None) -> None:
        if cid is None:
            return self.new_chat()
        if cid == self.current_id and not self.chat_view.is_empty and focus_message is None:
            return
        turn = self.backend.turn
        if focus_message is not None and self.backend.busy and turn is not None and turn.conversation_id == cid:
            focus_message = None  # keep the streaming branch on screen
        self.turns.cancel_edit()
        self._load_seq += 1
        seq = self._load_seq
        self.turns.detach()
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
            self._show_conversation(cid, value, focus_message)

        self.backend.db(load, shown, self.show_db_error)

    def _show_conversation(self, cid: int, value, focus_message: int | None) -> None:
        """Draw a chat just read on the database thread: (conversation, messages, siblings)."""
        conv, messages, siblings = value
        if conv is None:
            return self.new_chat()
        self.current_title = conv.title
        self.current_incognito = bool(conv.incognito)
        self.space_picker.show_chat(conv.space_id, conv.read_spaces == "all")
        self.update_header()
        self.chat_view.set_messages(messages, siblings)
        self.turns.reattach(cid)
        self.chat_view.set_busy(self.backend.busy)
        self.menus.update_enabled()
        if focus_message is not None:
            self.chat_view.reveal(focus_message)
        self.warm()

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

    def set_incognito(self, on: bool) -> None:
        if self.menus.incognito_action.isChecked() != on:
            self.menus.incognito_action.setChecked(on)
        if on == self.current_incognito:
            return
        self.current_incognito = on
        self.update_header()
        cid = self.current_id
        if cid is not None and self.backend.started:
            self.backend.db(
                lambda s: operations.set_incognito(s, cid, on),
                lambda _: self.refresh_conversations(),
                self.show_db_error,
            )

    def update_header(self) -> None:
        self.title_label.setText(self.current_title or "New chat")
        for w in (self.incognito_button, self.menus.incognito_action):
            w.blockSignals(True)
            w.setChecked(self.current_incognito)
            w.blockSignals(False)
        self.incognito_banner.setVisible(self.current_incognito)
        self.paused_banner.setVisible(self.status.memory_paused and not self.current_incognito)
        self.setWindowTitle(f"{self.current_title} — Mnemo" if self.current_id is not None else "Mnemo")
        self.menus.update_enabled()

    def warm(self) -> None:
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

    def refresh_title(self, cid: int) -> None:
        def done(conv):
            if conv is not None and cid == self.current_id:
                self.current_title = conv.title
                self.update_header()

        self.backend.db(lambda s: s.conversations.get_conversation(cid), done, self.show_db_error)

    # ------------------------------------------------------------------ layout
    def set_sidebar_visible(self, on: bool, *, chosen: bool = True) -> None:
        """Show or hide the chat list (the header's list icon, View ▸ Chat list). `chosen`: the user's choice,
        which a narrow window keeps until it is wide enough again."""
        if chosen:
            self._sidebar_wanted = on
        self.sidebar.setVisible(on)
        for w in (self.sidebar_button, self.menus.sidebar_action):
            w.blockSignals(True)
            w.setChecked(on)
            w.blockSignals(False)
        if chosen:
            QTimer.singleShot(0, self.fit_layout)

    def fit_layout(self) -> None:
        """Keep the chat readable: with the inspector docked, the chat list gives way when the chat would be
        narrower than CHAT_MIN_WIDTH, and comes back when there is room; on a window too narrow for the
        chat and the inspector side by side, the inspector floats beside it."""
        dock = self.dock.dock_widget()
        docked = dock is not None and dock.isVisible() and not dock.isFloating()
        width = self.width()
        self.status.speed_label.setVisible(width >= 900)  # a narrow status bar keeps room for its messages
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
        if self._built:
            self.fit_layout()

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
