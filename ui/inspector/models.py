"""Qt item models of the memory inspector's tables, shared by its tabs (ui.inspector.tabs).

- `LazyTableModel` (pages, segments): the row count comes from SQL (`count_*`), rows are fetched
  in blocks of `BLOCK` on the inspector's worker thread when a view first asks for them, and
  kept in a small LRU cache. Sorting and filtering are re-queries (`ORDER BY` / `WHERE` in the
  memory core), never Python sorts. A live `refresh()` re-reads the count and the blocks in
  view and swaps them in with rows inserted/removed at the end plus a `layoutChanged` whose
  persistent indexes are remapped by record id — so the user's selection and scroll position
  survive memory updates.
- `ListModel`: small lists fetched whole on the worker (knowledge, events, versions, trace).

Both answer their cells through a `ui.inspector.columns.ColumnCells` they hold. The tabs' own models
(`PagesModel`, `SegmentsModel`, `TraitTreeModel`) live with their tab. Every model passes
`QAbstractItemModelTester` (tests/ui/test_inspector_models.py).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal

from ui.inspector.columns import DISPLAY, PLACEHOLDER, Column, ColumnCells, swap_rows

_ROW_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren
_NO_FLAGS = Qt.ItemFlag.NoItemFlags


# ====================================================================== lazy SQL-backed table
class LazyTableModel(QAbstractTableModel):
    """A table over `count`/`list` queries of the memory core, fetched lazily in blocks on the worker."""

    BLOCK = 200
    MAX_BLOCKS = 40
    NEAR_BLOCKS = 3  # a queued block fetch still runs when it is this close to the rows in view
    PREFETCH = 60  # rows from a block's edge at which the neighbouring block is fetched ahead
    default_order: tuple[str, bool] = ("id", True)

    loaded = Signal()  # a reset or a refresh was applied (the model shows current data)
    error = Signal(str)

    columns: list[Column] = []  # each table's own, set by the subclass

    def __init__(self, worker, parent=None):
        super().__init__(parent)
        self.cells = ColumnCells(self)
        self._worker = worker
        self._count = 0
        self._blocks: OrderedDict[int, list] = OrderedDict()
        self._disp: dict[int, list[tuple]] = {}  # display strings of each loaded block (made on the worker)
        self._gone: set = set()  # keys known to have disappeared in the last refresh
        self._pending: set[int] = set()
        # rows asked for (painted as placeholders) before their block was loaded: block -> [lo, hi].
        # Only those are announced when the block arrives: a dataChanged over rows that are not on
        # screen still repaints the whole viewport (QAbstractItemView), and prefetched blocks are
        # mostly off screen.
        self._asked_unloaded: dict[int, list[int]] = {}
        self._gen = 0
        self._ver = 0
        self._filters: dict[str, Any] = {}
        self._order_by, self._desc = self.default_order
        self._last_row = 0
        self._reload_pending = False
        self._refresh_pending = False
        self.ready = False  # at least one load applied
        self.extra: dict[str, Any] = {}  # per-load extras computed by `_extra_fn` (e.g. the heat scale)
        self.loaded_at = 0.0

    # -------------------------------------------------------------- the columns (ui.inspector.columns)
    def key_of(self, rec) -> Any:
        """A record's stable key: its id."""
        return getattr(rec, "id", None)

    def column_index(self, key: str) -> int:
        return self.cells.column_index(key)

    def paint_info(self, row: int, col: int):
        return self.cells.paint_info(row, col)

    def bar_info(self, row: int, col: int):
        return self.cells.bar_info(row, col)

    def _set_count(self, n: int) -> None:
        self._count = n

    # -------------------------------------------------------------- worker-side hooks (run off the UI thread)
    def _count_fn(self, store, filters: dict) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _fetch_fn(self, store, filters: dict, order_by: str, desc: bool, offset: int, limit: int) -> list:
        raise NotImplementedError  # pragma: no cover - overridden

    def _extra_fn(self, store, filters: dict, first_block=None) -> dict:
        return {}

    def _fetch_block(self, store, filters: dict, order_by: str, desc: bool, offset: int, limit: int):
        """(records, display tuples) of one block — runs on the worker thread."""
        recs = self._fetch_fn(store, filters, order_by, desc, offset, limit)
        return recs, [self.cells.display(r) for r in recs]

    # -------------------------------------------------------------- Qt model API
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self._count

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index, role=DISPLAY):
        if role == DISPLAY:  # the hot path: precomputed strings
            row = index.row()
            if row < 0 or row >= self._count:
                return None
            b = row // self.BLOCK
            disp = self._disp.get(b)
            if disp is None:
                self.record_at(row)  # queues the block's fetch
                return PLACEHOLDER if index.column() == 0 else ""
            self._last_row = row
            i = row - b * self.BLOCK
            return disp[i][index.column()] if i < len(disp) else ""
        return self.cells.cell(index, role)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        return self.cells.header(section, orientation, role)

    # flags(): QAbstractTableModel's own (enabled, selectable, no children) — not overridden, so a
    # repaint does not call into Python once more for every cell.

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        if not (0 <= column < len(self.columns)):
            return
        key = self.columns[column].sort
        if key is None:
            return
        desc = order == Qt.SortOrder.DescendingOrder
        if (key, desc) == (self._order_by, self._desc) and self.ready:
            return
        self._order_by, self._desc = key, desc
        self.reload()

    # -------------------------------------------------------------- public helpers
    @property
    def order(self) -> tuple[str, bool]:
        return self._order_by, self._desc

    def sort_column(self) -> int:
        for i, c in enumerate(self.columns):
            if c.sort == self._order_by:
                return i
        return -1

    @property
    def filters(self) -> dict:
        return dict(self._filters)

    def set_filters(self, **filters) -> None:
        clean = {k: v for k, v in filters.items() if v not in (None, "")}
        if clean == self._filters and self.ready:
            return
        self._filters = clean
        self.reload()

    def record(self, row: int):
        """The record at `row` (None while its block is still loading; a fetch is queued)."""
        return self.record_at(row)

    def peek(self, row: int):
        """The record at `row` if its block is loaded (never queues a fetch)."""
        b = row // self.BLOCK
        rows = self._blocks.get(b)
        if rows is None:
            return None
        i = row - b * self.BLOCK
        return rows[i] if 0 <= i < len(rows) else None

    def loaded_records(self) -> list:
        out = []
        for rows in self._blocks.values():
            out.extend(rows)
        return out

    def row_of_key(self, key) -> int | None:
        for b, rows in self._blocks.items():
            for i, rec in enumerate(rows):
                if self.key_of(rec) == key:
                    return b * self.BLOCK + i
        return None

    def is_loading(self) -> bool:
        return self._reload_pending or self._refresh_pending or bool(self._pending)

    # -------------------------------------------------------------- loading
    def display_at(self, row: int):
        if row < 0 or row >= self._count:
            return None
        b = row // self.BLOCK
        disp = self._disp.get(b)
        if disp is None:
            return None
        self._last_row = row
        i = row - b * self.BLOCK
        self._prefetch(b, i)
        return disp[i] if i < len(disp) else None

    def _prefetch(self, b: int, i: int) -> None:
        """Near the edge of a loaded block, queue its neighbour so scrolling rarely shows placeholders."""
        if i >= self.BLOCK - self.PREFETCH:
            nb = b + 1
            if nb * self.BLOCK < self._count and nb not in self._disp and nb not in self._pending:
                self._request_block(nb)
        elif i < self.PREFETCH and b > 0 and (b - 1) not in self._disp and (b - 1) not in self._pending:
            self._request_block(b - 1)

    def record_at(self, row: int):
        if row < 0 or row >= self._count:
            return None
        self._last_row = row
        b = row // self.BLOCK
        rows = self._blocks.get(b)
        if rows is not None:
            self._blocks.move_to_end(b)
            i = row - b * self.BLOCK
            return rows[i] if i < len(rows) else None
        asked = self._asked_unloaded.get(b)
        if asked is None:
            self._asked_unloaded[b] = [row, row]
        elif row < asked[0]:
            asked[0] = row
        elif row > asked[1]:
            asked[1] = row
        self._request_block(b)
        return None

    def _wanted_block(self, b: int, gen: int, ver: int) -> bool:
        if gen != self._gen or ver != self._ver:
            return False
        return abs(b - self._last_row // self.BLOCK) <= self.NEAR_BLOCKS

    def _request_block(self, b: int) -> None:
        if b in self._pending or self._reload_pending or not self.ready:
            return
        self._pending.add(b)
        gen, ver = self._gen, self._ver
        filters, order_by, desc = dict(self._filters), self._order_by, self._desc
        offset, limit = b * self.BLOCK, self.BLOCK

        def fetch(store):
            return self._fetch_block(store, filters, order_by, desc, offset, limit)

        def done(rows):
            self._pending.discard(b)
            if gen != self._gen or ver != self._ver:
                return
            self._put_block(b, *rows)
            asked = self._asked_unloaded.pop(b, None)
            if asked is not None:  # placeholders were shown for these rows: redraw them
                first, last = asked[0], min(self._count - 1, asked[1])
                if last >= first:
                    self.dataChanged.emit(self.index(first, 0), self.index(last, len(self.columns) - 1))

        def failed(exc: BaseException) -> None:
            self._pending.discard(b)
            self._report(exc)

        self._worker.submit(
            fetch,
            done,
            on_error=failed,
            wanted=lambda: self._wanted_block(b, gen, ver),
            on_skip=lambda: self._pending.discard(b),
            label=f"{type(self).__name__}.block{b}",
        )

    def _put_block(self, b: int, rows: list, disp: list) -> None:
        self._blocks[b] = list(rows)
        self._disp[b] = list(disp)
        self._blocks.move_to_end(b)
        while len(self._blocks) > self.MAX_BLOCKS:
            old, _ = self._blocks.popitem(last=False)
            self._disp.pop(old, None)

    def _install(self, blocks: dict[int, tuple[list, list]]) -> None:
        self._blocks = OrderedDict((b, list(v[0])) for b, v in sorted(blocks.items()))
        self._disp = {b: list(v[1]) for b, v in blocks.items()}

    def _report(self, exc: BaseException) -> None:
        self.error.emit(f"{type(exc).__name__}: {exc}")

    def reload(self, anchor_row: int = 0) -> None:
        """Re-query from scratch (new filter or sort order): count + the first block(s), then reset."""
        self._gen += 1
        self._ver += 1
        self._pending.clear()
        self._asked_unloaded.clear()
        self._reload_pending = True
        gen = self._gen
        filters, order_by, desc = dict(self._filters), self._order_by, self._desc
        first_block = max(0, anchor_row) // self.BLOCK

        def load(store):
            n = self._count_fn(store, filters)
            blocks = {}
            for b in {0, first_block}:
                if b * self.BLOCK < n or b == 0:
                    blocks[b] = self._fetch_block(store, filters, order_by, desc, b * self.BLOCK, self.BLOCK)
            return n, blocks, self._extra_fn(store, filters, blocks.get(0))

        def done(result):
            if gen != self._gen:
                return
            n, blocks, extra = result
            self._reload_pending = False
            self.beginResetModel()
            self._count = n
            self._install(blocks)
            self._gone = set()
            self.extra = extra
            self.ready = True
            self.endResetModel()
            self.loaded_at = time.monotonic()
            self.loaded.emit()

        def failed(exc):
            if gen == self._gen:
                self._reload_pending = False
            self._report(exc)

        self._worker.submit(load, done, on_error=failed, label=f"{type(self).__name__}.reload")

    def refresh(self) -> None:
        """Re-read the count and the blocks in use, keeping selection and scroll position."""
        if not self.ready:
            if not self._reload_pending:
                self.reload()
            return
        if self._reload_pending:
            return
        self._ver += 1
        self._refresh_pending = True
        gen, ver = self._gen, self._ver
        filters, order_by, desc = dict(self._filters), self._order_by, self._desc
        wanted_blocks = list(self._blocks.keys())[-self.NEAR_BLOCKS :]
        near = self._last_row // self.BLOCK
        if near not in wanted_blocks:
            wanted_blocks.append(near)

        def load(store):
            n = self._count_fn(store, filters)
            blocks = {}
            for b in sorted(set(wanted_blocks)):
                if b * self.BLOCK < n or b == 0:
                    blocks[b] = self._fetch_block(store, filters, order_by, desc, b * self.BLOCK, self.BLOCK)
            return n, blocks, self._extra_fn(store, filters, blocks.get(0))

        def done(result):
            if gen != self._gen or ver != self._ver:
                return
            self._refresh_pending = False
            self._pending.clear()
            n, blocks, extra = result
            self.extra = extra
            self._apply_refresh(n, blocks)
            self.loaded_at = time.monotonic()
            self.loaded.emit()

        def failed(exc):
            if gen == self._gen and ver == self._ver:
                self._refresh_pending = False
            self._report(exc)

        self._worker.submit(load, done, on_error=failed, label=f"{type(self).__name__}.refresh")

    def _apply_refresh(self, n: int, blocks: dict[int, tuple[list, list]]) -> None:
        old_blocks = self._blocks
        new_rows: dict[Any, int] = {}
        for b, (rows, _) in blocks.items():
            for i, rec in enumerate(rows):
                new_rows[self.key_of(rec)] = b * self.BLOCK + i
        old_keys: set[Any] = set()
        for rows in old_blocks.values():
            old_keys.update(self.key_of(r) for r in rows)
        # a key that was loaded and is not in the re-read blocks may only have moved out of view;
        # it is "gone" for sure only when the re-read covered the whole table
        covered_all = sum(len(r) for r, _ in blocks.values()) >= n
        gone = (old_keys - set(new_rows)) if covered_all else set()

        def key_at_old(row: int):
            b = row // self.BLOCK
            rows = old_blocks.get(b)
            if rows is None:
                return None
            i = row - b * self.BLOCK
            return self.key_of(rows[i]) if i < len(rows) else None

        def install():
            self._install(blocks)

        swap_rows(self, self._count, n, self._set_count, install, key_at_old, new_rows.get, lambda k: k in gone)
        self._gone = gone
        if self._count:
            self.dataChanged.emit(self.index(0, 0), self.index(self._count - 1, len(self.columns) - 1))


# ====================================================================== what the tabs share of their cells
SPACE_TIP = "The memory space it belongs to (Personal, Work…; Memory ▸ Memory spaces…)"


def space_label(names: dict[int, str], space_id: int) -> str:
    """A space's name for a list (its number while the names are not read yet)."""
    return names.get(space_id, str(space_id))


def elide_tip(text: str, limit: int = 1200) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[:limit] + "…"


# ====================================================================== small fully-loaded lists
class ListModel(QAbstractTableModel):
    """A small table whose rows are replaced as a whole (`set_rows`), keeping selection by key."""

    def __init__(self, columns: Sequence[Column], key: Callable[[Any], Any] | None = None, parent=None):
        super().__init__(parent)
        self.columns = list(columns)
        self.cells = ColumnCells(self)
        self._keyfn = key
        self._rows: list = []
        self._disp: list = []
        self._count = 0

    def key_of(self, rec):
        if self._keyfn is not None:
            return self._keyfn(rec)
        return getattr(rec, "id", None)

    def column_index(self, key: str) -> int:
        return self.cells.column_index(key)

    def paint_info(self, row: int, col: int):
        return self.cells.paint_info(row, col)

    def bar_info(self, row: int, col: int):
        return self.cells.bar_info(row, col)

    def _set_count(self, n: int) -> None:
        self._count = n

    def record_at(self, row: int):
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def display_at(self, row: int):
        if not 0 <= row < len(self._rows):
            return None
        d = self._disp[row]
        if d is None:
            d = self._disp[row] = self.cells.display(self._rows[row])
        return d

    def record(self, row: int):
        return self.record_at(row)

    def records(self) -> list:
        return list(self._rows)

    def row_of_key(self, key) -> int | None:
        for i, r in enumerate(self._rows):
            if self.key_of(r) == key:
                return i
        return None

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self._count

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index, role=DISPLAY):
        if role == DISPLAY:
            row = index.row()
            if not 0 <= row < len(self._rows):
                return None
            d = self._disp[row]
            if d is None:
                d = self._disp[row] = self.cells.display(self._rows[row])
            return d[index.column()]
        return self.cells.cell(index, role)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        return self.cells.header(section, orientation, role)

    def flags(self, index):
        return _ROW_FLAGS if index.isValid() else _NO_FLAGS

    def set_rows(self, rows: Sequence) -> None:
        rows = list(rows)
        old = self._rows
        new_index: dict[Any, int] = {}
        for i, r in enumerate(rows):
            new_index.setdefault(self.key_of(r), i)
        gone = {self.key_of(r) for r in old} - set(new_index)

        def key_at_old(row):
            return self.key_of(old[row]) if 0 <= row < len(old) else None

        def install():
            self._rows = rows
            self._disp = [None] * len(rows)

        swap_rows(
            self, self._count, len(rows), self._set_count, install, key_at_old, new_index.get, lambda k: k in gone
        )
        if self._count:
            self.dataChanged.emit(self.index(0, 0), self.index(self._count - 1, len(self.columns) - 1))
