"""The sidebar: New chat, search (title and message text), the conversation list with rename/delete,
grouped by when each chat was last active (Today, Yesterday, Previous 7 days, …)."""

from __future__ import annotations

import datetime as dt
import time

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui import plain, theme

ID_ROLE = Qt.ItemDataRole.UserRole
INCOGNITO_ROLE = Qt.ItemDataRole.UserRole + 1
HEADER_ROLE = Qt.ItemDataRole.UserRole + 2  # a date group's heading, not a chat
SEARCH_DELAY_MS = 200


def date_group(ts: float, now: float | None = None) -> str:
    """The group a chat last active at `ts` goes under: "Today", "Yesterday", "Previous 7 days",
    "Previous 30 days", then its month ("March", or "March 2024" in another year)."""
    today = dt.date.fromtimestamp(now if now is not None else time.time())
    try:
        day = dt.date.fromtimestamp(float(ts))
    except (OverflowError, OSError, ValueError, TypeError):
        return "Earlier"
    days = (today - day).days
    if days <= 0:
        return "Today"
    if days == 1:
        return "Yesterday"
    if days < 7:
        return "Previous 7 days"
    if days < 30:
        return "Previous 30 days"
    return day.strftime("%B") if day.year == today.year else day.strftime("%B %Y")


def _when(ts: float) -> str:
    lt = time.localtime(ts)
    now = time.localtime()
    if lt.tm_year == now.tm_year and lt.tm_yday == now.tm_yday:
        return time.strftime("today %H:%M", lt)
    return time.strftime("%Y-%m-%d %H:%M", lt)


class ConversationList(QFrame):
    selected = Signal(int)
    newRequested = Signal()
    renameRequested = Signal(int)
    deleteRequested = Signal(int)
    forgetRequested = Signal(int)  # forget what memory learned from the chat; the chat stays
    memoryRequested = Signal(int)  # show what memory holds from the chat (the inspector's pages)
    exportRequested = Signal(int)
    searchChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sidebar")
        self.setMinimumWidth(190)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 10, 8, 8)
        lay.setSpacing(8)

        self.new_button = QPushButton("New chat", self)
        self.new_button.setObjectName("newChatButton")
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.new_button.clicked.connect(self.newRequested)
        lay.addWidget(self.new_button)

        self.search = QLineEdit(self)
        self.search.setObjectName("sidebarSearch")
        self.search.setPlaceholderText("Search chats (Ctrl+K)")
        self.search.setAccessibleName("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search_action = self.search.addAction(
            theme.icon("search", theme.colors().muted, 14), QLineEdit.ActionPosition.LeadingPosition
        )
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DELAY_MS)
        self._search_timer.timeout.connect(lambda: self.searchChanged.emit(self.search.text().strip()))
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        self._name_search_buttons()
        lay.addWidget(self.search)

        self.list = QListWidget(self)
        self.list.setAccessibleName("Conversations")
        self.list.setUniformItemSizes(False)
        self.list.setWordWrap(False)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setIconSize(QSize(14, 14))
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._current_changed)
        lay.addWidget(self.list, 1)

        for key, handler in (
            (QKeySequence.StandardKey.Delete, self._delete_current),
            (QKeySequence(Qt.Key.Key_F2), self._rename_current),
        ):
            act = QAction(self.list)
            act.setShortcut(key)
            act.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
            act.triggered.connect(handler)
            self.list.addAction(act)

        self.hint = QLabel("", self)
        self.hint.setObjectName("sidebarHint")
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(self.hint)
        self._searching = False
        self._set_hint()

    # -- content --------------------------------------------------------------------
    def set_conversations(self, conversations: list, current_id: int | None) -> None:
        """Fill the list with conversations (memory_core Conversation records), newest first."""
        if self._searching:
            return
        self._fill([(c, None) for c in conversations], current_id)

    def set_search_results(self, results: list, current_id: int | None) -> None:
        """Show (conversation, snippet) pairs of a search."""
        self._searching = bool(self.search.text().strip())
        self._fill(results, current_id)

    def end_search(self) -> None:
        self._searching = False

    @property
    def searching(self) -> bool:
        return self._searching

    def _fill(self, rows: list, current_id: int | None) -> None:
        self.list.blockSignals(True)
        try:
            self.list.clear()
            muted = theme.colors().muted
            group = None
            for conv, snippet in rows:
                if not self._searching:  # search results go by relevance, not by date
                    g = date_group(conv.updated_at)
                    if g != group:
                        group = g
                        self.list.addItem(self._heading(g))
                title = conv.title or "New chat"
                text = title if not snippet or snippet == title else f"{title}\n{' '.join(snippet.split())[:90]}"
                item = QListWidgetItem(text)
                item.setData(ID_ROLE, conv.id)
                item.setData(INCOGNITO_ROLE, bool(conv.incognito))
                tip = f"{title}\nLast active {_when(conv.updated_at)}"
                if conv.incognito:
                    item.setIcon(theme.icon("incognito", muted, 14))
                    tip += "\nIncognito: not remembered"
                item.setToolTip(plain.tip(tip))
                self.list.addItem(item)
                if conv.id == current_id:
                    self.list.setCurrentItem(item)
        finally:
            self.list.blockSignals(False)
        self._set_hint()

    def _heading(self, text: str) -> QListWidgetItem:
        item = QListWidgetItem(text)
        item.setFlags(Qt.ItemFlag.NoItemFlags)  # not a chat: never selected nor current
        item.setData(HEADER_ROLE, True)
        f = item.font()
        f.setBold(True)
        f.setPointSizeF(max(7.0, f.pointSizeF() * 0.85))
        item.setFont(f)
        item.setForeground(QColor(theme.colors().muted))
        item.setSizeHint(QSize(0, max(22, item.font().pointSize() * 2 + 10)))
        return item

    def groups(self) -> list[str]:
        """The date groups shown, in order."""
        return [self.list.item(i).text() for i in range(self.list.count()) if self.list.item(i).data(HEADER_ROLE)]

    def _set_hint(self) -> None:
        if self.list.count():
            self.hint.hide()
            return
        self.hint.setText("No matching chats." if self._searching else "No chats yet.")
        self.hint.show()

    def select(self, cid: int | None) -> None:
        self.list.blockSignals(True)
        try:
            if cid is None:
                self.list.setCurrentRow(-1)
                self.list.clearSelection()
                return
            for i in range(self.list.count()):
                if self.list.item(i).data(ID_ROLE) == cid:
                    self.list.setCurrentRow(i)
                    return
            self.list.clearSelection()
        finally:
            self.list.blockSignals(False)

    def ids(self) -> list[int]:
        return [
            self.list.item(i).data(ID_ROLE)
            for i in range(self.list.count())
            if self.list.item(i).data(ID_ROLE) is not None
        ]

    def title_of(self, cid: int) -> str | None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(ID_ROLE) == cid:
                return item.text().split("\n", 1)[0]
        return None

    def _name_search_buttons(self) -> None:
        """The line edit's own icon buttons (search icon, clear) get accessible names too."""
        for b in self.search.findChildren(QToolButton):
            action = b.defaultAction()
            clear = action is not None and action.objectName() == "_q_qlineeditclearaction"
            b.setAccessibleName("Clear the search" if clear else "Search")

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def restyle(self) -> None:
        self.search.removeAction(self.search_action)
        self.search_action = self.search.addAction(
            theme.icon("search", theme.colors().muted, 14), QLineEdit.ActionPosition.LeadingPosition
        )
        self._name_search_buttons()
        muted = theme.colors().muted
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(INCOGNITO_ROLE):
                item.setIcon(theme.icon("incognito", muted, 14))
            elif item.data(HEADER_ROLE):
                item.setForeground(QColor(muted))

    # -- interaction ----------------------------------------------------------------
    def _current_changed(self, current: QListWidgetItem | None, _previous) -> None:
        if current is not None and current.data(ID_ROLE) is not None:
            self.selected.emit(current.data(ID_ROLE))

    def _current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(ID_ROLE) if item is not None else None

    def _delete_current(self) -> None:
        cid = self._current_id()
        if cid is not None:
            self.deleteRequested.emit(cid)

    def _rename_current(self) -> None:
        cid = self._current_id()
        if cid is not None:
            self.renameRequested.emit(cid)

    def _menu(self, pos) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(ID_ROLE) is None:
            return
        cid = item.data(ID_ROLE)
        menu = QMenu(self)
        menu.addAction(theme.icon("edit"), "Rename…", lambda: self.renameRequested.emit(cid))
        menu.addAction("Export…", lambda: self.exportRequested.emit(cid))
        menu.addSeparator()
        menu.addAction(
            theme.icon("memory"), "Show what Mnemo remembers from it", lambda: self.memoryRequested.emit(cid)
        )
        menu.addAction("Forget what Mnemo learned from it…", lambda: self.forgetRequested.emit(cid))
        menu.addSeparator()
        menu.addAction(theme.icon("trash"), "Delete…", lambda: self.deleteRequested.emit(cid))
        menu.exec(self.list.viewport().mapToGlobal(pos))
