"""What the inspector's tabs share: small widget builders, the debounced search box, the technical
columns hidden without Details, and pin-and-forget for the pages and topics tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QTextBrowser, QVBoxLayout

from app.operations import memory as memory_verbs
from ui import theme
from ui.inspector.host import PanelHost
from ui.inspector.models import LazyTableModel
from ui.inspector.tables import InspectorTable


def muted_html() -> str:
    """The colour of secondary text in a rich-text pane, from the theme (a fixed grey was unreadable in dark mode)."""
    return theme.colors().muted


def hide_technical(table, model, group: str, details: bool) -> None:
    """Show a table's technical columns (TECHNICAL_COLUMNS[group]) only with the Details switch."""
    for key in TECHNICAL_COLUMNS.get(group, ()):
        table.setColumnHidden(model.column_index(key), not details)


def button(text: str, tip: str = "", slot=None) -> QPushButton:
    b = QPushButton(text)
    if tip:
        b.setToolTip(tip)
    if slot is not None:
        b.clicked.connect(slot)
    return b


def button_rows(layout: QVBoxLayout, *rows: tuple[QPushButton, ...]) -> None:
    """Add each group of buttons as a row of its own, left-aligned: a docked panel is too narrow for
    one row of them."""
    for buttons in rows:
        row = QHBoxLayout()
        for b in buttons:
            row.addWidget(b)
        row.addStretch(1)
        layout.addLayout(row)


def browser() -> QTextBrowser:
    b = QTextBrowser()
    b.setOpenLinks(False)
    b.setOpenExternalLinks(False)
    b.setMinimumHeight(80)
    return b


def heading(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setStyleSheet("font-weight: 600; padding: 2px 0;")
    lab.setWordWrap(True)  # a docked panel is narrow: the heading wraps rather than being cut
    return lab


class DebouncedLine(QLineEdit):
    """A search box that reports its text 300 ms after the user stops typing."""

    settled = Signal(str)

    def __init__(self, placeholder: str, parent=None):
        super().__init__(parent)
        self.setPlaceholderText(placeholder)
        self.setClearButtonEnabled(True)
        self._t = QTimer(self)
        self._t.setSingleShot(True)
        self._t.setInterval(300)
        self._t.timeout.connect(lambda: self.settled.emit(self.text().strip()))
        self.textChanged.connect(lambda _: self._t.start())


@dataclass
class PinAndForget:
    """Pin/unpin and forget (one item, or the table's selection) for the pages and segments views,
    which each hold one: `kind` is the memory_core item kind, `current_item()` the record in the
    detail pane and `forget_question(ids)` the (title, text) of the confirmation."""

    kind: str
    panel: PanelHost
    table: InspectorTable
    model: LazyTableModel
    current_item: Callable[[], Any]
    forget_question: Callable[[list[int]], tuple[str, str]]

    def toggle_pin(self) -> None:
        it = self.current_item()
        if it is None:
            return
        new, kind = not it.pinned, self.kind
        self.panel.act(lambda s: memory_verbs.pin(s, kind, it.id, new))

    def forget_selected(self) -> None:
        rows = self.table.selected_rows()
        it = self.current_item()
        if not rows and it is not None:
            self._confirm_forget([it.id])
            return
        self.panel.resolve_keys(self.model, rows, self._confirm_forget)

    def _confirm_forget(self, ids: list[int]) -> None:
        ids = sorted(set(i for i in ids if i is not None))
        if not ids:
            return
        title, text = self.forget_question(ids)
        if not self.panel.confirm(title, text, "Forget"):
            return
        kind = self.kind
        self.panel.act(lambda s: memory_verbs.forget(s, kind, ids))


# the columns of each table that only the Details switch shows (their words are the memory core's)
TECHNICAL_COLUMNS = {"events": ("item", "why", "raw"), "segments": ("recency",)}
