"""A QTableView configured for the inspector's models: SQL-backed sorting through the header, fixed
row heights (cheap with 100k rows), and a scroll anchor that keeps the first visible record in
place when a live refresh inserts rows above it."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from ui.inspector.columns import KeyRole
from ui.inspector.models import LazyTableModel, ListModel


class InspectorTable(QTableView):
    current_key_changed = Signal(object)  # key of the new current row (None when cleared)
    delete_pressed = Signal()

    def __init__(
        self,
        model: LazyTableModel | ListModel,
        parent: QWidget | None = None,
        *,
        multi: bool = True,
        sortable: bool = True,
    ):
        super().__init__(parent)
        self.setModel(model)
        self._model = model  # model() is typed QAbstractItemModel; this keeps the records' type
        if hasattr(model, "paint_info"):
            from ui.inspector.delegates import FastTextDelegate

            self._fast = FastTextDelegate(model, self)
            self.setItemDelegate(self._fast)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(
            QAbstractItemView.SelectionMode.ExtendedSelection
            if multi
            else QAbstractItemView.SelectionMode.SingleSelection
        )
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        vh = self.verticalHeader()
        vh.setVisible(False)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(max(22, self.fontMetrics().height() + 8))
        hh = self.horizontalHeader()
        hh.setHighlightSections(False)
        hh.setStretchLastSection(True)
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for i, col in enumerate(getattr(model, "columns", [])):
            self.setColumnWidth(i, col.width)
        self._sortable = sortable and any(c.sort for c in getattr(model, "columns", []))
        if self._sortable:
            hh.setSectionsClickable(True)
            hh.setSortIndicatorShown(True)
            if isinstance(model, LazyTableModel):
                col = model.sort_column()
                order = Qt.SortOrder.DescendingOrder if model.order[1] else Qt.SortOrder.AscendingOrder
                hh.setSortIndicator(col, order)
            hh.sortIndicatorChanged.connect(self._on_sort_indicator)
        self._anchor: tuple | None = None
        model.layoutAboutToBeChanged.connect(self._remember_anchor)
        model.layoutChanged.connect(self._restore_anchor)
        if isinstance(model, LazyTableModel):
            model.modelAboutToBeReset.connect(self._forget_anchor)
        self.selectionModel().currentRowChanged.connect(self._on_current)
        sc = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self)
        sc.setContext(Qt.ShortcutContext.WidgetShortcut)
        sc.activated.connect(self.delete_pressed.emit)

    def table_model(self) -> LazyTableModel | ListModel:
        """The model of records this table shows (what `model()` returns, typed)."""
        return self._model

    # ------------------------------------------------------------------ sorting in SQL
    def _on_sort_indicator(self, column: int, order) -> None:
        m = self.model()
        cols = getattr(m, "columns", [])
        if not (0 <= column < len(cols)) or not cols[column].sort:
            # not sortable in SQL: put the indicator back on the column that is
            hh = self.horizontalHeader()
            hh.blockSignals(True)
            if isinstance(m, LazyTableModel):
                hh.setSortIndicator(
                    m.sort_column(), Qt.SortOrder.DescendingOrder if m.order[1] else Qt.SortOrder.AscendingOrder
                )
            else:
                hh.setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
            hh.blockSignals(False)
            return
        m.sort(column, order)
        self.scrollToTop()

    # ------------------------------------------------------------------ keep the first visible record in place
    def _forget_anchor(self) -> None:
        self._anchor = None

    def _remember_anchor(self, parents=None, hint=None) -> None:
        sb = self.verticalScrollBar()
        top = self.rowAt(0)
        if sb.value() <= 0 or top < 0:
            self._anchor = None
            return
        key = self.model().index(top, 0).data(KeyRole)
        self._anchor = (key, top) if key is not None else None

    def _restore_anchor(self, parents=None, hint=None) -> None:
        anchor, self._anchor = self._anchor, None
        if anchor is None:
            return
        key, old_top = anchor
        row = self._model.row_of_key(key)
        if row is None or row == old_top:
            return
        self.updateGeometries()
        self.verticalScrollBar().setValue(row)

    # ------------------------------------------------------------------ selection helpers
    def _on_current(self, current: QModelIndex, previous: QModelIndex) -> None:
        self.current_key_changed.emit(current.data(KeyRole) if current.isValid() else None)

    def current_record(self):
        idx = self.currentIndex()
        if not idx.isValid():
            return None
        return self.model().record(idx.row())

    def selected_rows(self) -> list[int]:
        return sorted({i.row() for i in self.selectionModel().selectedRows()})

    def select_key(self, key) -> bool:
        """Make the row of `key` current and selected (if it is loaded); True when found."""
        m = self.model()
        row = m.row_of_key(key) if isinstance(m, (LazyTableModel, ListModel)) else None
        if row is None:
            return False
        idx = m.index(row, 0)
        self.selectionModel().setCurrentIndex(
            idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        )
        self.scrollTo(idx)
        return True
