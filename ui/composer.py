"""The composer: a growing text box, Enter sends / Shift+Enter adds a line (switchable), Send ↔ Stop.

A very large paste (over LARGE_PASTE characters, e.g. a 1 MB log) is not laid out in the
text box — Qt would spend a second wrapping one huge paragraph on every change. It is
kept as an attachment chip ("Pasted text · 1.0M characters") and sent with the message.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QToolButton, QVBoxLayout, QWidget

from ui import markdown, theme

LARGE_PASTE = 50_000
MAX_LINES = 10


class ComposerEdit(QPlainTextEdit):
    submit = Signal()
    largePaste = Signal(str)
    focusChanged = Signal(bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("composerEdit")
        self.enter_sends = True
        self.setTabChangesFocus(True)
        self.setPlaceholderText("Message Mnemo…")
        self.setAccessibleName("Message")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.document().documentLayout().documentSizeChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
            ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
            if (self.enter_sends and not shift and not ctrl) or (not self.enter_sends and ctrl):
                self.submit.emit()
                return
            if self.enter_sends and shift:
                self.textCursor().insertText("\n")
                return
        super().keyPressEvent(event)

    def insertFromMimeData(self, source) -> None:
        if source.hasText():
            text = source.text()
            if len(text) > LARGE_PASTE:
                self.largePaste.emit(text)
                return
        super().insertFromMimeData(source)

    def focusInEvent(self, event) -> None:
        super().focusInEvent(event)
        self.focusChanged.emit(True)

    def focusOutEvent(self, event) -> None:
        super().focusOutEvent(event)
        self.focusChanged.emit(False)

    def _fit(self, *_args) -> None:
        line = self.fontMetrics().lineSpacing()
        lines = max(1, min(MAX_LINES, int(self.document().size().height())))
        h = lines * line + 2 * int(self.document().documentMargin()) + 4
        if h != self.height():
            self.setFixedHeight(h)

    def sizeHint(self) -> QSize:
        return QSize(400, self.height())


class Composer(QFrame):
    sendRequested = Signal()
    changed = Signal()  # the text or the pasted attachment changed (drafts are saved on it)
    stopRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("composerFrame")
        self._busy = False
        self._attachment = ""
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 10, 16, 8)
        outer.setSpacing(4)

        self.box = QFrame(self)
        self.box.setObjectName("composerBox")
        box = QVBoxLayout(self.box)
        box.setContentsMargins(10, 6, 6, 6)
        box.setSpacing(4)

        self.chip = QWidget(self.box)
        chip = QHBoxLayout(self.chip)
        chip.setContentsMargins(0, 0, 0, 0)
        self.chip_label = QLabel("", self.chip)
        self.chip_label.setObjectName("pasteChip")
        chip.addWidget(self.chip_label)
        self.chip_remove = QToolButton(self.chip)
        self.chip_remove.setText("×")
        self.chip_remove.setAccessibleName("Remove pasted text")
        self.chip_remove.setToolTip("Remove the pasted text")
        self.chip_remove.clicked.connect(self.clear_attachment)
        chip.addWidget(self.chip_remove)
        chip.addStretch(1)
        self.chip.hide()
        box.addWidget(self.chip)

        row = QHBoxLayout()
        row.setSpacing(6)
        self.edit = ComposerEdit(self.box)
        self.edit.submit.connect(self._submit)
        self.edit.largePaste.connect(self.set_attachment)
        self.edit.textChanged.connect(self._update_button)
        self.edit.textChanged.connect(self.changed)
        self.edit.focusChanged.connect(self._focus_changed)
        row.addWidget(self.edit, 1)
        self.send_button = QToolButton(self.box)
        self.send_button.setObjectName("sendButton")
        self.send_button.setIconSize(QSize(18, 18))
        self.send_button.clicked.connect(self._button_clicked)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        box.addLayout(row)
        outer.addWidget(self.box)

        self.hint = QLabel("", self)
        self.hint.setObjectName("composerHint")
        outer.addWidget(self.hint)
        self.set_enter_sends(True)
        self._update_button()

    # -- text -----------------------------------------------------------------------
    def text(self) -> str:
        typed = self.edit.toPlainText()
        if self._attachment:
            return f"{typed}\n\n{self._attachment}" if typed.strip() else self._attachment
        return typed

    def set_text(self, text: str) -> None:
        self.clear()
        if len(text) > LARGE_PASTE:
            self.set_attachment(text)
        else:
            self.edit.setPlainText(text)
            cursor = self.edit.textCursor()
            cursor.movePosition(cursor.MoveOperation.End)
            self.edit.setTextCursor(cursor)

    def clear(self) -> None:
        self.edit.clear()
        self.clear_attachment()

    def set_attachment(self, text: str) -> None:
        self._attachment = text
        self.chip_label.setText(f"Pasted text · {markdown.human_size(len(text))}")
        self.chip.show()
        self._update_button()
        self.changed.emit()

    def clear_attachment(self) -> None:
        self._attachment = ""
        self.chip.hide()
        self._update_button()
        self.changed.emit()

    @property
    def attachment(self) -> str:
        return self._attachment

    # -- state ----------------------------------------------------------------------
    def set_enter_sends(self, on: bool) -> None:
        self.edit.enter_sends = on
        self.hint.setText(
            "Enter to send · Shift+Enter for a new line · Esc to stop"
            if on
            else "Ctrl+Enter to send · Enter for a new line · Esc to stop"
        )

    def set_busy(self, busy: bool) -> None:
        """While a reply streams the Send button is a Stop button."""
        self._busy = busy
        self._update_button()

    def restyle(self) -> None:
        self._update_button()

    def _update_button(self) -> None:
        b = self.send_button
        c = theme.colors()
        if self._busy:
            b.setIcon(theme.icon("stop", c.accent_text))
            b.setAccessibleName("Stop")
            b.setToolTip("Stop the reply (Esc)")
            b.setProperty("mode", "stop")
            b.setEnabled(True)
        else:
            b.setIcon(theme.icon("send", c.accent_text))
            b.setAccessibleName("Send")
            b.setToolTip("Send (Enter)" if self.edit.enter_sends else "Send (Ctrl+Enter)")
            b.setProperty("mode", "send")
            b.setEnabled(bool(self._attachment or self.edit.toPlainText().strip()))
        b.style().unpolish(b)
        b.style().polish(b)

    def _focus_changed(self, focused: bool) -> None:
        self.box.setProperty("focused", "true" if focused else "false")
        self.box.style().unpolish(self.box)
        self.box.style().polish(self.box)

    def _button_clicked(self) -> None:
        if self._busy:
            self.stopRequested.emit()
        else:
            self._submit()

    def _submit(self) -> None:
        if not self._busy and (self._attachment or self.edit.toPlainText().strip()):
            self.sendRequested.emit()

    def focus(self) -> None:
        self.edit.setFocus(Qt.FocusReason.ShortcutFocusReason)
