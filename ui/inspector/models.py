"""Qt item models of the memory inspector.

- `LazyTableModel` (pages, segments): the row count comes from SQL (`count_*`), rows are fetched
  in blocks of `BLOCK` on the inspector's worker thread when a view first asks for them, and
  kept in a small LRU cache. Sorting and filtering are re-queries (`ORDER BY` / `WHERE` in the
  memory core), never Python sorts. A live `refresh()` re-reads the count and the blocks in
  view and swaps them in with rows inserted/removed at the end plus a `layoutChanged` whose
  persistent indexes are remapped by record id — so the user's selection and scroll position
  survive memory updates.
- `ListModel`: small lists fetched whole on the worker (knowledge, events, versions, trace).
- `TraitTreeModel`: persona traits grouped by dimension.

Every model here passes `QAbstractItemModelTester` (tests/ui/test_inspector_models.py).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont

from app.wording import count, event_kind, event_sentence, heat, heat_in_words, plain_left_out, plain_reason
from ui import plain
from ui.inspector import fmt

RecordRole = Qt.ItemDataRole.UserRole + 1  # the record object of the row
BarRole = Qt.ItemDataRole.UserRole + 2  # float drawn as an in-cell bar (heat, score)
KeyRole = Qt.ItemDataRole.UserRole + 3  # the row's stable key (record id)

# data() is called thousands of times per repaint: compare roles as plain ints
_DISPLAY = int(Qt.ItemDataRole.DisplayRole.value)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole.value)
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole.value)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole.value)
_FONT = int(Qt.ItemDataRole.FontRole.value)
_SLOW_ROLES = frozenset({_DISPLAY, _TOOLTIP, _ALIGN, _FOREGROUND, _FONT, int(RecordRole), int(BarRole), int(KeyRole)})
_ROW_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren
_NO_FLAGS = Qt.ItemFlag.NoItemFlags

ALIGN_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
ALIGN_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
ALIGN_CENTER = int(Qt.AlignmentFlag.AlignCenter)

TIER_COLORS = {"stm": QColor("#1565c0"), "mtm": QColor("#2e7d32"), "archive": QColor("#757575")}


def toned(color: QColor | None) -> QColor | None:
    """A text colour made readable on the theme's background: the light theme's dark blues and greens
    are lightened in the dark theme."""
    from ui import theme

    if color is None or theme.colors().name != "dark":
        return color
    return color.lighter(175)


PLACEHOLDER = "…"
_GREY = QColor("#9e9e9e")


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


class _ColumnsMixin:
    """data()/headerData() from a list of Column specs over records returned by `_record(row)`."""

    columns: list[Column] = []
    _count: int  # the rows the view knows of; each model keeps it

    def _record(self, row: int):  # pragma: no cover - overridden
        raise NotImplementedError

    def _key(self, rec) -> Any:
        return getattr(rec, "id", None)

    def column_index(self, key: str) -> int:
        for i, c in enumerate(self.columns):
            if c.key == key:
                return i
        raise KeyError(key)

    def _disp_row(self, row: int):  # pragma: no cover - overridden
        return None

    def paint_info(self, row: int, col: int):
        """(text, alignment, colour or None, bold) of a cell, for FastTextDelegate (no Qt round trips)."""
        c = self.columns[col]
        disp = self._disp_row(row)
        if disp is None:
            self._record(row)
            return (PLACEHOLDER if col == 0 else ""), c.align, _GREY, False
        if c.color is None and c.bold is None:
            return disp[col], c.align, None, False
        rec = self._record(row)
        return (
            disp[col],
            c.align,
            c.color(rec) if c.color is not None else None,
            bool(c.bold(rec)) if c.bold is not None else False,
        )

    def bar_info(self, row: int, col: int):
        """(text, bar value or None) of a cell, for BarDelegate's fast path."""
        c = self.columns[col]
        disp = self._disp_row(row)
        if disp is None:
            self._record(row)
            return (PLACEHOLDER if col == 0 else ""), None
        if c.bar is None:
            return disp[col], None
        return disp[col], float(c.bar(self._record(row)))

    def _display(self, rec) -> tuple:
        """The display strings of a record, one per column (computed once per fetched row)."""
        out = []
        for col in self.columns:
            v = col.get(rec)
            out.append("" if v is None else (v if isinstance(v, str) else str(v)))
        return tuple(out)

    def _cell(self, index: QModelIndex, role: int):
        if role not in _SLOW_ROLES or not index.isValid():
            return None
        col = self.columns[index.column()]
        if role == _ALIGN:
            return col.align
        rec = self._record(index.row())
        if rec is None:
            if role == _DISPLAY:
                return PLACEHOLDER if index.column() == 0 else ""
            if role == _FOREGROUND:
                return QBrush(QColor("#9e9e9e"))
            return None
        if role == _DISPLAY:
            v = col.get(rec)
            return "" if v is None else (v if isinstance(v, str) else str(v))
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
            return self._key(rec)
        return None

    def _header(self, section: int, orientation, role: int):
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(self.columns):
            col = self.columns[section]
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

    def _swap_rows(
        self,
        new_count: int,
        install: Callable[[], None],
        key_at_old: Callable[[int], Any],
        row_of_new_key: Callable[[Any], int | None],
        known_gone: Callable[[Any], bool],
    ) -> None:
        """Replace the rows while keeping persistent indexes (selection, current item) on the same records.

        Rows added at the end are inserted before, rows lost at the end removed after, a
        layoutChanged in between moves persistent indexes to the new row of their record.
        """
        model: QAbstractItemModel = self  # type: ignore[assignment]  # the mixin is only ever mixed into a QAbstractItemModel
        old_count = self._count
        if new_count > old_count:
            model.beginInsertRows(QModelIndex(), old_count, new_count - 1)
            self._count = new_count
            model.endInsertRows()
        model.layoutAboutToBeChanged.emit()
        pers = model.persistentIndexList()
        keys = [key_at_old(p.row()) for p in pers]
        install()
        new_list = []
        for p, k in zip(pers, keys):
            if k is None:
                new_list.append(model.index(p.row(), p.column()) if p.row() < self._count else QModelIndex())
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
        if new_count < self._count:
            model.beginRemoveRows(QModelIndex(), new_count, self._count - 1)
            self._count = new_count
            model.endRemoveRows()


# ====================================================================== lazy SQL-backed table
class LazyTableModel(_ColumnsMixin, QAbstractTableModel):
    """A table over `count`/`list` queries of the memory core, fetched lazily in blocks on the worker."""

    BLOCK = 200
    MAX_BLOCKS = 40
    NEAR_BLOCKS = 3  # a queued block fetch still runs when it is this close to the rows in view
    PREFETCH = 60  # rows from a block's edge at which the neighbouring block is fetched ahead
    default_order: tuple[str, bool] = ("id", True)

    loaded = Signal()  # a reset or a refresh was applied (the model shows current data)
    error = Signal(str)

    def __init__(self, worker, parent=None):
        super().__init__(parent)
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
        return recs, [self._display(r) for r in recs]

    # -------------------------------------------------------------- Qt model API
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self._count

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index, role=_DISPLAY):
        if role == _DISPLAY:  # the hot path: precomputed strings
            row = index.row()
            if row < 0 or row >= self._count:
                return None
            b = row // self.BLOCK
            disp = self._disp.get(b)
            if disp is None:
                self._record(row)  # queues the block's fetch
                return PLACEHOLDER if index.column() == 0 else ""
            self._last_row = row
            i = row - b * self.BLOCK
            return disp[i][index.column()] if i < len(disp) else ""
        return self._cell(index, role)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        return self._header(section, orientation, role)

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
        return self._record(row)

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
                if self._key(rec) == key:
                    return b * self.BLOCK + i
        return None

    def is_loading(self) -> bool:
        return self._reload_pending or self._refresh_pending or bool(self._pending)

    # -------------------------------------------------------------- loading
    def _disp_row(self, row: int):
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

    def _record(self, row: int):
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
                new_rows[self._key(rec)] = b * self.BLOCK + i
        old_keys: set[Any] = set()
        for rows in old_blocks.values():
            old_keys.update(self._key(r) for r in rows)
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
            return self._key(rows[i]) if i < len(rows) else None

        def install():
            self._install(blocks)

        self._swap_rows(n, install, key_at_old, new_rows.get, lambda k: k in gone)
        self._gone = gone
        if self._count:
            self.dataChanged.emit(self.index(0, 0), self.index(self._count - 1, len(self.columns) - 1))


# ====================================================================== pages
SPACE_TIP = "The memory space it belongs to (Personal, Work…; Memory ▸ Memory spaces…)"


def space_label(names: dict[int, str], space_id: int) -> str:
    """A space's name for a list (its number while the names are not read yet)."""
    return names.get(space_id, str(space_id))


def _elide_tip(text: str, limit: int = 1200) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[:limit] + "…"


def _chain(p) -> str:
    parts = []
    if p.prev_page_id:
        parts.append(f"← {p.prev_page_id}")
    if p.next_page_id:
        parts.append(f"{p.next_page_id} →")
    return "  ".join(parts) if parts else "—"


class PagesModel(LazyTableModel):
    """All pages (every tier), sortable and filterable in SQL through `store.list_pages`/`count_pages`."""

    default_order = ("timestamp", True)
    columns = [
        Column("id", "Page", lambda p: p.id, sort="id", width=64, align=ALIGN_RIGHT),
        Column(
            "timestamp",
            "When",
            lambda p: fmt.when(p.timestamp),
            sort="timestamp",
            width=128,
            tip=lambda p: fmt.when(p.timestamp, seconds=True),
        ),
        Column(
            "tier",
            "Where",
            lambda p: fmt.tier(p.tier),
            sort="tier",
            width=80,
            color=lambda p: toned(TIER_COLORS.get(p.tier)),
        ),
        Column(
            "user",
            "User said",
            lambda p: fmt.one_line(p.user_text, 200),
            width=300,
            tip=lambda p: _elide_tip(p.user_text),
        ),
        Column(
            "assistant",
            "Assistant replied",
            lambda p: fmt.one_line(p.assistant_text, 200),
            width=300,
            tip=lambda p: _elide_tip(p.assistant_text),
        ),
        Column(
            "segment",
            "Topic",
            lambda p: p.segment_id if p.segment_id is not None else "—",
            sort="segment",
            width=60,
            align=ALIGN_RIGHT,
            header_tip="The topic this page belongs to (pages in recent chat have none yet)",
        ),
        Column(
            "conversation",
            "Chat",
            lambda p: p.conversation_id if p.conversation_id is not None else "—",
            sort="conversation",
            width=56,
            align=ALIGN_RIGHT,
            header_tip="The chat this page came from",
        ),
        Column(
            "space",
            "Space",
            lambda p: p.space_id,  # the space's name, per model: `PagesModel.__init__`
            width=90,
            header_tip=SPACE_TIP,
        ),
        Column(
            "chain",
            "Thread",
            _chain,
            width=118,
            tip=lambda p: p.chain_summary or "not linked to the pages around it",
            header_tip="The pages before and after it on the same subject",
        ),
        Column(
            "pinned",
            "Pinned",
            lambda p: "pinned" if p.pinned else "",
            width=56,
            align=ALIGN_CENTER,
            bold=lambda p: p.pinned,
        ),
    ]

    def __init__(self, worker, parent=None):
        super().__init__(worker, parent)
        self.space_names: dict[int, str] = {}  # read with each block, on the worker (a rename shows on refresh)
        self.columns = [
            replace(c, get=lambda p: space_label(self.space_names, p.space_id)) if c.key == "space" else c
            for c in type(self).columns
        ]

    def _fetch_block(self, store, filters, order_by, desc, offset, limit):
        self.space_names = store.spaces.names()
        return super()._fetch_block(store, filters, order_by, desc, offset, limit)

    def _count_fn(self, store, filters):
        return store.pages.count_pages(**filters)

    def _fetch_fn(self, store, filters, order_by, desc, offset, limit):
        return store.pages.list_pages(**filters, order_by=order_by, descending=desc, limit=limit, offset=offset)


# ====================================================================== segments
MODEL_TITLE_COLOR = QColor("#6a1b9a")  # a title the chat model wrote (decision 0026)


def _title_tip(seg) -> str:
    """Who wrote a topic's title: the chat model (which one) or its keywords."""
    title, by = getattr(seg, "title", ""), getattr(seg, "title_by", "")
    if by:
        return f"{title}\nTitle written by the chat model ({by}); its keywords: {', '.join(seg.keywords[:3])}"
    return f"{title}\nTitle made of its keywords" if title else ""


class SegmentsModel(LazyTableModel):
    """Mid-term and archived segments with their heat parts; sorting/filtering by `store.list_segments`."""

    default_order = ("heat", True)

    tau_now = 5.0  # the promotion threshold the heat tooltips speak of (the last model made sets it)

    def __init__(self, worker, tau: float = 5.0, parent=None):
        super().__init__(worker, parent)
        self.tau = float(tau)
        SegmentsModel.tau_now = self.tau

    columns = [
        Column("id", "Topic", lambda s: s.id, sort="id", width=60, align=ALIGN_RIGHT),
        Column(
            "heat",
            "Heat",
            lambda s: heat(s.heat),
            sort="heat",
            width=150,
            align=ALIGN_RIGHT,
            bar=lambda s: s.heat,
            tip=lambda s: heat_in_words(s.n_visit, s.l_interaction, s.heat, SegmentsModel.tau_now, s.promotions),
            header_tip="How much a topic is in use: used in replies, new messages, recently. A topic this "
            "busy is read for what it says about you (Help ▸ How Mnemo remembers)",
        ),
        Column(
            "title",
            "Title",
            lambda s: getattr(s, "title", ""),
            width=180,
            tip=lambda s: _title_tip(s),
            color=lambda s: toned(MODEL_TITLE_COLOR) if getattr(s, "title_by", "") else None,
            header_tip="The topic's name: written by the chat model (in colour; its name in the tip) or made of "
            "its keywords (Settings ▸ Memory ▸ Topic titles)",
        ),
        Column(
            "summary", "Summary", lambda s: fmt.one_line(s.summary, 220), width=330, tip=lambda s: _elide_tip(s.summary)
        ),
        Column(
            "keywords", "Keywords", lambda s: ", ".join(s.keywords[:8]), width=200, tip=lambda s: ", ".join(s.keywords)
        ),
        Column("page_count", "Pages", lambda s: s.page_count, sort="page_count", width=56, align=ALIGN_RIGHT),
        Column(
            "n_visit",
            "Uses",
            lambda s: s.n_visit,
            sort="n_visit",
            width=52,
            align=ALIGN_RIGHT,
            header_tip="How many replies used a page of this topic",
        ),
        Column(
            "l_interaction",
            "New",
            lambda s: s.l_interaction,
            sort="l_interaction",
            width=48,
            align=ALIGN_RIGHT,
            header_tip="Messages added to this topic since it was last read for your profile",
        ),
        Column(
            "recency",
            "Recency",
            lambda s: f"{s.recency:.3f}",
            sort="last_access",
            width=66,
            align=ALIGN_RIGHT,
            header_tip="How recently it was used, from 1 (just now) down to 0 (months ago)",
        ),
        Column(
            "last_access",
            "Last used",
            lambda s: fmt.when(s.last_access),
            sort="last_access",
            width=128,
            tip=lambda s: fmt.ago(s.last_access),
        ),
        Column(
            "pinned",
            "Pinned",
            lambda s: "pinned" if s.pinned else "",
            width=56,
            align=ALIGN_CENTER,
            bold=lambda s: s.pinned,
        ),
        Column(
            "tier",
            "Where",
            lambda s: fmt.segment_tier(s.tier),
            width=76,
            color=lambda s: toned(TIER_COLORS.get(s.tier)),
        ),
    ]

    def _count_fn(self, store, filters):
        return store.segments.count_segments(**filters)

    def _fetch_fn(self, store, filters, order_by, desc, offset, limit):
        return store.segments.list_segments(**filters, order_by=order_by, descending=desc, limit=limit, offset=offset)

    def _extra_fn(self, store, filters, first_block=None):
        if first_block is not None and not filters and self._order_by == "heat" and self._desc:
            recs = first_block[0]
            return {"max_heat": recs[0].heat if recs else 0.0}  # the first row is the hottest
        top = store.segments.list_segments(order_by="heat", descending=True, limit=1)
        return {"max_heat": top[0].heat if top else 0.0}

    def heat_scale(self) -> float:
        """The heat drawn as a full bar: a little above τ, or the hottest segment when hotter."""
        return max(self.tau * 1.25, float(self.extra.get("max_heat") or 0.0), 1e-6)


# ====================================================================== small fully-loaded lists
class ListModel(_ColumnsMixin, QAbstractTableModel):
    """A small table whose rows are replaced as a whole (`set_rows`), keeping selection by key."""

    def __init__(self, columns: Sequence[Column], key: Callable[[Any], Any] | None = None, parent=None):
        super().__init__(parent)
        self.columns = list(columns)
        self._keyfn = key
        self._rows: list = []
        self._disp: list = []
        self._count = 0

    def _key(self, rec):
        if self._keyfn is not None:
            return self._keyfn(rec)
        return super()._key(rec)

    def _record(self, row: int):
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def _disp_row(self, row: int):
        if not 0 <= row < len(self._rows):
            return None
        d = self._disp[row]
        if d is None:
            d = self._disp[row] = self._display(self._rows[row])
        return d

    def record(self, row: int):
        return self._record(row)

    def records(self) -> list:
        return list(self._rows)

    def row_of_key(self, key) -> int | None:
        for i, r in enumerate(self._rows):
            if self._key(r) == key:
                return i
        return None

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else self._count

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index, role=_DISPLAY):
        if role == _DISPLAY:
            row = index.row()
            if not 0 <= row < len(self._rows):
                return None
            d = self._disp[row]
            if d is None:
                d = self._disp[row] = self._display(self._rows[row])
            return d[index.column()]
        return self._cell(index, role)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        return self._header(section, orientation, role)

    def flags(self, index):
        return _ROW_FLAGS if index.isValid() else _NO_FLAGS

    def set_rows(self, rows: Sequence) -> None:
        rows = list(rows)
        old = self._rows
        new_index: dict[Any, int] = {}
        for i, r in enumerate(rows):
            new_index.setdefault(self._key(r), i)
        gone = {self._key(r) for r in old} - set(new_index)

        def key_at_old(row):
            return self._key(old[row]) if 0 <= row < len(old) else None

        def install():
            self._rows = rows
            self._disp = [None] * len(rows)

        self._swap_rows(len(rows), install, key_at_old, new_index.get, lambda k: k in gone)
        if self._count:
            self.dataChanged.emit(self.index(0, 0), self.index(self._count - 1, len(self.columns) - 1))


# ====================================================================== persona traits grouped by dimension
class TraitTreeModel(QAbstractItemModel):
    """Two levels: dimensions (sorted by name) → their traits (by confidence). Rebuilt with a reset;
    the persona view restores the selection by key afterwards."""

    HEADERS = ["Kind / value", "Sure", "Space", "Evidence", "Version", "Status", "Updated", "Pinned"]
    SPACE, EVIDENCE = 2, 3  # columns

    def __init__(self, parent=None):
        super().__init__(parent)
        self._dims: list[str] = []
        self._by_dim: dict[str, list] = {}
        self.space_names: dict[int, str] = {}

    def set_traits(self, traits: Sequence, space_names: dict[int, str] | None = None) -> None:
        """Show `traits`, each with the name of its space (`space_names`, by id)."""
        if space_names is not None:
            self.space_names = dict(space_names)
        by_dim: dict[str, list] = {}
        for t in traits:
            by_dim.setdefault(t.dimension, []).append(t)
        for lst in by_dim.values():
            lst.sort(key=lambda t: (t.status != "active", -t.confidence, t.id))
        self.beginResetModel()
        self._by_dim = by_dim
        self._dims = sorted(by_dim, key=str.lower)
        self.endResetModel()

    def traits(self) -> list:
        return [t for d in self._dims for t in self._by_dim[d]]

    def dimensions(self) -> list[str]:
        return list(self._dims)

    # internal ids: 0 = a dimension row; i + 1 = a trait under dimension i
    def index(self, row, column, parent=QModelIndex()):
        if column < 0 or column >= len(self.HEADERS) or row < 0:
            return QModelIndex()
        if not parent.isValid():
            if row < len(self._dims):
                return self.createIndex(row, column, 0)
            return QModelIndex()
        if parent.internalId() != 0 or parent.column() != 0:
            return QModelIndex()
        d = parent.row()
        if 0 <= d < len(self._dims) and row < len(self._by_dim[self._dims[d]]):
            return self.createIndex(row, column, d + 1)
        return QModelIndex()

    def parent(self, index=QModelIndex()):
        if not index.isValid() or index.internalId() == 0:
            return QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent=QModelIndex()) -> int:
        if not parent.isValid():
            return len(self._dims)
        if parent.internalId() == 0 and parent.column() == 0 and 0 <= parent.row() < len(self._dims):
            return len(self._by_dim[self._dims[parent.row()]])
        return 0

    def columnCount(self, parent=QModelIndex()) -> int:
        return len(self.HEADERS)

    def flags(self, index):
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        f = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.internalId() != 0:
            f |= Qt.ItemFlag.ItemNeverHasChildren
        return f

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if (
            orientation == Qt.Orientation.Horizontal
            and role == Qt.ItemDataRole.DisplayRole
            and 0 <= section < len(self.HEADERS)
        ):
            return self.HEADERS[section]
        return None

    def trait_at(self, index: QModelIndex):
        if not index.isValid() or index.internalId() == 0:
            return None
        d = index.internalId() - 1
        if 0 <= d < len(self._dims):
            lst = self._by_dim[self._dims[d]]
            if 0 <= index.row() < len(lst):
                return lst[index.row()]
        return None

    def key_of(self, index: QModelIndex):
        if not index.isValid():
            return None
        t = self.trait_at(index)
        if t is not None:
            return ("trait", t.id)
        if index.internalId() == 0 and 0 <= index.row() < len(self._dims):
            return ("dimension", self._dims[index.row()])
        return None

    def index_of_key(self, key, column: int = 0) -> QModelIndex:
        if not key:
            return QModelIndex()
        kind, val = key
        if kind == "dimension":
            if val in self._by_dim:
                return self.index(self._dims.index(val), column)
            return QModelIndex()
        for d, dim in enumerate(self._dims):
            for r, t in enumerate(self._by_dim[dim]):
                if t.id == val:
                    return self.index(r, column, self.index(d, 0))
        return QModelIndex()

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        col = index.column()
        t = self.trait_at(index)
        if t is None:
            if index.internalId() != 0 or not (0 <= index.row() < len(self._dims)):
                return None
            dim = self._dims[index.row()]
            lst = self._by_dim[dim]
            if role == Qt.ItemDataRole.DisplayRole:
                if col == 0:
                    return dim
                if col == 1:
                    return f"{max(x.confidence for x in lst):.2f}" if lst else ""
                if col == self.EVIDENCE:
                    n = sum(1 for x in lst if x.status == "active")
                    return f"{n} active trait{'s' if n != 1 else ''}"
                return ""
            if role == Qt.ItemDataRole.FontRole and col == 0:
                f = QFont()
                f.setBold(True)
                return f
            if role == KeyRole:
                return ("dimension", dim)
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return [
                t.value,
                f"{t.confidence:.2f}",
                space_label(self.space_names, t.space_id),
                fmt.one_line(t.evidence, 120),
                f"v{t.version}",
                t.status,
                fmt.when(t.updated_at),
                "pinned" if t.pinned else "",
            ][col]
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == self.EVIDENCE:
                return plain.tip(_elide_tip(t.evidence)) or "no evidence recorded"
            return plain.tip(_elide_tip(t.value)) if col == 0 else None
        if role == Qt.ItemDataRole.ForegroundRole and t.status != "active":
            return QBrush(QColor("#9e9e9e"))
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (1, self.EVIDENCE + 1):
            return ALIGN_RIGHT
        if role == BarRole and col == 1:
            return float(t.confidence)
        if role == RecordRole:
            return t
        if role == KeyRole:
            return ("trait", t.id)
        return None


# ====================================================================== column sets of the small lists
def knowledge_columns(space_name: Callable[[int], str] = str) -> list[Column]:
    """The columns of a list of facts; `space_name` names a space by its id (the Space column)."""
    return [
        Column("id", "ID", lambda k: k.id, sort="id", width=48, align=ALIGN_RIGHT),
        Column(
            "text",
            "Fact",
            lambda k: fmt.one_line(k.text, 240),
            sort="text",
            width=360,
            tip=lambda k: _elide_tip(k.text),
            color=lambda k: None if k.status == "active" else QColor("#9e9e9e"),
        ),
        Column("space", "Space", lambda k: space_name(k.space_id), width=90, header_tip=SPACE_TIP),
        Column(
            "confidence",
            "Sure",
            lambda k: f"{k.confidence:.2f}",
            sort="confidence",
            width=56,
            align=ALIGN_RIGHT,
            bar=lambda k: k.confidence,
            header_tip="How sure Mnemo is of it, from 0 to 1: a fact said again becomes surer",
        ),
        Column("version", "Ver.", lambda k: f"v{k.version}", width=44, align=ALIGN_RIGHT, header_tip="Its version"),
        Column(
            "sources",
            "From pages",
            lambda k: ", ".join(str(p) for p in k.source_page_ids[:6]) + ("…" if len(k.source_page_ids) > 6 else ""),
            width=90,
            tip=lambda k: "from pages " + (", ".join(map(str, k.source_page_ids)) or "none: written by you"),
        ),
        Column("updated_at", "Updated", lambda k: fmt.when(k.updated_at), sort="updated_at", width=120),
        Column("pinned", "Pinned", lambda k: "pinned" if k.pinned else "", width=52, align=ALIGN_CENTER),
    ]


def version_columns() -> list[Column]:
    return [
        Column(
            "version", "Version", lambda v: f"v{v.version}" + (" (current)" if v.archived_at is None else ""), width=90
        ),
        Column("text", "Text", lambda v: fmt.one_line(v.text, 200), width=300, tip=lambda v: _elide_tip(v.text)),
        Column("reason", "Why", lambda v: v.reason or "—", width=200, tip=lambda v: v.reason or ""),
        Column("created", "From", lambda v: fmt.when(v.created_at), width=120),
        Column("archived", "Until", lambda v: fmt.when(v.archived_at) if v.archived_at else "now", width=120),
        Column(
            "sources",
            "Sources",
            lambda v: ", ".join(str(p) for p in (v.detail or {}).get("source_page_ids", [])[:6]),
            width=90,
        ),
    ]


EVENT_COLORS = {
    "forgotten": QColor("#c62828"),
    "wiped": QColor("#c62828"),
    "segment_archived": QColor("#757575"),
    "promoted": QColor("#e65100"),
    "page_moved": QColor("#2e7d32"),
    "segment_created": QColor("#2e7d32"),
    "page_added": QColor("#1565c0"),
    "edited": QColor("#6a1b9a"),
    "paused": QColor("#c62828"),
    "job_failed": QColor("#c62828"),
    "llm_fallback": QColor("#ef6c00"),
}


def _event_why(e) -> str:
    d = e.detail or {}
    bits = []
    if e.kind == "page_moved":
        how = d.get("how")
        if how:
            bits.append(f"{how} segment {d.get('segment_id')}")
        if "score" in d:
            bits.append(f"match cos {d.get('cos', 0):.2f} + keywords {d.get('jaccard', 0):.2f}")
        if d.get("chain_id"):
            bits.append(f"continues chain {d['chain_id']} (continuity {d.get('continuity', 0):.2f})")
    elif e.kind == "segment_archived" and d.get("heat") is not None:
        bits.append(f"coldest segment, heat {d['heat']:.2f}")
    elif e.kind == "promoted":
        bits.append(
            f"{count(d.get('traits'), 'trait')}, {count(d.get('knowledge'), 'fact')}; model {d.get('model', '?')}"
        )
    elif "similarity" in d:
        bits.append(f"similarity {d['similarity']:.2f}")
    elif d.get("pages"):
        bits.append("from pages " + ", ".join(map(str, d["pages"][:6])) + ("…" if len(d["pages"]) > 6 else ""))
    return "; ".join(bits)


def event_columns() -> list[Column]:
    return [
        # the summary says what happened in words: it comes second, and with a compact time, so a docked
        # panel (~520 px) shows When, Summary and What
        Column(
            "at",
            "When",
            lambda e: fmt.when_short(e.at),
            width=92,
            tip=lambda e: f"{fmt.when(e.at, seconds=True)} ({fmt.ago(e.at)})",
        ),
        # the kind before the sentence: the sentence is the last column shown, so it takes the width left
        Column(
            "kind", "Kind", lambda e: event_kind(e.kind), width=120, color=lambda e: toned(EVENT_COLORS.get(e.kind))
        ),
        Column("summary", "What happened", _event_text, width=300, tip=_event_text),
        # the technical columns: shown with the inspector's Details switch (InspectorPanel.set_details)
        Column("item", "Item", lambda e: f"{e.item_kind} {e.item_id}" if e.item_kind else "—", width=120),
        Column("why", "Details", _event_why, width=260, tip=_event_why),
        Column("raw", "Logged as", lambda e: e.summary, width=260, tip=lambda e: e.summary),
    ]


# the columns of each table that only the Details switch shows (their words are the memory core's)
TECHNICAL_COLUMNS = {"events": ("item", "why", "raw"), "segments": ("recency",)}


def _event_text(e) -> str:
    return event_sentence(e.kind, e.item_kind, e.item_id, e.detail, e.summary)


def trace_page_columns(*, in_prompt: bool) -> list[Column]:
    cols = [
        Column("rank", "#", lambda r: r["rank"], width=34, align=ALIGN_RIGHT, header_tip="rank by score"),
        Column("page_id", "Page", lambda r: r["page_id"], width=56, align=ALIGN_RIGHT),
        Column(
            "score",
            "Score",
            lambda r: f"{r['score']:.3f}",
            width=110,
            align=ALIGN_RIGHT,
            bar=lambda r: r["score"],
            header_tip="How well it matched your message, in meaning and in words",
        ),
        Column(
            "reason",
            "Why it was recalled",
            lambda r: plain_reason(r["reason"]),
            width=500,
            tip=lambda r: plain_reason(r["reason"]),
        ),
        Column(
            "text",
            "Page",
            lambda r: fmt.one_line(r["text"], 200),
            width=330,
            tip=lambda r: _elide_tip(r["text"]),
            color=lambda r: QColor("#9e9e9e") if r.get("missing") else None,
        ),
        Column("when", "When", lambda r: fmt.when(r.get("timestamp")), width=120),
        Column(
            "tier",
            "Where",
            lambda r: fmt.tier(r.get("tier")),
            width=72,
            color=lambda r: toned(TIER_COLORS.get(r.get("tier"))),
        ),
        Column(
            "segment",
            "Topic",
            lambda r: r.get("segment_id") if r.get("segment_id") is not None else "—",
            width=56,
            align=ALIGN_RIGHT,
        ),
    ]
    if in_prompt:
        # which sides of the page went in: a reply's prompt quotes a budget of turns, a page's better side first
        cols.insert(
            3,
            Column(
                "quoted",
                "Quoted",
                lambda r: r.get("quoted", ""),
                width=84,
                header_tip="What of the page the prompt quoted: both sides, or one (the other "
                "matched less well than what filled the room)",
            ),
        )
    else:
        # before the 500-px reason: after it, the docked inspector (~520 px) showed the column only
        # after a horizontal scroll, and it is what this table is for
        cols.insert(
            3,
            Column(
                "left_out",
                "Not in the prompt because",
                lambda r: plain_left_out(r.get("left_out", "")),
                width=260,
                tip=lambda r: plain_left_out(r.get("left_out", "")),
            ),
        )
    return cols


def trace_item_columns() -> list[Column]:
    # score and "in prompt" before the item's text, as in the page tables: after a 430-px text column
    # they sat outside the docked inspector's width and needed a horizontal scroll to be seen
    return [
        Column("kind", "Kind", lambda r: r["kind"], width=110),
        Column(
            "score",
            "Score",
            lambda r: f"{r['score']:.2f}",
            width=90,
            align=ALIGN_RIGHT,
            bar=lambda r: r["score"],
            header_tip="A trait: how sure Mnemo is of it; a fact: how close it is in meaning to your message",
        ),
        Column(
            "in_prompt",
            "In prompt",
            lambda r: r["in_prompt"],
            width=72,
            align=ALIGN_CENTER,
            bold=lambda r: r["in_prompt"] == "yes",
        ),
        Column("text", "Item", lambda r: fmt.one_line(r["text"], 200), width=430, tip=lambda r: _elide_tip(r["text"])),
        Column(
            "reason", "Why", lambda r: plain_reason(r["reason"]), width=330, tip=lambda r: plain_reason(r["reason"])
        ),
    ]


def trace_segment_columns() -> list[Column]:
    return [
        Column("segment_id", "Topic", lambda r: r["segment_id"], width=60, align=ALIGN_RIGHT),
        Column(
            "score",
            "Match",
            lambda r: f"{r['score']:.3f}",
            width=100,
            align=ALIGN_RIGHT,
            bar=lambda r: r["score"],
            header_tip="How close the topic is to your message, in meaning and in words",
        ),
        Column("reason", "Why", lambda r: plain_reason(r["reason"]), width=240),
        Column(
            "summary",
            "Summary",
            lambda r: fmt.one_line(r.get("summary", ""), 200),
            width=360,
            tip=lambda r: _elide_tip(r.get("summary", "")),
        ),
        Column("pages_used", "Pages recalled", lambda r: r.get("pages_used", 0), width=90, align=ALIGN_RIGHT),
    ]


def finite(x, default: float = 0.0) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return default
    return x if math.isfinite(x) else default


@dataclass
class TraceData:
    """What the trace view shows, prepared on the worker thread."""

    source: str  # "reply" | "query"
    query: str
    message_id: int | None = None
    conversation_id: int | None = None
    in_prompt: list[dict] = field(default_factory=list)
    not_in_prompt: list[dict] = field(default_factory=list)
    stm: list[dict] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    segments: list[dict] = field(default_factory=list)
    prompt_tokens: int | None = None
    cached_prompt_tokens: int | None = None  # of those, already in the model's KV cache (warmed, reused)
    restored_prompt_tokens: int = 0  # of those, loaded from a state saved before (activation memory)
    timings_ms: dict = field(default_factory=dict)
    common_words: list = field(default_factory=list)  # query words on most pages (MemoryParams.ranking.common_word_df)
    included: dict = field(default_factory=dict)
    dropped: dict = field(default_factory=dict)
    note: str = ""
