"""Confirmation and editing dialogs of the memory inspector."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog, QDialogButtonBox, QLabel, QLineEdit, QMessageBox, QPlainTextEdit, QVBoxLayout, QWidget,
)

WIPE_PHRASE = "forget everything"


class TypedConfirmDialog(QDialog):
    """Asks the user to type an exact phrase before a destructive action (OK stays disabled until then)."""

    def __init__(self, title: str, text: str, phrase: str = WIPE_PHRASE, action: str = "Wipe", parent=None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.phrase = phrase
        lay = QVBoxLayout(self)
        msg = QLabel(text)
        msg.setWordWrap(True)
        lay.addWidget(msg)
        lay.addWidget(QLabel(f"Type <b>{phrase}</b> to confirm:"))
        self.edit = QLineEdit()
        self.edit.setPlaceholderText(phrase)
        lay.addWidget(self.edit)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.addButton(action, QDialogButtonBox.ButtonRole.DestructiveRole)
        self.ok.setEnabled(False)
        self.ok.clicked.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.edit.textChanged.connect(lambda t: self.ok.setEnabled(self.matches(t)))
        self.resize(440, self.sizeHint().height())

    def matches(self, text: str) -> bool:
        return text.strip().lower() == self.phrase.lower()

    def accept(self) -> None:
        if self.matches(self.edit.text()):
            super().accept()


class EditTextDialog(QDialog):
    """Edit one or two texts (a page's two sides, or a fact / trait value)."""

    def __init__(self, title: str, fields: list[tuple[str, str]], parent=None, note: str = ""):
        super().__init__(parent)
        self.setWindowTitle(title)
        lay = QVBoxLayout(self)
        if note:
            n = QLabel(note)
            n.setWordWrap(True)
            n.setStyleSheet("color: palette(mid);")
            lay.addWidget(n)
        self.edits: list[QPlainTextEdit] = []
        for label, text in fields:
            lay.addWidget(QLabel(label))
            e = QPlainTextEdit(text)
            e.setMinimumHeight(90)
            lay.addWidget(e)
            self.edits.append(e)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.resize(560, 200 + 120 * len(fields))

    def values(self) -> list[str]:
        return [e.toPlainText() for e in self.edits]


def ask_confirm(parent: QWidget | None, title: str, text: str, action: str = "Forget") -> bool:
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle(title)
    box.setText(text)
    ok = box.addButton(action, QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is ok


def ask_typed(parent: QWidget | None, title: str, text: str, phrase: str = WIPE_PHRASE) -> bool:
    return TypedConfirmDialog(title, text, phrase, parent=parent).exec() == QDialog.DialogCode.Accepted


def ask_edit(parent: QWidget | None, title: str, fields: list[tuple[str, str]], note: str = "") -> list[str] | None:
    dlg = EditTextDialog(title, fields, parent, note)
    if dlg.exec() == QDialog.DialogCode.Accepted:
        return dlg.values()
    return None
