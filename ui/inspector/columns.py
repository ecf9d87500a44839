"""Columns of the inspector's tables: the `Column` spec, and `ColumnCells`, which answers a model's
data()/headerData() and the fast delegates from those specs.

A table model holds a `ColumnCells` (composition: the models are Qt models first, and the column
logic is the same for the lazy SQL-backed tables and the small lists of ui.inspector.models). The
model gives it its rows through the small `RowSource` protocol; `swap_rows` replaces a model's rows
while its selection stays on the same records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

from ui import plain, theme

RecordRole = Qt.ItemDataRole.UserRole + 1  # the record object of the row
BarRole = Qt.ItemDataRole.UserRole + 2  # float drawn as an in-cell bar (heat, score)
KeyRole = Qt.ItemDataRole.UserRole + 3  # the row's stable key (record id)

# data() is called thousands of times per repaint: compare roles as plain ints
DISPLAY = int(Qt.ItemDataRole.DisplayRole.value)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole.value)
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole.value)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole.value)
_FONT = int(Qt.ItemDataRole.FontRole.value)
_SLOW_ROLES = frozenset({DISPLAY, _TOOLTIP, _ALIGN, _FOREGROUND, _FONT, int(RecordRole), int(BarRole), int(KeyRole)})

ALIGN_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
ALIGN_CENTER = int(Qt.AlignmentFlag.AlignCenter)

TIER_COLORS = {"stm": QColor("#1565c0"), "mtm": QColor("#2e7d32"), "archive": QColor("#757575")}
PLACEHOLDER = "…"
_GREY = QColor("#9e9e9e")


def toned(color: QColor | None) -> QColor | None:
    """A text colour made readable on the theme's background: the light theme's dark blues and greens
    are lightened in the dark theme."""
    if color is None or theme.colors().name != "dark":
        return color
    return color.lighter(175)


@dataclass
class Column:
    key: str
    title: str
    get: Callable[[Any], Any]  # display value
    sort: str | None = None  # the memory core's order_by name; None = not sortable
    width: int = 90
    align: int = ALIGN_LEFT
    tip: Callable[[Any], str] | None = None  # tooltip of a cell
    color: Callable[[Any], QColor | None] | None = None
    bar: Callable[[Any], float] | None = None  # value for BarRole (bar delegate)
    header_tip: str = ""
    bold: Callable[[Any], bool] | None = None


class RowSource(Protocol):
    """What `ColumnCells` reads of its model: the columns, a row's record and display strings, a record's key."""

    columns: list[Column]

    def record_at(self, row: int) -> Any: ...

    def display_at(self, row: int) -> tuple | None: ...

    def key_of(self, rec: Any) -> Any: ...


class ColumnCells:
    """The cells and headers of a table described by `Column` specs, over the rows of a `RowSource`."""

    def __init__(self, rows: RowSource):
        self.rows = rows

    def column_index(self, key: str) -> int:
        for i, c in enumerate(self.rows.columns):
            if c.key == key:
                return i
        raise KeyError(key)

    def display(self, rec) -> tuple:
        """The display strings of a record, one per column (computed once per fetched row)."""
        out = []
        for col in self.rows.columns:
            v = col.get(rec)
            out.append("" if v is None else (v if isinstance(v, str) else str(v)))
        return tuple(out)

    def paint_info(self, row: int, col: int):
        """(text, alignment, colour or None, bold) of a cell, for FastTextDelegate (no Qt round trips)."""
        c = self.rows.columns[col]
        disp = self.rows.display_at(row)
        if disp is None:
            self.rows.record_at(row)
            return (PLACEHOLDER if col == 0 else ""), c.align, _GREY, False
        if c.color is None and c.bold is None:
            return disp[col], c.align, None, False
        rec = self.rows.record_at(row)
        return (
            disp[col],
            c.align,
            c.color(rec) if c.color is not None else None,
            bool(c.bold(rec)) if c.bold is not None else False,
        )

    def bar_info(self, row: int, col: int):
        """(text, bar value or None) of a cell, for BarDelegate's fast path."""
        c = self.rows.columns[col]
        disp = self.rows.display_at(row)
        if disp is None:
            self.rows.record_at(row)
            return (PLACEHOLDER if col == 0 else ""), None
        if c.bar is None:
            return disp[col], None
        return disp[col], float(c.bar(self.rows.record_at(row)))

    def cell(self, index: QModelIndex, role: int):
        """data() for every role but the display strings the models answer themselves."""
        if role not in _SLOW_ROLES or not index.isValid():
            return None
        col = self.rows.columns[index.column()]
        if role == _ALIGN:
            return col.align
        rec = self.rows.record_at(index.row())
        if rec is None:
            if role == DISPLAY:
                return PLACEHOLDER if index.column() == 0 else ""
            if role == _FOREGROUND:
                return QBrush(QColor("#9e9e9e"))
            return None
        if role == DISPLAY:
            v = col.get(rec)
            return "" if v is None else (v if isinstance(v, str) else str(v))
        return self._styled(col, rec, role)

    def _styled(self, col: Column, rec, role: int):
        """A record's tooltip, colour, font, bar value, record or key in one column."""
        if role == _TOOLTIP:
            if col.tip is not None:
                return plain.tip(col.tip(rec))  # page texts and facts may hold "<tags>"
            return None
        if role == _FOREGROUND:
            if col.color is None:
                return None
            c = col.color(rec)
            return QBrush(c) if c is not None else None
        if role == _FONT and col.bold is not None and col.bold(rec):
            f = QFont()
            f.setBold(True)
            return f
        if role == BarRole and col.bar is not None:
            return float(col.bar(rec))
        if role == RecordRole:
            return rec
        if role == KeyRole:
            return self.rows.key_of(rec)
        return None

    def header(self, section: int, orientation, role: int):
        columns = self.rows.columns
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(columns):
            col = columns[section]
            if role == Qt.ItemDataRole.DisplayRole:
                return col.title
            if role == Qt.ItemDataRole.ToolTipRole:
                tip = col.header_tip or col.title
                return tip + ("" if col.sort else " (not sortable)")
            if role == Qt.ItemDataRole.TextAlignmentRole and col.align == ALIGN_LEFT:
                # as the cells: a title centred over a 500-px column sat at the far edge of a docked panel.
                # Number columns keep centred titles: right-aligned, the sort arrow covered their last letter
                return ALIGN_LEFT
        if orientation == Qt.Orientation.Vertical and role == Qt.ItemDataRole.DisplayRole and section >= 0:
            return str(section + 1)
        return None


def swap_rows(
    model: QAbstractItemModel,
    old_count: int,
    new_count: int,
    set_count: Callable[[int], None],
    install: Callable[[], None],
    key_at_old: Callable[[int], Any],
    row_of_new_key: Callable[[Any], int | None],
    known_gone: Callable[[Any], bool],
) -> None:
    """Replace a model's rows while keeping persistent indexes (selection, current item) on the same records.

    Rows added at the end are inserted before, rows lost at the end removed after, a
    layoutChanged in between moves persistent indexes to the new row of their record.
    `set_count` changes the row count the model reports, between the begin and end calls.
    """
    count = old_count
    if new_count > old_count:
        model.beginInsertRows(QModelIndex(), old_count, new_count - 1)
        set_count(new_count)
        count = new_count
        model.endInsertRows()
    model.layoutAboutToBeChanged.emit()
    pers = model.persistentIndexList()
    keys = [key_at_old(p.row()) for p in pers]
    install()
    new_list = []
    for p, k in zip(pers, keys):
        if k is None:
            new_list.append(model.index(p.row(), p.column()) if p.row() < count else QModelIndex())
            continue
        r = row_of_new_key(k)
        if r is not None:
            new_list.append(model.index(r, p.column()))
        elif known_gone(k) or p.row() >= new_count:
            new_list.append(QModelIndex())
        else:
            new_list.append(model.index(p.row(), p.column()))
    model.changePersistentIndexList(pers, new_list)
    model.layoutChanged.emit()
    if new_count < count:
        model.beginRemoveRows(QModelIndex(), new_count, count - 1)
        set_count(new_count)
        model.endRemoveRows()
