"""Confirmation and editing dialogs of the memory inspector."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from ui import plain

WIPE_PHRASE = "forget everything"


class TypedConfirmDialog(QDialog):
    """Asks the user to type an exact phrase before a destructive action (OK stays disabled until then)."""

    def __init__(self, title: str, text: str, phrase: str = WIPE_PHRASE, action: str = "Wipe", parent=None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.phrase = phrase
        lay = QVBoxLayout(self)
        msg = plain.label(QLabel(text))
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
            n.setStyleSheet("color: palette(placeholder-text);")
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
    plain.label(box).setText(text)
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


# dimensions offered for a new trait besides those the persona already has (any other can be typed)
COMMON_DIMENSIONS = ("likes", "dislikes", "occupation", "hobbies", "goals", "values", "reply_style")
NEW_ITEM_KINDS = (
    ("A fact about me", "knowledge", "user"),
    ("A fact about the assistant", "knowledge", "assistant"),
    ("A trait of mine", "trait", "user"),
)


class NewPersonaItemDialog(QDialog):
    """Persona ▸ Add…: a fact about the user or the assistant, or a trait (dimension and value) to remember."""

    def __init__(self, dimensions: list[str], parent=None):
        super().__init__(parent)
        self.setWindowTitle("Remember something")
        lay = QVBoxLayout(self)
        note = QLabel(
            "Mnemo keeps it in the persona at once, with “added by the user” as its source. Saying "
            "again what it already holds confirms it; a close fact (a new city, a new job) updates the "
            "earlier one, whose text stays in the version history."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: palette(placeholder-text);")
        lay.addWidget(note)
        form = QFormLayout()
        self.kind = QComboBox()
        for label, _, _ in NEW_ITEM_KINDS:
            self.kind.addItem(label)
        form.addRow("What", self.kind)
        self.fact = QPlainTextEdit()
        self.fact.setPlaceholderText("I am allergic to peanuts.")
        self.fact.setMinimumHeight(70)
        form.addRow("Fact", self.fact)
        self.dimension = QComboBox()
        self.dimension.setEditable(True)
        seen: list[str] = []
        for d in [*dimensions, *COMMON_DIMENSIONS]:
            if d and d not in seen:
                seen.append(d)
        self.dimension.addItems(seen)
        form.addRow("Kind", self.dimension)
        self.value = QLineEdit()
        self.value.setPlaceholderText("jazz")
        form.addRow("Value", self.value)
        lay.addLayout(form)
        self.form = form
        self.pin = QCheckBox("Pin it (automatic updates never change a pinned item)")
        lay.addWidget(self.pin)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Remember")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.kind.currentIndexChanged.connect(self._update)
        self.fact.textChanged.connect(self._update)
        self.value.textChanged.connect(self._update)
        self.dimension.currentTextChanged.connect(self._update)
        self._update()
        self.resize(480, 320)

    def is_trait(self) -> bool:
        return NEW_ITEM_KINDS[self.kind.currentIndex()][1] == "trait"

    def _update(self) -> None:
        trait = self.is_trait()
        for widget, show in ((self.fact, not trait), (self.dimension, trait), (self.value, trait)):
            widget.setVisible(show)
            self.form.labelForField(widget).setVisible(show)
        filled = (
            (self.dimension.currentText().strip() and self.value.text().strip())
            if trait
            else self.fact.toPlainText().strip()
        )
        self.ok.setEnabled(bool(filled))

    def item(self) -> dict:
        """{"kind": "knowledge", "about": owner, "text": …} or {"kind": "trait", "dimension": …, "value": …},
        with "pin"."""
        _, kind, owner = NEW_ITEM_KINDS[self.kind.currentIndex()]
        if kind == "trait":
            return {
                "kind": "trait",
                "dimension": self.dimension.currentText().strip(),
                "value": self.value.text().strip(),
                "pin": self.pin.isChecked(),
            }
        return {
            "kind": "knowledge",
            "about": owner,
            "text": self.fact.toPlainText().strip(),
            "pin": self.pin.isChecked(),
        }


def ask_new_item(parent: QWidget | None, dimensions: list[str]) -> dict | None:
    dlg = NewPersonaItemDialog(dimensions, parent)
    if dlg.exec() == QDialog.DialogCode.Accepted:
        return dlg.item()
    return None
