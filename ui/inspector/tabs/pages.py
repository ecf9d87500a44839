"""The Pages tab: every memory page in a lazily loaded table (PagesModel), filtered by text, tier and
space, with the selected page's text, its place in memory and its actions (pin, edit, forget)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from app.wording import heat
from ui import plain
from ui.inspector import fmt
from ui.inspector.columns import ALIGN_CENTER, ALIGN_RIGHT, TIER_COLORS, Column, toned
from ui.inspector.host import PanelHost
from ui.inspector.models import SPACE_TIP, LazyTableModel, elide_tip, space_label
from ui.inspector.tables import InspectorTable
from ui.inspector.tabs.common import DebouncedLine, PinAndForget, browser, button, button_rows, muted_html
from ui.spaces_dialog import SpaceActions

TIER_FILTERS = [("Everywhere", None), ("Recent chat", "stm"), ("In topics", "mtm"), ("Archive", "archive")]


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
        self.segment_filter: int | None = None
        self.chat_filter: int | None = None
        self.deleted_chats = False  # pages of chats deleted without forgetting what they taught
        lay = QVBoxLayout(self)
        self._build_filters(lay)

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
        self.prev_btn = button("◀ Previous", "The page before it on the same subject", self.go_prev)
        self.next_btn = button("Next ▶", "The page after it on the same subject", self.go_next)
        self.seg_btn = button("Its topic", "Show this page's topic and how much it is in use", self.go_segment)
        self.msg_btn = button("Its message", "Show this exchange in its conversation", self.go_message)
        self.edit_btn = button("Edit…", "Correct this page's text (re-embedded and re-indexed)", self.edit_current)
        self.pin_btn = button("Pin", "A pinned page keeps its topic out of the archive", self.pins.toggle_pin)
        self.forget_btn = button("Forget…", "Forget the selected pages for good (Delete)", self.pins.forget_selected)
        button_rows(
            dl,
            (self.prev_btn, self.next_btn, self.seg_btn, self.msg_btn),
            (self.edit_btn, self.pin_btn, self.forget_btn),
        )
        self.detail = browser()
        self.detail.anchorClicked.connect(self._on_link)
        dl.addWidget(self.detail, 1)
        split.addWidget(detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 1)
        self.model.loaded.connect(self._on_loaded)
        self._show_page(None)

    def _build_filters(self, lay: QVBoxLayout) -> None:
        """Search, tier, space and pinned filters and the count; under them the topic and chat chips."""
        bar = QHBoxLayout()
        self.search = DebouncedLine("Search page text…")
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
        self.chat_chip = QPushButton()
        self.chat_chip.setToolTip("Showing what memory holds from one chat; click to show all pages")
        self.chat_chip.clicked.connect(lambda: self.set_chat_filter(None))
        self.chat_chip.hide()
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
        self.panel.worker.submit(lambda s: list(s.spaces.names().items()), self.set_spaces)

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

        self.panel.worker.submit(fetch, done, label="page detail")

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


# ====================================================================== the pages table
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
            tip=lambda p: elide_tip(p.user_text),
        ),
        Column(
            "assistant",
            "Assistant replied",
            lambda p: fmt.one_line(p.assistant_text, 200),
            width=300,
            tip=lambda p: elide_tip(p.assistant_text),
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
