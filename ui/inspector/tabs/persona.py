"""The Profile tab: what Mnemo knows of the user, its traits by dimension (TraitTreeModel) and its facts
by owner (knowledge_columns), each with its versions, and the actions on them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.operations import chats as operations
from app.operations import memory as memory_verbs
from app.wording import count
from memory_core import MemoryStore
from ui import plain
from ui.inspector import fmt
from ui.inspector.columns import ALIGN_CENTER, ALIGN_RIGHT, BarRole, Column, KeyRole, RecordRole
from ui.inspector.delegates import BarDelegate
from ui.inspector.host import PanelHost
from ui.inspector.models import SPACE_TIP, ListModel, elide_tip, space_label
from ui.inspector.tables import InspectorTable
from ui.inspector.tabs.common import browser, button, button_rows, heading, muted_html
from ui.spaces_dialog import SpaceActions


# ====================================================================== Persona
class PersonaView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.item = None  # ("trait" | "knowledge", record)
        self.loaded = False
        self._order = {"user": ("updated_at", True), "assistant": ("updated_at", True)}
        self._select_next: tuple[str, int] | None = None  # (kind, id) to select after a reload
        lay = QVBoxLayout(self)
        self.space_names: dict[int, str] = {}  # every space's name, read with the persona
        self.archived = QCheckBox("Show archived items")
        self.archived.toggled.connect(lambda _: self.refresh())
        self.space = QComboBox()  # memory spaces: filled with the persona, hidden while there is one
        self.space.setObjectName("personaSpaceFilter")
        self.space.setToolTip("Only the facts and traits of one memory space")
        self.space.addItem("All spaces", None)
        self.space.hide()
        self.space.currentIndexChanged.connect(lambda _: self.refresh())
        filters = QHBoxLayout()
        filters.addWidget(self.archived)
        filters.addWidget(self.space)
        filters.addStretch(1)
        lay.addLayout(filters)
        self.add_btn = button(
            "Add…", "Tell Mnemo something to remember: a fact about you or about Mnemo, or a trait", self.add_item
        )
        self.edit_btn = button(
            "Edit…", "Correct the selected trait or fact (the old text is kept as a version)", self.edit_current
        )
        self.pin_btn = button("Pin", "Mnemo never changes a pinned item by itself", self.toggle_pin)
        self.forget_btn = button("Forget…", "Forget the selected items for good (Delete)", self.forget_selected)
        button_rows(lay, (self.add_btn, self.edit_btn, self.pin_btn, self.forget_btn))

        outer = QSplitter(Qt.Orientation.Vertical)
        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(self._traits_pane())
        right = QSplitter(Qt.Orientation.Vertical)
        self.knowledge: dict[str, ListModel] = {}
        self.kviews: dict[str, InspectorTable] = {}
        for owner, title in (
            ("user", "Facts about you"),
            ("assistant", "Facts about Mnemo (what it said it would do)"),
        ):
            box, m, v = self._knowledge_box(owner, title)
            self.knowledge[owner] = m
            self.kviews[owner] = v
            right.addWidget(box)
        top.addWidget(right)
        top.setStretchFactor(0, 1)
        top.setStretchFactor(1, 1)
        outer.addWidget(top)
        # "Move to space…" / "Copy to space…" on the selected facts and traits (ui/spaces_dialog.py)
        self.space_actions = SpaceActions(panel, [self.tree, *self.kviews.values()], lambda cb: cb(self._selected()))

        outer.addWidget(self._detail_pane())
        outer.setStretchFactor(0, 3)
        outer.setStretchFactor(1, 2)
        lay.addWidget(outer, 1)
        self._show_item(None)

    def _traits_pane(self) -> QWidget:
        """The traits, grouped by kind in a tree."""
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        # headings wrap: a docked panel gives each half ~250 px, which cut "…knows about the u"
        self.traits_label = heading("Traits, by kind")
        self.traits_label.setWordWrap(True)
        ll.addWidget(self.traits_label)
        self.traits = TraitTreeModel()
        self.tree = QTreeView()
        self.tree.setModel(self.traits)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setAlternatingRowColors(True)
        self.tree.setUniformRowHeights(True)
        self.tree.header().setStretchLastSection(True)
        self.tree.header().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for i, w in enumerate((260, 80, 90, 280, 48, 60, 120, 54)):
            self.tree.setColumnWidth(i, w)
        self.tree.setItemDelegateForColumn(1, BarDelegate(lambda: 1.0, parent=self.tree))
        self.tree.selectionModel().currentChanged.connect(self._on_tree_current)
        ll.addWidget(self.tree, 1)
        return left

    def _knowledge_box(self, owner: str, title: str) -> tuple[QWidget, ListModel, InspectorTable]:
        """The facts of one owner ("user" | "assistant") under their heading, sorted on the database."""
        box = QWidget()
        bl = QVBoxLayout(box)
        bl.setContentsMargins(0, 0, 0, 0)
        lab = heading(title)
        lab.setWordWrap(True)
        bl.addWidget(lab)
        m = ListModel(knowledge_columns(lambda sid: space_label(self.space_names, sid)))
        v = InspectorTable(m)
        v.setItemDelegateForColumn(m.column_index("confidence"), BarDelegate(lambda: 1.0, parent=v))
        hh = v.horizontalHeader()
        hh.setSortIndicator(m.column_index("updated_at"), Qt.SortOrder.DescendingOrder)
        hh.sortIndicatorChanged.disconnect()
        hh.sortIndicatorChanged.connect(lambda col, order, o=owner, mm=m: self._sort_knowledge(o, mm, col, order))
        v.current_key_changed.connect(lambda key, o=owner: self._on_knowledge_current(o))
        v.delete_pressed.connect(self.forget_selected)
        bl.addWidget(v, 1)
        box.setProperty("title_label", lab)
        return box, m, v

    def _detail_pane(self) -> QSplitter:
        """The selected item in words, beside its version history."""
        bottom = QSplitter(Qt.Orientation.Horizontal)
        self.detail = browser()
        self.detail.anchorClicked.connect(lambda u: self.panel.follow_link(u.toString()))
        bottom.addWidget(self.detail)
        vbox = QWidget()
        vl = QVBoxLayout(vbox)
        vl.setContentsMargins(0, 0, 0, 0)
        vl.addWidget(heading("Version history"))
        self.versions = ListModel(version_columns(), key=lambda v: (v.item_kind, v.item_id, v.version))
        self.versions_view = InspectorTable(self.versions, multi=False, sortable=False)
        vl.addWidget(self.versions_view, 1)
        bottom.addWidget(vbox)
        return bottom

    # -------------------------------------------------------------- loading
    def ensure_loaded(self) -> None:
        if not self.loaded:
            self.refresh()

    def refresh(self) -> None:
        arch = self.archived.isChecked()
        order = dict(self._order)
        sid = self.space.currentData()

        def fetch(store):
            def ours(items: list) -> list:  # the Space filter: the items of one space
                return items if sid is None else [x for x in items if x.space_id == sid]

            traits = ours(store.persona.list_traits(include_archived=arch, limit=5000))
            know = {
                o: ours(
                    store.persona.list_knowledge(
                        owner=o, include_archived=arch, order_by=order[o][0], descending=order[o][1], limit=5000
                    )
                )
                for o in ("user", "assistant")
            }
            return traits, know, store.spaces.names()

        self.panel.worker.submit(fetch, self._apply, label="persona")

    def _set_spaces(self, names: dict[int, str]) -> None:
        """The Space filter's choices and the Space columns: shown while the memory has two spaces or more."""
        self.space_names = dict(names)
        keep = self.space.currentData()
        self.space.blockSignals(True)
        self.space.clear()
        self.space.addItem("All spaces", None)
        for sid, name in names.items():
            self.space.addItem(name, sid)
        self.space.setCurrentIndex(max(self.space.findData(keep), 0) if keep is not None else 0)
        self.space.blockSignals(False)
        several = len(names) > 1
        self.space.setVisible(several)
        self.tree.setColumnHidden(TraitTreeModel.SPACE, not several)
        for owner, v in self.kviews.items():
            v.setColumnHidden(self.knowledge[owner].column_index("space"), not several)
        if keep is not None and self.space.currentData() != keep:  # its space was merged or deleted
            self.refresh()

    def _apply(self, result) -> None:
        traits, know, names = result
        self.loaded = True
        self._set_spaces(names)
        key = self.traits.key_of(self.tree.currentIndex())
        expanded = {
            self.traits.key_of(self.traits.index(r, 0))
            for r in range(self.traits.rowCount())
            if self.tree.isExpanded(self.traits.index(r, 0))
        }
        sel = [self.traits.key_of(i) for i in self.tree.selectionModel().selectedRows()]
        first = not self.traits.rowCount()
        self.traits.set_traits(traits, names)
        for r in range(self.traits.rowCount()):
            idx = self.traits.index(r, 0)
            if first or self.traits.key_of(idx) in expanded or len(traits) <= 60:
                self.tree.expand(idx)
        sm = self.tree.selectionModel()
        for k in sel:
            idx = self.traits.index_of_key(k)
            if idx.isValid():
                sm.select(idx, sm.SelectionFlag.Select | sm.SelectionFlag.Rows)
        if key:
            idx = self.traits.index_of_key(key)
            if idx.isValid():
                sm.setCurrentIndex(idx, sm.SelectionFlag.NoUpdate)
        n_dims = len(self.traits.dimensions())
        self.traits_label.setText(f"Traits, by kind — {count(len(traits), 'trait')} of {count(n_dims, 'kind')}")
        for owner, rows in know.items():
            self.knowledge[owner].set_rows(rows)
            box = self.kviews[owner].parentWidget()
            lab = box.property("title_label") if box is not None else None
            if lab is not None:
                base = lab.text().split(" — ")[0]
                lab.setText(f"{base} — {len(rows)} fact{'s' if len(rows) != 1 else ''}")
        if self._select_next is not None:
            kind, iid = self._select_next
            self._select_next = None
            self.select_item(kind, iid)
        elif self.item is not None:
            kind, rec = self.item
            self.load_item(kind, rec.id)

    def _sort_knowledge(self, owner: str, model: ListModel, col: int, order) -> None:
        key = model.columns[col].sort
        if key is None:
            hh = self.kviews[owner].horizontalHeader()
            hh.blockSignals(True)
            o, d = self._order[owner]
            hh.setSortIndicator(
                model.column_index(o) if o != "text" else model.column_index("text"),
                Qt.SortOrder.DescendingOrder if d else Qt.SortOrder.AscendingOrder,
            )
            hh.blockSignals(False)
            return
        self._order[owner] = (key, order == Qt.SortOrder.DescendingOrder)
        self.refresh()

    # -------------------------------------------------------------- selection → detail
    def _on_tree_current(self, current: QModelIndex, previous: QModelIndex) -> None:
        t = self.traits.trait_at(current)
        if t is not None:
            for v in self.kviews.values():
                v.selectionModel().clearCurrentIndex()
                v.clearSelection()
            self.load_item("trait", t.id, quick=t)

    def _on_knowledge_current(self, owner: str) -> None:
        rec = self.kviews[owner].current_record()
        if rec is None:
            return
        other = "assistant" if owner == "user" else "user"
        self.kviews[other].clearSelection()
        self.tree.clearSelection()
        self.load_item("knowledge", rec.id, quick=rec)

    def load_item(self, kind: str, iid: int, quick=None, select: bool = False) -> None:
        if quick is not None:
            self._show_item((kind, quick), None)

        def fetch(store):
            rec = store.persona.get_trait(iid) if kind == "trait" else store.persona.get_knowledge(iid)
            versions = store.persona.item_versions(kind, iid) if rec is not None else []
            return rec, versions

        def done(result):
            rec, versions = result
            if rec is None:  # forgotten (a link in an old reply, or an item shown while it went)
                if select or (self.item is not None and self.item[1].id == iid and self.item[0] == kind):
                    what = "fact" if kind == "knowledge" else kind
                    self._show_item(None, note=f"{what.capitalize()} {iid} is no longer in memory: it was forgotten.")
                return
            self._show_item((kind, rec), versions)
            if select:
                self.select_item(kind, iid)

        self.panel.worker.submit(fetch, done, label=f"{kind} detail")

    def select_item(self, kind: str, iid: int) -> None:
        if kind == "trait":
            idx = self.traits.index_of_key(("trait", iid))
            if idx.isValid():
                self.tree.setCurrentIndex(idx)
                self.tree.scrollTo(idx)
        else:
            for v in self.kviews.values():
                if v.select_key(iid):
                    break

    def _show_item(self, item, versions=None, note: str = "") -> None:
        self.item = item
        has = item is not None
        self.edit_btn.setEnabled(has)
        self.pin_btn.setEnabled(has)
        if not has:
            self.versions.set_rows([])
            grey = muted_html()
            self.detail.setHtml(
                f"<p style='color:{grey}'>{fmt.esc(note) or 'Select a trait or a fact.'}</p>"
                f"<p style='color:{grey}'>Traits and facts are learned from your busiest topics, or added "
                "with Add…; each keeps where it came from and every earlier version.</p>"
            )
            return
        kind, r = item
        self.pin_btn.setText("Unpin" if r.pinned else "Pin")
        written = f"written {r.model}" if (r.model or "").startswith("via ") else "written or edited by you"
        srcs = " ".join(f"<a href='page:{p}'>page {p}</a>" for p in r.source_page_ids) or f"none ({fmt.esc(written)})"
        convs = ", ".join(str(c) for c in (r.conversation_ids or [])) or "—"
        if kind == "trait":
            head = f"Trait {r.id}: {fmt.esc(r.dimension.replace('_', ' '))}"
            body = (
                f"<p style='margin:4px 0'><b>Value</b> {fmt.esc(r.value)}</p>"
                f"<p style='margin:4px 0'><b>Evidence</b> {fmt.paragraphs(r.evidence) if r.evidence else '—'}</p>"
            )
        else:
            head = f"Fact {r.id} " + ("about you" if r.owner == "user" else "about Mnemo")
            body = f"<p style='margin:4px 0'>{fmt.paragraphs(r.text)}</p>"
        grey = muted_html()
        name = space_label(self.space_names, r.space_id)
        space = f" · space “{fmt.esc(name)}”" if len(self.space_names) > 1 else ""  # two spaces or more
        self.detail.setHtml(
            f"<h3 style='margin:0'>{head} <span style='font-weight:normal;color:{grey}'>· v{r.version} · {r.status}"
            f"{space}{' · <b>pinned</b>' if r.pinned else ''}</span></h3>{body}"
            f"<p style='margin:4px 0'><b>How sure</b> {r.confidence:.2f} · <b>source</b> {fmt.esc(r.model) or '—'} · "
            f"<b>updated</b> {fmt.when(r.updated_at)}</p>"
            f"<p style='margin:4px 0'><b>From pages</b> {srcs}</p>"
            f"<p style='margin:4px 0;color:{grey}'><b>Chats</b> {convs}</p>"
        )
        if versions is not None:
            self.versions.set_rows(list(reversed(versions)))

    # -------------------------------------------------------------- controls
    def _selected(self) -> list[tuple[str, int]]:
        out = []
        for idx in self.tree.selectionModel().selectedRows():
            t = self.traits.trait_at(idx)
            if t is not None:
                out.append(("trait", t.id))
        for v in self.kviews.values():
            for row in v.selected_rows():
                rec = v.table_model().record(row)
                if rec is not None:
                    out.append(("knowledge", rec.id))
        if not out and self.item is not None:
            out.append((self.item[0], self.item[1].id))
        return out

    def edit_current(self) -> None:
        if self.item is None:
            return
        kind, r = self.item
        if kind == "trait":
            vals = self.panel.edit_texts(
                f"Edit trait {r.id} ({r.dimension})",
                [("Value", r.value)],
                "The old value is kept in the version history.",
            )
            if vals is not None:
                self.panel.act(lambda s: s.persona.edit_trait(r.id, vals[0]), f"Trait {r.id} edited.")
        else:
            vals = self.panel.edit_texts(
                f"Edit fact {r.id}", [("Fact", r.text)], "The old text is kept in the version history."
            )
            if vals is not None:
                self.panel.act(lambda s: s.persona.edit_knowledge(r.id, vals[0]), f"Fact {r.id} edited.")

    def add_item(self) -> None:
        """Persona ▸ Add…: remember a fact or a trait the user writes (`app.operations.remember`), on the worker, in
        the memory space of the window's chat (`panel.write_space`, set by the window; else Personal)."""
        got = self.panel.ask_new_item(self.traits.dimensions())
        if got is None:
            return
        space = getattr(self.panel, "write_space", lambda: None)()
        if got["kind"] == "trait":

            def fn(s):
                return operations.remember_a_trait(s, got["dimension"], got["value"], pin=got["pin"], space_id=space)
        else:

            def fn(s):
                return operations.remember(s, got["text"], about=got["about"], pin=got["pin"], space_id=space)

        def said(done) -> str:
            # the reload that follows selects the item, so its details and versions show
            self._select_next = (done.kind, done.id)
            return done.describe()

        self.panel.act(fn, said)

    def toggle_pin(self) -> None:
        if self.item is None:
            return
        kind, r = self.item
        new = not r.pinned
        self.panel.act(lambda s: memory_verbs.pin(s, kind, r.id, new))

    def forget_selected(self) -> None:
        items = self._selected()
        if not items:
            return
        n = len(items)
        if not self.panel.confirm(
            "Forget from your profile",
            f"Forget {'this item' if n == 1 else f'these {n} items'} for good, with all "
            "earlier versions? The pages they came from stay. This cannot be undone.",
            "Forget",
        ):
            return
        traits = [i for k, i in items if k == "trait"]
        know = [i for k, i in items if k == "knowledge"]

        def forget(s: MemoryStore) -> str:
            done = [memory_verbs.forget(s, kind, ids) for kind, ids in (("trait", traits), ("knowledge", know)) if ids]
            return " ".join(d.describe() for d in done)

        self.panel.act(forget, lambda said: said)


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

    def _dimension_data(self, index, col: int, role):
        """A dimension's row: its name, its best confidence, how many of its traits are active."""
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

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        col = index.column()
        t = self.trait_at(index)
        if t is None:
            return self._dimension_data(index, col, role)
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
                return plain.tip(elide_tip(t.evidence)) or "no evidence recorded"
            return plain.tip(elide_tip(t.value)) if col == 0 else None
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
            tip=lambda k: elide_tip(k.text),
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
        Column("text", "Text", lambda v: fmt.one_line(v.text, 200), width=300, tip=lambda v: elide_tip(v.text)),
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
