"""Help: the keyboard shortcuts (F1) and how Mnemo remembers (pages, topics, heat, the profile)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
)

from ui.theme import RESOURCES

SHORTCUTS = [
    ("Ctrl+N", "New chat"),
    ("Ctrl+K", "Search chats"),
    ("Enter", "Send (Shift+Enter: new line) — switchable in Settings → Interface"),
    ("Ctrl+Enter", "Send, when Enter adds a line"),
    ("Esc", "Stop the reply · cancel editing · clear the search"),
    ("Ctrl+R", "Regenerate the last reply"),
    ("Ctrl+Shift+C", "Copy the last reply"),
    ("Ctrl+E", "Edit and resend your last message"),
    ("Ctrl+Shift+I", "Incognito for this chat (nothing remembered)"),
    ("F2", "Rename the chat"),
    ("Ctrl+Shift+E", "Export the chat as a Markdown transcript or JSON"),
    ("Ctrl+I", "Import conversations (ChatGPT or Claude export, LoCoMo JSON, transcript)"),
    ("Delete", "Delete the selected chat (in the list)"),
    ("Ctrl+M", "Memory inspector: show or hide"),
    ("Ctrl+Shift+S", "Chat list: hide or show"),
    ("Ctrl+Shift+R", "Remember something: a fact about you or the assistant, or a trait"),
    ("Ctrl+,", "Settings"),
    ("Ctrl+L", "Go to the message box"),
    ("F1", "This list"),
    ("Ctrl+Q", "Quit"),
]


class ShortcutsDialog(QDialog):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.resize(560, 520)
        lay = QVBoxLayout(self)
        table = QTableWidget(len(SHORTCUTS), 2, self)
        table.setHorizontalHeaderLabels(["Keys", "Action"])
        table.verticalHeader().hide()
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        table.setAccessibleName("Keyboard shortcuts")
        for row, (keys, action) in enumerate(SHORTCUTS):
            table.setItem(row, 0, QTableWidgetItem(keys))
            table.setItem(row, 1, QTableWidgetItem(action))
        table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        lay.addWidget(table)
        self.table = table
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)


class MemoryHelpDialog(QDialog):
    """Help ▸ How Mnemo remembers: what pages, topics, heat and the profile are, in a few sentences each
    (resources/help/memory.html)."""

    shortcuts_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("How Mnemo remembers")
        self.resize(620, 640)
        lay = QVBoxLayout(self)
        self.text = QTextBrowser(self)
        self.text.setOpenExternalLinks(False)
        self.text.setHtml((RESOURCES / "help" / "memory.html").read_text(encoding="utf-8"))
        self.text.setAccessibleName("How Mnemo remembers")
        lay.addWidget(self.text, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        keys = QPushButton("Keyboard shortcuts", self)
        keys.clicked.connect(self.shortcuts_requested)
        buttons.addButton(keys, QDialogButtonBox.ButtonRole.HelpRole)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)

    def plain_text(self) -> str:
        return self.text.toPlainText()
