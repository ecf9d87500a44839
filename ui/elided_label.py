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
        tip = self._tip_for(shown)
        if tip != self.toolTip():
            super().setToolTip(tip)

    def _tip_for(self, shown: str) -> str:
        """The tooltip while `shown` is on screen: the whole text when it is cut."""
        return plain.tip(self._full) if shown != self._full else ""


class ShrinkingLabel(ElidedLabel):
    """An elided label that asks for its whole text's width (a status bar gives it that when it can, less on
    a narrow window) and whose `text()` is the whole text, as set."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def text(self) -> str:
        return self._full

    def setToolTip(self, tip: str) -> None:
        """A tooltip of the caller's own (what the label stands for): kept, cut or not."""
        self._own_tip = tip
        super().setToolTip(tip)

    def _tip_for(self, shown: str) -> str:
        return getattr(self, "_own_tip", "") or super()._tip_for(shown)

    def sizeHint(self) -> QSize:
        frame = max(0, self.width() - self.contentsRect().width())  # a style sheet's padding, when laid out
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + max(frame, 12) + 8, super().sizeHint().height())
