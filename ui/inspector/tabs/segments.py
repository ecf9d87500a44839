"""The Topics tab: the mid-term segments (SegmentsModel) with their heat chart and history, and the
selected topic's pages and actions."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from app.wording import count, heat, heat_gap, heat_in_words
from ui.inspector import fmt
from ui.inspector.charts import SegmentHistoryChart, SegmentsHeatChart, heat_history, history_note
from ui.inspector.columns import ALIGN_CENTER, ALIGN_RIGHT, TIER_COLORS, Column, toned
from ui.inspector.delegates import BarDelegate
from ui.inspector.host import PanelHost
from ui.inspector.models import LazyTableModel, elide_tip
from ui.inspector.tables import InspectorTable
from ui.inspector.tabs.common import (
    DebouncedLine,
    PinAndForget,
    browser,
    button,
    button_rows,
    hide_technical,
    muted_html,
)

SEG_TIER_FILTERS = [("All topics", None), ("In use", "mtm"), ("Archive", "archive")]
MUTED = "color: palette(placeholder-text);"


def title_by_html(seg: Any, grey: str) -> str:
    """Who wrote a topic's title, after it in the topic's heading: the chat model (named in the tip) or,
    for the keywords' title, nothing (decision 0026)."""
    by = getattr(seg, "title_by", "")
    if not by:
        return ""
    return f"<span style='font-weight:normal;font-size:small;color:{grey}' title='{fmt.esc(by)}'>(title by the chat model)</span> "


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
        self._build_filters(lay)

        split = QSplitter(Qt.Orientation.Vertical)
        self.table = InspectorTable(self.model)
        hide_technical(self.table, self.model, "segments", False)
        self.pins = PinAndForget("segment", panel, self.table, self.model, lambda: self.segment, self._forget_question)
        self.delegate = BarDelegate(self.model.heat_scale, lambda: self.params.heat.tau, parent=self.table)
        self.table.setItemDelegateForColumn(self.model.column_index("heat"), self.delegate)
        self.table.current_key_changed.connect(self._on_current)
        self.table.delete_pressed.connect(self.pins.forget_selected)
        split.addWidget(self.table)

        split.addWidget(self._detail_pane())
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        lay.addWidget(split, 1)
        self.model.loaded.connect(self._on_loaded)
        self._show_segment(None)

    def _build_filters(self, lay: QVBoxLayout) -> None:
        """Search, tier and pinned filters; under them the heat key and the count."""
        bar = QHBoxLayout()
        self.search = DebouncedLine("Search topics…")
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

    def _detail_pane(self) -> QSplitter:
        """The heat chart of every topic, beside the selected topic's history, actions and words."""
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
        self.pages_btn = button("Its pages", "List this topic's pages", self.show_pages)
        self.restore_btn = button("Restore", "Bring this topic back from the archive", self.restore)
        self.pin_btn = button("Pin", "A pinned topic is never archived", self.pins.toggle_pin)
        self.forget_btn = button(
            "Forget…", "Forget the selected topics and their pages (Delete)", self.pins.forget_selected
        )
        button_rows(rl, (self.pages_btn, self.restore_btn), (self.pin_btn, self.forget_btn))
        self.detail = browser()
        self.detail.anchorClicked.connect(lambda u: self.panel.follow_link(u.toString()))
        rl.addWidget(self.detail, 2)
        bottom.addWidget(right)
        bottom.setStretchFactor(0, 1)
        bottom.setStretchFactor(1, 1)
        return bottom

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

        self.panel.worker.submit(fetch, lambda r: self.chart.set_segments(r[0], self.params, r[1]), label="heat chart")

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

        self.panel.worker.submit(fetch, done, label="segment detail")

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


# ====================================================================== the topics table
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
            "summary", "Summary", lambda s: fmt.one_line(s.summary, 220), width=330, tip=lambda s: elide_tip(s.summary)
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
