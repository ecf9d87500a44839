"""Memory ▸ Restore from a backup…: choose one of the daily copies, or any Mnemo memory file.

The dialog only chooses; the window checks the file and swaps it in (`ui.backup_restore.BackupRestore.restore_backup`).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from app.operations import backups

PATH_ROLE = Qt.ItemDataRole.UserRole


def describe(path: Path) -> str:
    """One line for a backup: when it was made and its size."""
    return f"{backups.made_at(path)}  ·  {path.stat().st_size / 1e6:.1f} MB  ·  {path.name}"


class RestoreDialog(QDialog):
    """Lists the backups, newest first (the newest is selected); `chosen(Path)` on Restore."""

    chosen = Signal(object)

    def __init__(self, found: list[Path], db_file: Path, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Restore memory from a backup")
        lay = QVBoxLayout(self)
        intro = QLabel(
            "Restoring replaces the memory with the copy you choose: what Mnemo learned after that copy was "
            f"made will not be in memory. The memory it replaces is kept beside it as {db_file.name}"
            ".before-restore-…, so nothing is deleted. Mnemo then reopens its window on the restored memory.",
            self,
        )
        intro.setWordWrap(True)
        lay.addWidget(intro)
        self.list = QListWidget(self)
        self.list.setAccessibleName("Backups")
        for path in found:
            self._add(path)
        self.empty_label = QLabel(
            "No backups yet: Memory ▸ Back up memory now makes one, and Mnemo makes one a day by itself.", self
        )
        self.empty_label.setWordWrap(True)
        self.empty_label.setVisible(not found)
        lay.addWidget(self.list)
        lay.addWidget(self.empty_label)
        self.other_button = QPushButton("Choose another file…", self)
        self.other_button.clicked.connect(self._choose_file)
        lay.addWidget(self.other_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.restore_button = self.buttons.addButton("Restore", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.list.currentItemChanged.connect(lambda *_: self._update())
        self.list.itemDoubleClicked.connect(lambda *_: self.accept())
        if found:
            self.list.setCurrentRow(0)
        self._update()
        self.resize(560, 320)

    def _add(self, path: Path) -> QListWidgetItem:
        item = QListWidgetItem(describe(path), self.list)
        item.setData(PATH_ROLE, str(path))
        item.setToolTip(str(path))
        return item

    def add_file(self, path: Path) -> None:
        """A file chosen outside the backups folder: listed first and selected."""
        item = self._add(Path(path))
        self.list.takeItem(self.list.row(item))
        self.list.insertItem(0, item)
        self.list.setCurrentItem(item)
        self.empty_label.hide()

    def _choose_file(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self,
            "Choose a Mnemo memory file",
            str(Path.home()),
            "SQLite databases (*.sqlite3 *.sqlite *.db);;All files (*)",
        )
        if name:
            self.add_file(Path(name))

    def selected(self) -> Path | None:
        item = self.list.currentItem()
        return Path(item.data(PATH_ROLE)) if item is not None else None

    def _update(self) -> None:
        self.restore_button.setEnabled(self.selected() is not None)

    def accept(self) -> None:
        path = self.selected()
        if path is None:
            return
        super().accept()
        self.chosen.emit(path)
