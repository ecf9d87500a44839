"""`ElidedLabel`: a one-line label that ends with "…" when its text is wider than the label.

A plain QLabel clips a long chat title mid-letter ("…I keep |") and asks its layout for the whole
text's width. This one can shrink to a few characters, shows as much as fits, and carries the
whole text in its tooltip and accessible name.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from ui import plain


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self._full = ""
        plain.label(self)  # a title like "Use the <div> element" is text
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self.setAccessibleName(text)
        self._elide()

    def minimumSizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance("…") * 4, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._elide()

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._elide()

    def _elide(self) -> None:
        # not laid out yet (hidden, no width): the whole text, elided once it is shown
        width = self.contentsRect().width() if self.isVisible() else 0
        shown = (
            self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, width) if width > 0 else self._full
        )
        if shown != super().text():
            super().setText(shown)
        tip = plain.tip(self._full) if shown != self._full else ""
        if tip != self.toolTip():
            self.setToolTip(tip)
