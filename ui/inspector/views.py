"""The inspector's tabs: Overview, Topics (segments), Pages, Profile (persona), Recall (the retrieval trace).

What they show is in plain words (app.wording); the memory core's own terms and figures (heat formula,
cosines, the tier names of its papers) appear only with the panel's Details switch (`set_details`).

Each view reads through the panel's worker (`panel.run(fn, done)`: `fn(store)` runs on the
worker thread, `done(result)` back in the UI thread) and changes memory only through the
memory core's management API (edit_*, pin, forget, set_paused, wipe_memory).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QModelIndex, Qt, QTimer, QUrl, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QTextBrowser,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app import wording
from app.operations import chats as operations
from app.wording import count, heat, heat_gap, heat_in_words, pending_work, plain_left_out, plain_reason
from ui import plain, theme
from ui.inspector import fmt
from ui.inspector.charts import SegmentHistoryChart, SegmentsHeatChart, heat_history, history_note
from ui.inspector.delegates import BarDelegate
from ui.inspector.host import PanelHost
from ui.inspector.models import (
    TECHNICAL_COLUMNS,
    LazyTableModel,
    ListModel,
    PagesModel,
    SegmentsModel,
    TraceData,
    TraitTreeModel,
    event_columns,
    knowledge_columns,
    space_label,
    trace_item_columns,
    trace_page_columns,
    trace_segment_columns,
    version_columns,
)
from ui.inspector.tables import InspectorTable
from ui.spaces_dialog import SpaceActions

TIER_FILTERS = [("Everywhere", None), ("Recent chat", "stm"), ("In topics", "mtm"), ("Archive", "archive")]
SEG_TIER_FILTERS = [("All topics", None), ("In use", "mtm"), ("Archive", "archive")]
MUTED = "color: palette(placeholder-text);"
DETAIL_MIN_HEIGHT = (
    150  # a detail pane shows a few lines of its page, not two  # secondary text, readable in both themes
)


def muted_html() -> str:
    """The colour of secondary text in a rich-text pane, from the theme (a fixed grey was unreadable in dark mode)."""
    return theme.colors().muted


def title_by_html(seg: Any, grey: str) -> str:
    """Who wrote a topic's title, after it in the topic's heading: the chat model (named in the tip) or,
    for the keywords' title, nothing (decision 0026)."""
    by = getattr(seg, "title_by", "")
    if not by:
        return ""
    return f"<span style='font-weight:normal;font-size:small;color:{grey}' title='{fmt.esc(by)}'>(title by the chat model)</span> "


def hide_technical(table, model, group: str, details: bool) -> None:
    """Show a table's technical columns (TECHNICAL_COLUMNS[group]) only with the Details switch."""
    for key in TECHNICAL_COLUMNS.get(group, ()):
        table.setColumnHidden(model.column_index(key), not details)


def _button(text: str, tip: str = "", slot=None) -> QPushButton:
    b = QPushButton(text)
    if tip:
        b.setToolTip(tip)
    if slot is not None:
        b.clicked.connect(slot)
    return b


def _button_rows(layout: QVBoxLayout, *rows: tuple[QPushButton, ...]) -> None:
    """Add each group of buttons as a row of its own, left-aligned: a docked panel is too narrow for
    one row of them."""
    for buttons in rows:
        row = QHBoxLayout()
        for b in buttons:
            row.addWidget(b)
        row.addStretch(1)
        layout.addLayout(row)


def _browser() -> QTextBrowser:
    b = QTextBrowser()
    b.setOpenLinks(False)
    b.setOpenExternalLinks(False)
    b.setMinimumHeight(80)
    return b


def _heading(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setStyleSheet("font-weight: 600; padding: 2px 0;")
    lab.setWordWrap(True)  # a docked panel is narrow: the heading wraps rather than being cut
    return lab


class _DebouncedLine(QLineEdit):
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
        name = wording._item(kind, it.id).capitalize()
        self.panel.act(lambda s: s.curation.pin(kind, it.id, new), f"{name} {'pinned' if new else 'unpinned'}.")

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
        kind, n = self.kind, len(ids)
        self.panel.act(lambda s: s.curation.forget(kind, ids), f"Forgot {count(n, wording._item(kind, None))}.")


# ====================================================================== Overview
class _Card(QFrame):
    def __init__(self, title: str, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("card")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(10, 8, 10, 8)
        lay.setSpacing(2)
        self.title = QLabel(title)
        self.title.setWordWrap(True)
        self.title.setStyleSheet("color: palette(placeholder-text); font-size: 11px; text-transform: uppercase;")
        self.value = QLabel("—")
        self.value.setStyleSheet("font-size: 22px; font-weight: 600;")
        self.sub = QLabel("")
        self.sub.setWordWrap(True)
        self.sub.setStyleSheet("color: palette(placeholder-text);")
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)  # a 14-px bar cannot hold its text: the count is the line under it
        self.bar.setMaximumHeight(8)
        self.bar.hide()
        self.bar_text = QLabel("")
        self.bar_text.setStyleSheet("color: palette(placeholder-text); font-size: 11px;")
        self.bar_text.hide()
        for w in (self.title, self.value, self.sub, self.bar, self.bar_text):
            lay.addWidget(w)
        lay.addStretch(1)

    def set(self, value: str, sub: str = "", used: int | None = None, cap: int | None = None) -> None:
        self.value.setText(value)
        # word wrap breaks only at spaces: let long identifiers (model ids, paths) break after - _ /
        self.sub.setText(re.sub(r"([-_/])(?=\w)", "\\1\u200b", sub))
        if used is not None and cap:
            self.bar.setRange(0, int(cap))
            self.bar.setValue(min(int(used), int(cap)))
            self.bar_text.setText(f"{used:,} of {cap:,}")
            self.bar.show()
            self.bar_text.show()
        else:
            self.bar.hide()
            self.bar_text.hide()


class OverviewView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.stats: dict = {}
        self.details = False
        self._last: tuple | None = None  # (stats, events, params) last shown, to redraw on a Details switch
        lay = QVBoxLayout(self)
        self.banner = QLabel("Memory is paused: what you say now is not remembered.")
        self.banner.setObjectName("pausedBanner")
        self.banner.setWordWrap(True)
        self.banner.hide()
        lay.addWidget(self.banner)
        self.grid = QGridLayout()
        self.grid.setSpacing(8)
        self.cards = {
            k: _Card(t)
            for k, t in (
                ("stm", wording.RECENT_CHAT),
                ("mtm", wording.TOPICS),
                ("archive", wording.ARCHIVE),
                ("lpm", wording.PROFILE),
                ("store", "Storage"),
                ("jobs", "Background work"),
            )
        }
        self.columns = 0
        self._reflow(3)
        lay.addLayout(self.grid)
        lay.addWidget(_heading("What changed in memory lately"))
        self.events = ListModel(event_columns())
        self.events_view = InspectorTable(self.events, multi=False, sortable=False)
        hide_technical(self.events_view, self.events, "events", False)
        self._fit_sentence()
        lay.addWidget(self.events_view, 1)
        self.events_view.doubleClicked.connect(self._open_event)

    def set_details(self, on: bool) -> None:
        self.details = on
        hide_technical(self.events_view, self.events, "events", on)
        self._fit_sentence()
        if self._last is not None:
            self.apply(*self._last)

    def _fit_sentence(self) -> None:
        """Without the technical columns the sentence is the last shown: it takes the width left."""
        header = self.events_view.horizontalHeader()
        col = self.events.column_index("summary")
        header.setStretchLastSection(self.details)  # hidden, the last (technical) column took the stretch
        header.setSectionResizeMode(
            col, QHeaderView.ResizeMode.Interactive if self.details else QHeaderView.ResizeMode.Stretch
        )

    def _reflow(self, columns: int) -> None:
        """Lay the cards out in `columns` columns: three in a wide panel, two in a docked one, so their
        figures are never cut off."""
        if columns == self.columns:
            return
        self.columns = columns
        for card in self.cards.values():
            self.grid.removeWidget(card)
        for c in range(3):
            self.grid.setColumnStretch(c, 1 if c < columns else 0)
        for i, key in enumerate(("stm", "mtm", "archive", "lpm", "store", "jobs")):
            self.grid.addWidget(self.cards[key], i // columns, i % columns)

    def resizeEvent(self, event) -> None:
        width = event.size().width()
        self._reflow(3 if width >= 640 else 2)  # the panel's buttons keep it wider than ~400 px
        super().resizeEvent(event)

    def apply(self, stats: dict, events: list, params) -> None:
        self.stats = stats
        self._last = (stats, events, params)
        pages = stats.get("pages", {})
        segs = stats.get("segments", {})
        know = stats.get("knowledge", {})
        convs = stats.get("conversations", 0) or 0
        tech = self.details
        self.banner.setVisible(bool(stats.get("paused")))
        self.cards["stm"].set(
            count(pages.get("stm"), "page"),
            f"STM: up to {params.tiers.stm_capacity} pages of each of {count(convs, 'conversation')}, then the "
            "oldest moves to mid-term (FIFO)"
            if tech
            else f"the latest exchanges of your {count(convs, 'chat')}, read with every reply; older ones move "
            "into topics",
        )
        self.cards["mtm"].set(
            count(segs.get("mtm"), "topic"),
            f"MTM segments: {count(pages.get('mtm'), 'page')}; above {params.tiers.mtm_capacity} the coldest "
            "is archived"
            if tech
            else f"{count(pages.get('mtm'), 'page')} grouped by subject; past {params.tiers.mtm_capacity} topics "
            "the least used goes to the archive",
            used=segs.get("mtm", 0),
            cap=params.tiers.mtm_capacity,
        )
        self.cards["archive"].set(
            count(segs.get("archive"), "topic"),
            f"{count(pages.get('archive'), 'page')}; still found when you ask about them",
        )
        n_facts = know.get("user", 0) or 0
        self.cards["lpm"].set(
            f"{count(n_facts, 'fact')} · {count(stats.get('traits'), 'trait')}",
            f"LPM: {count(stats.get('traits'), 'trait')} (at most {params.persona.max_traits}), "
            f"{know.get('assistant', 0):,} assistant facts; segments with heat ≥ τ = {params.heat.tau:g} are "
            "promoted here"
            if tech
            else "learned from your busiest topics, or added by you (Saved memories lists them); "
            f"{count(know.get('assistant', 0), 'note')} on what Mnemo said it would do",
            used=stats.get("traits", 0),
            cap=params.persona.max_traits,
        )
        self.cards["store"].set(
            fmt.size(stats.get("db_size_bytes")),
            f"embedding model {fmt.embedder_name(stats.get('embed_model_id'))} "
            f"({stats.get('embed_dim')}-d); "
            f"schema v{stats.get('schema_version')}; {count(stats.get('pages_total'), 'page')}, "
            f"{count(stats.get('messages'), 'message')}; words of "
            f"{stats.get('pages_word_indexed', 0):,} pages indexed "
            f"({fmt.size(stats.get('word_index_bytes', 0))})"
            if tech
            else f"one file on this computer: {count(stats.get('pages_total'), 'page')} from "
            f"{count(stats.get('messages'), 'message')}",
        )
        pend = stats.get("pending_jobs", 0) or 0
        self.cards["jobs"].set(
            "paused" if stats.get("paused") else (f"{pend:,} waiting" if pend else "idle"),
            (pending_work(stats.get("pending_by_kind")) or "memory updates waiting to run")
            if pend
            else "all memory updates are done",
        )
        self.events.set_rows(list(reversed(events)))
        hide_technical(self.events_view, self.events, "events", tech)  # a model reset shows every column again
        self._fit_sentence()

    def select_event(self, event_id: int) -> bool:
        """Select the row of event `event_id` (the status bar's "Memory updated" opens on it)."""
        return self.events_view.select_key(event_id)

    def _open_event(self, index: QModelIndex) -> None:
        e = self.events.record(index.row())
        if e is None:
            return
        if e.item_kind == "page" and e.item_id:
            self.panel.show_page(e.item_id)
        elif e.item_kind == "segment" and e.item_id:
            self.panel.show_segment(e.item_id)
        elif e.item_kind in ("trait", "knowledge") and e.item_id:
            self.panel.show_persona_item(e.item_kind, e.item_id)


# ====================================================================== Pages
class PagesView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.page = None  # the page in the detail pane
        self.page_context: dict = {}
        self.details = False  # the panel's Details switch: technical lines shown
        self.model = PagesModel(panel.worker)
        self.model.error.connect(panel.status_error)
        lay = QVBoxLayout(self)
        bar = QHBoxLayout()
        self.search = _DebouncedLine("Search page text…")
        self.search.settled.connect(lambda _: self._apply_filters())
        self.tier = QComboBox()
        for label, val in TIER_FILTERS:
            self.tier.addItem(label, val)
        self.tier.currentIndexChanged.connect(lambda _: self._apply_filters())
        self.space = QComboBox()  # memory spaces: filled by `set_spaces`, hidden while there is one
        self.space.setObjectName("pageSpaceFilter")
        self.space.setToolTip("Only the pages of one memory space")
        self.space.addItem("All spaces", None)
        self.space.hide()
        self.space.currentIndexChanged.connect(lambda _: self._apply_filters())
        self.pinned = QCheckBox("Pinned only")
        self.pinned.toggled.connect(lambda _: self._apply_filters())
        self.segment_chip = QPushButton()
        self.segment_chip.setToolTip("Showing the pages of one topic; click to show all pages")
        self.segment_chip.clicked.connect(lambda: self.set_segment_filter(None))
        self.segment_chip.hide()
        self.segment_filter: int | None = None
        self.chat_chip = QPushButton()
        self.chat_chip.setToolTip("Showing what memory holds from one chat; click to show all pages")
        self.chat_chip.clicked.connect(lambda: self.set_chat_filter(None))
        self.chat_chip.hide()
        self.chat_filter: int | None = None
        self.deleted_chats = False  # pages of chats deleted without forgetting what they taught
        self.count = QLabel("")
        bar.addWidget(self.search, 2)
        for w in (self.tier, self.space, self.pinned):
            bar.addWidget(w)
        bar.addStretch(1)
        bar.addWidget(self.count)
        lay.addLayout(bar)
        chips = QHBoxLayout()  # a row of its own: in the dock the search box would shrink to "S…"
        chips.addWidget(self.segment_chip)
        chips.addWidget(self.chat_chip)
        chips.addStretch(1)
        lay.addLayout(chips)

        split = QSplitter(Qt.Orientation.Vertical)
        self.table = InspectorTable(self.model)
        self.pins = PinAndForget("page", panel, self.table, self.model, lambda: self.page, self._forget_question)
        # "Move to space…" / "Copy to space…" in the table's context menu (ui/spaces_dialog.py)
        self.space_actions = SpaceActions(panel, [self.table], self._selected_pages)
        self.table.current_key_changed.connect(self._on_current)
        self.table.delete_pressed.connect(self.pins.forget_selected)
        split.addWidget(self.table)
        detail = QWidget()
        dl = QVBoxLayout(detail)
        dl.setContentsMargins(0, 4, 0, 0)
        # short labels (the tooltips say more), two rows: one row of seven buttons was cut off in the dock
        self.prev_btn = _button("◀ Previous", "The page before it on the same subject", self.go_prev)
        self.next_btn = _button("Next ▶", "The page after it on the same subject", self.go_next)
        self.seg_btn = _button("Its topic", "Show this page's topic and how much it is in use", self.go_segment)
        self.msg_btn = _button("Its message", "Show this exchange in its conversation", self.go_message)
        self.edit_btn = _button("Edit…", "Correct this page's text (re-embedded and re-indexed)", self.edit_current)
        self.pin_btn = _button("Pin", "A pinned page keeps its topic out of the archive", self.pins.toggle_pin)
        self.forget_btn = _button("Forget…", "Forget the selected pages for good (Delete)", self.pins.forget_selected)
        _button_rows(
            dl,
            (self.prev_btn, self.next_btn, self.seg_btn, self.msg_btn),
            (self.edit_btn, self.pin_btn, self.forget_btn),
        )
        self.detail = _browser()
        self.detail.anchorClicked.connect(self._on_link)
        dl.addWidget(self.detail, 1)
        split.addWidget(detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 1)
        self.model.loaded.connect(self._on_loaded)
        self._show_page(None)

    # -------------------------------------------------------------- filters / loading
    def _apply_filters(self) -> None:
        self.model.set_filters(
            text=self.search.text().strip() or None,
            tier=self.tier.currentData(),
            pinned=True if self.pinned.isChecked() else None,
            segment_id=self.segment_filter,
            conversation_id=self.chat_filter,
            deleted_chats=self.deleted_chats or None,
            space_id=self.space.currentData(),
        )
        self.table.scrollToTop()

    def set_chat_filter(self, cid: int | None, title: str = "", *, deleted: bool = False) -> None:
        """Show only the pages of one chat (the chat list's "Show what Mnemo remembers from it"), or with
        `deleted` those of chats deleted without forgetting them, in every tier; the chip says which
        and clears the filter when clicked."""
        self.chat_filter, self.deleted_chats = (None, True) if deleted else (cid, False)
        name = title if len(title) <= 48 else title[:47] + "…"
        on = deleted or cid is not None
        self.chat_chip.setText("From deleted chats  ✕" if deleted else f"Chat: {name or cid}  ✕" if on else "")
        self.chat_chip.setToolTip(
            plain.tip(
                "Showing the pages of chats that were deleted without forgetting what "
                "they taught; click to show all pages"
                if deleted
                else f"Showing what memory holds from “{title or cid}”; click to show all pages"
            )
        )
        self.chat_chip.setVisible(on)
        if on:
            self.segment_filter = None
            self.segment_chip.hide()
            self._clear_other_filters()
        self._apply_filters()

    def _clear_other_filters(self) -> None:
        """A chat's or a topic's pages are all of them: a search, a tier or "pinned only" left from before
        made "what Mnemo remembers from this chat" show 1 of its 2 pages."""
        for w, clear in (
            (self.search, self.search.clear),
            (self.tier, lambda: self.tier.setCurrentIndex(0)),
            (self.pinned, lambda: self.pinned.setChecked(False)),
        ):
            w.blockSignals(True)
            clear()
            w.blockSignals(False)

    def set_segment_filter(self, sid: int | None) -> None:
        self.segment_filter = sid
        self.segment_chip.setText(f"Topic {sid}  ✕" if sid is not None else "")
        self.segment_chip.setVisible(sid is not None)
        if sid is not None:
            self.chat_filter, self.deleted_chats = None, False
            self.chat_chip.hide()
            self._clear_other_filters()
        self._apply_filters()

    def set_details(self, on: bool) -> None:
        self.details = on
        if self.page is not None:
            self._show_page(self.page, self.page_context)

    def _on_loaded(self) -> None:
        n = self.model.rowCount()
        self.count.setText(f"{n:,} page{'s' if n != 1 else ''}")
        self._hide_space_column()
        if self.page is None and n and not self.table.currentIndex().isValid():
            self.table.selectRow(0)

    def refresh(self) -> None:
        self.model.refresh()
        self.load_spaces()
        if self.page is not None:
            self.load_page(self.page.id, select=False)

    def ensure_loaded(self) -> None:
        if not self.model.ready and not self.model.is_loading():
            self.model.reload()
            self.load_spaces()

    def _selected_pages(self, callback) -> None:
        """The selected pages as ("page", id) pairs, for `SpaceActions`."""
        rows = self.table.selected_rows()
        if rows:
            self.panel.resolve_keys(self.model, rows, lambda ids: callback([("page", i) for i in ids]))

    def load_spaces(self) -> None:
        """Read the memory's spaces into the space filter (shown when there are two or more)."""
        self.panel.run(lambda s: list(s.spaces.names().items()), self.set_spaces)

    def set_spaces(self, spaces: list[tuple[int, str]]) -> None:
        keep = self.space.currentData()
        self.space.blockSignals(True)
        self.space.clear()
        self.space.addItem("All spaces", None)
        for sid, name in spaces:
            self.space.addItem(name, sid)
        self.space.setCurrentIndex(max(self.space.findData(keep), 0) if keep is not None else 0)
        self.space.blockSignals(False)
        self.space.setVisible(len(spaces) > 1)
        self._hide_space_column()
        if keep is not None and self.space.currentData() != keep:
            self._apply_filters()

    def _hide_space_column(self) -> None:
        """The Space column, shown with the filter (a reload shows every column again: `_on_loaded`)."""
        self.table.setColumnHidden(self.model.column_index("space"), self.space.count() < 3)

    # -------------------------------------------------------------- detail
    def _on_current(self, key) -> None:
        if key is None:
            return
        rec = self.table.current_record()
        if rec is not None and rec.id == key:
            self.load_page(rec.id, select=False, quick=rec)

    def load_page(self, pid: int, *, select: bool = True, quick=None) -> None:
        if quick is not None:
            self._show_page(quick, self.page_context if self.page and self.page.id == quick.id else {})

        def fetch(store):
            p = store.pages.get(pid)
            ctx: dict[str, Any] = {}
            if p is not None:
                if p.conversation_id is not None:
                    conv = store.conversations.get_conversation(p.conversation_id)
                    ctx["conversation_title"] = conv.title if conv else None
                if p.segment_id is not None:
                    seg = store.segments.get(p.segment_id)
                    ctx["segment"] = seg
            return p, ctx

        def done(result):
            p, ctx = result
            if p is None:
                if self.page is not None and self.page.id == pid:
                    self._show_page(None, note=f"Page {pid} is no longer in memory (forgotten).")
                elif quick is None:
                    self.panel.status(f"Page {pid} is no longer in memory.")
                return
            self._show_page(p, ctx)
            if select:
                self.table.select_key(p.id)

        self.panel.run(fetch, done, label="page detail")

    def _show_page(self, p, ctx: dict | None = None, note: str = "") -> None:
        self.page = p
        self.page_context = ctx or {}
        has = p is not None
        for b in (self.edit_btn, self.pin_btn):
            b.setEnabled(has)
        self.forget_btn.setEnabled(has or bool(self.table.selected_rows()))
        self.prev_btn.setEnabled(has and p.prev_page_id is not None)
        self.next_btn.setEnabled(has and p.next_page_id is not None)
        self.seg_btn.setEnabled(has and p.segment_id is not None)
        self.msg_btn.setEnabled(has and (p.assistant_message_id or p.user_message_id) is not None)
        if not has:
            self.pin_btn.setText("Pin")
            grey = muted_html()
            self.detail.setHtml(
                f"<p style='color:{grey}'>{fmt.esc(note) if note else 'Select a page to read it in full.'}"
                f"</p><p style='color:{grey}'>A page is one exchange: what you said and what the "
                "assistant replied.</p>"
            )
            return
        self.pin_btn.setText("Unpin" if p.pinned else "Pin")
        ctx = self.page_context
        links = []
        if p.segment_id is not None:
            seg = ctx.get("segment")
            seg_heat = f", heat {heat(seg.heat)}" if seg is not None else ""
            links.append(f"<a href='segment:{p.segment_id}'>topic {p.segment_id}</a>{seg_heat}")
        if p.conversation_id is not None:
            title = ctx.get("conversation_title")
            t = f" “{fmt.esc(fmt.one_line(title, 60))}”" if title else ""
            mid = p.assistant_message_id or p.user_message_id
            if mid:
                links.append(f"<a href='message:{p.conversation_id}:{mid}'>chat{t}, message {mid}</a>")
            else:
                links.append(f"chat{t}")
        chain = []
        if p.prev_page_id:
            chain.append(f"<a href='page:{p.prev_page_id}'>◀ page {p.prev_page_id}</a>")
        if p.next_page_id:
            chain.append(f"<a href='page:{p.next_page_id}'>page {p.next_page_id} ▶</a>")
        meta = p.meta or {}
        meta_txt = ", ".join(f"{k}: {v}" for k, v in meta.items() if not isinstance(v, (dict, list)))[:300]
        pinned = " · <b>pinned</b>" if p.pinned else ""
        grey = muted_html()
        html = [
            f"<h3 style='margin:0'>Page {p.id} <span style='font-weight:normal;color:{grey}'>· {fmt.tier(p.tier)} · "
            f"{fmt.when(p.timestamp)}{pinned}</span></h3>",
            f"<p style='margin:4px 0'>{' · '.join(links)}</p>" if links else "",
            (
                f"<p style='margin:4px 0'><b>Same subject</b> {' '.join(chain) or '(none before or after)'}"
                + (f" — <i>{fmt.esc(p.chain_summary)}</i>" if p.chain_summary else "")
                + "</p>"
            ),
            f"<p style='margin:4px 0;color:{grey}'><b>Keywords</b> {fmt.esc(', '.join(p.keywords)) or '—'}</p>",
            f"<p style='margin:8px 0 2px 0'><b>You</b></p><div>{fmt.paragraphs(p.user_text)}</div>",
            f"<p style='margin:8px 0 2px 0'><b>Assistant</b></p><div>{fmt.paragraphs(p.assistant_text)}</div>",
            f"<p style='color:{grey};margin-top:8px'>{fmt.esc(meta_txt)}</p>" if meta_txt and self.details else "",
        ]
        self.detail.setHtml("".join(html))

    def _on_link(self, url: QUrl) -> None:
        self.panel.follow_link(url.toString())

    # -------------------------------------------------------------- navigation
    def go_prev(self) -> None:
        if self.page is not None and self.page.prev_page_id:
            self.load_page(self.page.prev_page_id)

    def go_next(self) -> None:
        if self.page is not None and self.page.next_page_id:
            self.load_page(self.page.next_page_id)

    def go_segment(self) -> None:
        if self.page is not None and self.page.segment_id is not None:
            self.panel.show_segment(self.page.segment_id)

    def go_message(self) -> None:
        p = self.page
        if p is not None and p.conversation_id is not None:
            self.panel.open_message(p.conversation_id, p.assistant_message_id or p.user_message_id)

    # -------------------------------------------------------------- controls
    def edit_current(self) -> None:
        p = self.page
        if p is None:
            return
        vals = self.panel.edit_texts(
            f"Edit page {p.id}",
            [("User said", p.user_text), ("Assistant replied", p.assistant_text)],
            "Mnemo reads the page again, so it is found by its new words; its topic's summary is refreshed.",
        )
        if vals is None:
            return
        u, a = vals
        self.panel.act(lambda s: s.curation.edit_page(p.id, user_text=u, assistant_text=a), f"Page {p.id} edited.")

    def _forget_question(self, ids: list[int]) -> tuple[str, str]:
        what = f"page {ids[0]}" if len(ids) == 1 else f"these {len(ids)} pages"
        return (
            "Forget pages",
            f"Forget {what} for good?\n\nThey leave memory and search, with the facts and traits about "
            "you that came only from them. This cannot be undone.",
        )


# ====================================================================== Segments
class SegmentsView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.params = panel.params
        self.segment = None
        self.details = False
        self._events: list = []
        self.model = SegmentsModel(panel.worker, tau=self.params.heat.tau)
        self.model.error.connect(panel.status_error)
        lay = QVBoxLayout(self)
        bar = QHBoxLayout()
        self.search = _DebouncedLine("Search topics…")
        self.search.settled.connect(lambda _: self._apply_filters())
        self.tier = QComboBox()
        for label, val in SEG_TIER_FILTERS:
            self.tier.addItem(label, val)
        self.tier.currentIndexChanged.connect(lambda _: self._apply_filters())
        self.pinned = QCheckBox("Pinned only")
        self.pinned.toggled.connect(lambda _: self._apply_filters())
        self.count = QLabel("")
        bar.addWidget(self.search, 2)
        bar.addWidget(self.tier)
        bar.addWidget(self.pinned)
        lay.addLayout(bar)
        # the key and the count on a line of their own: beside the filters they squeezed the search box
        # to a few letters in a docked panel
        key = QHBoxLayout()
        legend = QLabel(
            f"<span style='color:#64b5f6'>■</span> quiet  <span style='color:#ffb300'>■</span> warming  "
            f"<span style='color:#e53935'>■</span> busy  <span style='color:#b71c1c'>|</span> threshold "
            f"{self.params.heat.tau:g}"
        )
        legend.setToolTip(
            "Heat: how much a topic is in use. A topic whose heat reaches the threshold is read for what it "
            "says about you (your profile)"
        )
        key.addWidget(legend)
        key.addStretch(1)
        key.addWidget(self.count)
        lay.addLayout(key)

        split = QSplitter(Qt.Orientation.Vertical)
        self.table = InspectorTable(self.model)
        hide_technical(self.table, self.model, "segments", False)
        self.pins = PinAndForget("segment", panel, self.table, self.model, lambda: self.segment, self._forget_question)
        self.delegate = BarDelegate(self.model.heat_scale, lambda: self.params.heat.tau, parent=self.table)
        self.table.setItemDelegateForColumn(self.model.column_index("heat"), self.delegate)
        self.table.current_key_changed.connect(self._on_current)
        self.table.delete_pressed.connect(self.pins.forget_selected)
        split.addWidget(self.table)

        bottom = QSplitter(Qt.Orientation.Horizontal)
        self.chart = SegmentsHeatChart()
        self.chart.segment_clicked.connect(self.show_segment)
        bottom.addWidget(self.chart)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        self.history = SegmentHistoryChart()
        rl.addWidget(self.history, 3)
        self.history_note = QLabel("")
        self.history_note.setWordWrap(True)
        self.history_note.setStyleSheet(MUTED + " font-size: 11px;")
        rl.addWidget(self.history_note)
        self.pages_btn = _button("Its pages", "List this topic's pages", self.show_pages)
        self.restore_btn = _button("Restore", "Bring this topic back from the archive", self.restore)
        self.pin_btn = _button("Pin", "A pinned topic is never archived", self.pins.toggle_pin)
        self.forget_btn = _button(
            "Forget…", "Forget the selected topics and their pages (Delete)", self.pins.forget_selected
        )
        _button_rows(rl, (self.pages_btn, self.restore_btn), (self.pin_btn, self.forget_btn))
        self.detail = _browser()
        self.detail.anchorClicked.connect(lambda u: self.panel.follow_link(u.toString()))
        rl.addWidget(self.detail, 2)
        bottom.addWidget(right)
        bottom.setStretchFactor(0, 1)
        bottom.setStretchFactor(1, 1)
        split.addWidget(bottom)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        lay.addWidget(split, 1)
        self.model.loaded.connect(self._on_loaded)
        self._show_segment(None)

    def _apply_filters(self) -> None:
        self.model.set_filters(
            text=self.search.text().strip() or None,
            tier=self.tier.currentData(),
            pinned=True if self.pinned.isChecked() else None,
        )
        self.table.scrollToTop()

    def set_details(self, on: bool) -> None:
        self.details = on
        hide_technical(self.table, self.model, "segments", on)
        if self.segment is not None:
            self._show_segment(self.segment, events=self._events)

    def _on_loaded(self) -> None:
        n = self.model.rowCount()
        self.count.setText(count(n, "topic"))
        hide_technical(self.table, self.model, "segments", self.details)  # a reload shows every column again
        self.table.viewport().update()
        if self.segment is None and n and not self.table.currentIndex().isValid():
            self.table.selectRow(0)

    def ensure_loaded(self) -> None:
        if not self.model.ready and not self.model.is_loading():
            self.model.reload()
            self.load_chart()

    def refresh(self) -> None:
        self.model.refresh()
        self.load_chart()
        if self.segment is not None:
            self.show_segment(self.segment.id, select=False)

    def load_chart(self) -> None:
        def fetch(store):
            segs = store.segments.list_segments(tier="mtm", order_by="heat", descending=True, limit=20)
            return segs, store.segments.count_segments(tier="mtm")

        self.panel.run(fetch, lambda r: self.chart.set_segments(r[0], self.params, r[1]), label="heat chart")

    def _on_current(self, key) -> None:
        if key is not None:
            self.show_segment(key, select=False)

    def show_segment(self, sid: int, select: bool = True) -> None:
        def fetch(store):
            seg = store.segments.get(sid)
            if seg is None:
                return None, None
            evs = store.event_log.segment_events(sid)
            return seg, evs

        def done(result):
            seg, evs = result
            if seg is None:
                if self.segment is not None and self.segment.id == sid:
                    self._show_segment(None, f"Topic {sid} is no longer in memory.")
                return
            self._show_segment(seg, events=evs)
            if select:
                self.table.select_key(sid)

        self.panel.run(fetch, done, label="segment detail")

    def _show_segment(self, seg, note: str = "", events=None) -> None:
        self.segment = seg
        self._events = list(events or [])
        has = seg is not None
        for b in (self.pages_btn, self.pin_btn, self.forget_btn):
            b.setEnabled(has)
        self.restore_btn.setVisible(has and seg.tier == "archive")
        if not has:
            self.history.clear()
            self.history_note.setText("")
            grey = muted_html()
            self.detail.setHtml(
                f"<p style='color:{grey}'>{fmt.esc(note) or 'Select a topic.'}</p>"
                f"<p style='color:{grey}'>A topic groups pages on one subject. Its heat rises when a reply "
                "uses its pages or new messages join it, and fades when it is not used.</p>"
            )
            return
        p = self.params
        self.pin_btn.setText("Unpin" if seg.pinned else "Pin")
        hist = heat_history(events or [], seg, p)
        self.history.set_history(seg, hist, p)
        self.history_note.setText(history_note(hist))
        to_go = max(0.0, p.heat.tau - seg.heat)
        grey = muted_html()
        if seg.heat < p.heat.tau:
            status = f"{heat_gap(to_go)} below the threshold of {p.heat.tau:g}"
        elif seg.l_interaction == 0 and seg.promotions:
            status = f"over the threshold of {p.heat.tau:g}; nothing new since it was last read"
        else:
            status = f"<b>over the threshold of {p.heat.tau:g}: its new messages are read for your profile next</b>"
        words = heat_in_words(seg.n_visit, seg.l_interaction, seg.heat, p.heat.tau, seg.promotions)
        formula = (
            f"<p style='margin:4px 0;color:{grey}'>heat {heat(seg.heat)} = {p.heat.alpha:g}·N_visit ({seg.n_visit}) + "
            f"{p.heat.beta:g}·L_interaction ({seg.l_interaction}) + {p.heat.gamma:g}·recency ({seg.recency:.3f}); "
            f"τ = {p.heat.tau:g}; {seg.tier}, segment {seg.id}</p>"
            if self.details
            else ""
        )
        self.detail.setHtml(
            f"<h3 style='margin:0'>Topic {seg.id}{': ' + fmt.esc(seg.title) if getattr(seg, 'title', '') else ''} "
            f"{title_by_html(seg, grey)}"
            f"<span style='font-weight:normal;color:{grey}'>· {fmt.segment_tier(seg.tier)}"
            f"{' · <b>pinned</b>' if seg.pinned else ''}</span></h3>"
            f"<p style='margin:4px 0'><b>Heat {heat(seg.heat)}</b>: {fmt.esc(words)}; {status}.</p>{formula}"
            f"<p style='margin:4px 0;color:{grey}'>Last used {fmt.when(seg.last_access)} ({fmt.ago(seg.last_access)}); "
            f"started {fmt.when(seg.created_at)}; read for your profile {seg.promotions}×; "
            f"<a href='segpages:{seg.id}'>{count(seg.page_count, 'page')}</a></p>"
            f"<p style='margin:4px 0'><b>Keywords</b> {fmt.esc(', '.join(seg.keywords)) or '—'}</p>"
            f"<p style='margin:6px 0 0 0'><b>Summary</b></p><div>{fmt.paragraphs(seg.summary)}</div>"
        )

    # -------------------------------------------------------------- controls
    def show_pages(self) -> None:
        if self.segment is not None:
            self.panel.show_segment_pages(self.segment.id)

    def restore(self) -> None:
        s = self.segment
        if s is not None:
            self.panel.act(lambda st: st.segments.restore(s.id), f"Topic {s.id} brought back from the archive.")

    def _forget_question(self, ids: list[int]) -> tuple[str, str]:
        recs = {r.id: r for r in self.model.loaded_records()}
        pages = sum(recs[i].page_count for i in ids if i in recs)
        what = f"topic {ids[0]}" if len(ids) == 1 else f"these {len(ids)} topics"
        return (
            "Forget topics",
            f"Forget {what} and {'its' if len(ids) == 1 else 'their'} {count(pages, 'page')} for good?\n\n"
            "The pages leave memory and search, with the facts and traits about you that came only from "
            "them. This cannot be undone.",
        )


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
        self.add_btn = _button(
            "Add…", "Tell Mnemo something to remember: a fact about you or about Mnemo, or a trait", self.add_item
        )
        self.edit_btn = _button(
            "Edit…", "Correct the selected trait or fact (the old text is kept as a version)", self.edit_current
        )
        self.pin_btn = _button("Pin", "Mnemo never changes a pinned item by itself", self.toggle_pin)
        self.forget_btn = _button("Forget…", "Forget the selected items for good (Delete)", self.forget_selected)
        _button_rows(lay, (self.add_btn, self.edit_btn, self.pin_btn, self.forget_btn))

        outer = QSplitter(Qt.Orientation.Vertical)
        top = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        # headings wrap: a docked panel gives each half ~250 px, which cut "…knows about the u"
        self.traits_label = _heading("Traits, by kind")
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
        top.addWidget(left)

        right = QSplitter(Qt.Orientation.Vertical)
        self.knowledge: dict[str, ListModel] = {}
        self.kviews: dict[str, InspectorTable] = {}
        for owner, title in (
            ("user", "Facts about you"),
            ("assistant", "Facts about Mnemo (what it said it would do)"),
        ):
            box = QWidget()
            bl = QVBoxLayout(box)
            bl.setContentsMargins(0, 0, 0, 0)
            lab = _heading(title)
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
            self.knowledge[owner] = m
            self.kviews[owner] = v
            box.setProperty("title_label", lab)
            right.addWidget(box)
        top.addWidget(right)
        top.setStretchFactor(0, 1)
        top.setStretchFactor(1, 1)
        outer.addWidget(top)
        # "Move to space…" / "Copy to space…" on the selected facts and traits (ui/spaces_dialog.py)
        self.space_actions = SpaceActions(panel, [self.tree, *self.kviews.values()], lambda cb: cb(self._selected()))

        bottom = QSplitter(Qt.Orientation.Horizontal)
        self.detail = _browser()
        self.detail.anchorClicked.connect(lambda u: self.panel.follow_link(u.toString()))
        bottom.addWidget(self.detail)
        vbox = QWidget()
        vl = QVBoxLayout(vbox)
        vl.setContentsMargins(0, 0, 0, 0)
        vl.addWidget(_heading("Version history"))
        self.versions = ListModel(version_columns(), key=lambda v: (v.item_kind, v.item_id, v.version))
        self.versions_view = InspectorTable(self.versions, multi=False, sortable=False)
        vl.addWidget(self.versions_view, 1)
        bottom.addWidget(vbox)
        outer.addWidget(bottom)
        outer.setStretchFactor(0, 3)
        outer.setStretchFactor(1, 2)
        lay.addWidget(outer, 1)
        self._show_item(None)

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

        self.panel.run(fetch, self._apply, label="persona")

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

        self.panel.run(fetch, done, label=f"{kind} detail")

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
        name = wording._item(kind, r.id).capitalize()
        self.panel.act(lambda s: s.curation.pin(kind, r.id, new), f"{name} {'pinned' if new else 'unpinned'}.")

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

        def forget(s):
            if traits:
                s.curation.forget("trait", traits)
            if know:
                s.curation.forget("knowledge", know)

        self.panel.act(forget, f"Forgot {n} item{'s' if n != 1 else ''}.")


# ====================================================================== Retrieval trace
class TraceView(QWidget):
    def __init__(self, panel: PanelHost):
        super().__init__()
        self.panel = panel
        self.data: TraceData | None = None
        self.loading: int | None = None  # the message whose trace is being read
        self.details = False
        lay = QVBoxLayout(self)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Test a query:"))
        self.query = QLineEdit()
        self.query.setPlaceholderText(
            "Type what you would ask, and see what memory would recall (nothing is sent to the model)"
        )
        self.query.returnPressed.connect(self.run_query)
        bar.addWidget(self.query, 1)
        self.scope = QComboBox()
        # sized for "all memory", not for its longest entry, which squeezed the query box to a letter
        self.scope.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.scope.setMinimumContentsLength(10)
        self.scope.addItem("all memory", None)
        self.scope.setToolTip("With a chat, its recent messages are recalled too")
        bar.addWidget(self.scope)
        self.run_btn = _button("Recall", "See what memory would recall for this", self.run_query)
        bar.addWidget(self.run_btn)
        lay.addLayout(bar)
        self.header = QLabel("")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.header.setStyleSheet("padding: 4px; background: palette(alternate-base);")
        lay.addWidget(self.header)

        split = QSplitter(Qt.Orientation.Vertical)
        self.tabs = QTabWidget()
        pages = QSplitter(Qt.Orientation.Vertical)
        self.in_prompt = ListModel(trace_page_columns(in_prompt=True), key=lambda r: r["page_id"])
        self.not_in_prompt = ListModel(trace_page_columns(in_prompt=False), key=lambda r: r["page_id"])
        self.stm = ListModel(trace_page_columns(in_prompt=False), key=lambda r: r["page_id"])
        # one retrieval's pages: both tables draw their score bars on the same scale (the best score)
        recalled = (self.in_prompt, self.not_in_prompt)
        self.in_prompt_view, box1, self.in_prompt_label = self._table_box(
            self.in_prompt, "Pages in the prompt", recalled
        )
        self.not_in_prompt_view, box2, self.not_in_prompt_label = self._table_box(
            self.not_in_prompt, "Recalled, not in the prompt", recalled
        )
        self.stm_view, box3, self.stm_label = self._table_box(self.stm, "Recent messages of the chat")
        for b in (box1, box2, box3):
            pages.addWidget(b)
        self.tabs.addTab(pages, "Pages")
        self.items = ListModel(trace_item_columns(), key=lambda r: r["key"])
        self.items_view, ibox, self.items_label = self._table_box(self.items, "Facts and traits recalled")
        self.tabs.addTab(ibox, "Facts && traits")
        self.segs = ListModel(trace_segment_columns(), key=lambda r: r["segment_id"])
        self.segs_view, sbox, self.segs_label = self._table_box(
            self.segs, "Topics the recalled pages came from (best page first)"
        )
        self.segs_view.doubleClicked.connect(
            lambda idx: self.panel.show_segment(self.segs.record(idx.row())["segment_id"])
        )
        self.tabs.addTab(sbox, "Topics")
        split.addWidget(self.tabs)
        self.detail = _browser()
        self.detail.setMinimumHeight(DETAIL_MIN_HEIGHT)  # two lines tall, it showed no page's text
        self.detail.anchorClicked.connect(lambda u: self.panel.follow_link(u.toString()))
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 1)
        self.set_data(None)

    def _table_box(self, model: ListModel, title: str, scale_models: tuple[ListModel, ...] = ()):
        """A titled table; its score bars are scaled to the best score in `scale_models` (default:
        its own rows), so tables of one retrieval compare: a weak page recalled but left out of
        the prompt does not get a full bar because it is the best of its own table."""
        box = QWidget()
        bl = QVBoxLayout(box)
        bl.setContentsMargins(0, 0, 0, 0)
        lab = _heading(title)
        bl.addWidget(lab)
        view = InspectorTable(model, multi=False, sortable=False)
        if "score" in [c.key for c in model.columns]:
            models = scale_models or (model,)
            view.setItemDelegateForColumn(
                model.column_index("score"),
                BarDelegate(lambda: max([r["score"] for m in models for r in m.records()] + [1e-6]), parent=view),
            )
        view.current_key_changed.connect(lambda key, v=view: self._on_row(v))
        if "page_id" in [c.key for c in model.columns]:
            view.doubleClicked.connect(lambda idx, m=model: self.panel.show_page(m.record(idx.row())["page_id"]))
        bl.addWidget(view, 1)
        return view, box, lab

    # -------------------------------------------------------------- API
    def show_message(self, message_id: int) -> None:
        from ui.inspector.tracing import trace_for_message

        self.header.setText(f"Loading the trace of message {message_id}…")
        self.loading = message_id
        self.panel.run(lambda s: trace_for_message(s, message_id), self.set_data, label="trace")

    def run_query(self) -> None:
        from ui.inspector.tracing import trace_for_query

        q = self.query.text().strip()
        if not q:
            return
        cid = self.scope.currentData()
        self.header.setText(f"Recalling for “{fmt.esc(q)}”…")
        self.run_btn.setEnabled(False)

        def done(data):
            self.run_btn.setEnabled(True)
            self.set_data(data)

        def failed(exc):
            self.run_btn.setEnabled(True)
            self.panel.status_error(f"retrieval failed: {exc}")

        self.panel.run(lambda s: trace_for_query(s, q, cid), done, label="test query", on_error=failed)

    def set_data(self, data: TraceData | None) -> None:
        self.data = data
        self.loading = None
        if data is None:
            for m in (self.in_prompt, self.not_in_prompt, self.stm, self.items, self.segs):
                m.set_rows([])
            self.header.setText(
                "Click the memory icon under a reply in the chat to see what it recalled, or test a question above."
            )
            self.detail.setHtml(
                f"<p style='color:{muted_html()}'>Each recalled page shows how well it matched and why: close "
                "in meaning, the same words, the date you named, or the topic it belongs to.</p>"
            )
            return
        if data.conversation_id is not None and self.scope.findData(data.conversation_id) < 0:
            self.scope.addItem(f"+ recent messages of chat {data.conversation_id}", data.conversation_id)
        reply = data.source == "reply"
        self.in_prompt.set_rows(data.in_prompt)
        self.not_in_prompt.set_rows(data.not_in_prompt)
        self.stm.set_rows(data.stm)
        self.items.set_rows(data.items)
        self.segs.set_rows(data.segments)
        self.in_prompt_view.parentWidget().setVisible(reply)
        self.not_in_prompt_view.setColumnHidden(self.not_in_prompt.column_index("left_out"), not reply)
        self.in_prompt_label.setText(
            f"Pages in the prompt ({len(data.in_prompt)}) — what the model read, in prompt order"
        )
        self.not_in_prompt_label.setText(
            f"Recalled but not in the prompt ({len(data.not_in_prompt)})"
            if reply
            else f"Recalled pages ({len(data.not_in_prompt)}), best first"
        )
        self.stm_label.setText(f"Recent messages of the chat ({len(data.stm)})")
        self.stm_view.parentWidget().setVisible(bool(data.stm))
        self.items_label.setText(f"Facts and traits recalled ({len(data.items)})")
        self.segs_label.setText(f"Topics the recalled pages came from ({len(data.segments)}), best page first")
        if reply:
            tok = f"; prompt {data.prompt_tokens:,} tokens" if data.prompt_tokens else ""
            if tok and data.cached_prompt_tokens is not None:
                tok += f" ({data.cached_prompt_tokens:,} already processed)"
            if tok and data.restored_prompt_tokens:  # activation memory: app.chat.activation_cache
                tok += f"; it started from a saved state ({data.restored_prompt_tokens:,} tokens not processed again)"
            dropped = ", ".join(f"{v} {k}" for k, v in (data.dropped or {}).items() if v)
            head = (
                f"<b>Reply {data.message_id}</b> to “{fmt.esc(fmt.one_line(data.query, 140))}”{tok}; "
                f"{len(data.in_prompt)} recalled page{'s' if len(data.in_prompt) != 1 else ''} in the prompt"
                + (f"; left out for room: {dropped}" if dropped else "")
            )
        else:
            head = (
                f"<b>Test query</b> “{fmt.esc(fmt.one_line(data.query, 140))}”: "
                f"{count(len(data.not_in_prompt), 'page')}, {count(len(data.items), 'fact or trait', 'facts and traits')}"
            )
        total = (data.timings_ms or {}).get("total")
        if total:
            head += f"; recalled in {total:.0f} ms"
        if data.common_words:
            head += (
                f"<br>On most pages, so half left out of the query's meaning: {fmt.esc(', '.join(data.common_words))}"
            )
        if data.note:
            head += f"<br><span style='color:{theme.colors().error}'>{fmt.esc(data.note)}</span>"
        self.header.setText(head)
        first = self.in_prompt_view if data.in_prompt else (self.not_in_prompt_view if data.not_in_prompt else None)
        if first is not None:
            first.selectRow(0)
        else:
            self.detail.setHtml(f"<p style='color:{muted_html()}'>Nothing was recalled.</p>")

    def listed_page_ids(self, which: str = "in_prompt") -> list[int]:
        model = {"in_prompt": self.in_prompt, "not_in_prompt": self.not_in_prompt, "stm": self.stm}[which]
        return [r["page_id"] for r in model.records()]

    # -------------------------------------------------------------- detail
    def _on_row(self, view: InspectorTable) -> None:
        idx = view.currentIndex()
        if not idx.isValid():
            return
        r = view.table_model().record(idx.row())
        if r is None:
            return
        grey = muted_html()
        tech = (
            f"<p style='margin:2px 0;color:{grey}'><b>Details:</b> {fmt.esc(r['reason'])}"
            + (f"; not quoted: {fmt.esc(r['left_out'])}" if r.get("left_out") else "")
            + "</p>"
            if self.details
            else ""
        )
        if "page_id" in r:
            seg = (
                f" · <a href='segment:{r['segment_id']}'>topic {r['segment_id']}</a>"
                if r.get("segment_id") is not None
                else ""
            )
            left = (
                f"<p style='margin:2px 0;color:{grey}'>Not in the prompt: {fmt.esc(plain_left_out(r['left_out']))}</p>"
                if r.get("left_out")
                else ""
            )
            topic = (
                f"<p style='margin:2px 0;color:{grey}'><b>Topic:</b> {fmt.esc(r['topic_title'])}"
                f" — {fmt.esc(fmt.one_line(r.get('topic_summary') or '', 240))}</p>"
                if r.get("topic_title")
                else ""
            )
            space = f" · space “{fmt.esc(r['space_name'])}”" if r.get("space_name") else ""  # two spaces or more
            self.detail.setHtml(
                f"<h3 style='margin:0'><a href='page:{r['page_id']}'>Page {r['page_id']}</a> "
                f"<span style='font-weight:normal;color:{grey}'>· {fmt.tier(r.get('tier'))} · "
                f"{fmt.when(r.get('timestamp'))}{seg}{space} · rank {r['rank']} · match {r['score']:.2f}</span></h3>"
                f"<p style='margin:4px 0'><b>Why:</b> {fmt.esc(plain_reason(r['reason']))}</p>{topic}{left}{tech}"
                f"<div>{fmt.paragraphs(r['text'])}</div>"
            )
        else:
            title = r.get("kind") or f"Topic {r.get('segment_id')}"
            self.detail.setHtml(
                f"<h3 style='margin:0'>{fmt.esc(title)}</h3>"
                f"<p><b>Why:</b> {fmt.esc(plain_reason(r['reason']))}"
                + (f" · in prompt: {r['in_prompt']}" if "in_prompt" in r else "")
                + f"</p>{tech}<div>{fmt.paragraphs(r.get('text') or r.get('summary', ''))}</div>"
            )

    def set_details(self, on: bool) -> None:
        self.details = on
        for view in (self.in_prompt_view, self.not_in_prompt_view, self.stm_view, self.items_view, self.segs_view):
            if view.currentIndex().isValid():
                self._on_row(view)
                break


__all__ = ["OverviewView", "PagesView", "SegmentsView", "PersonaView", "TraceView"]
