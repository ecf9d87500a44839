"""The Overview tab: memory at a glance (cards with counts and capacities) and the recent memory events."""

from __future__ import annotations

import re

from PySide6.QtCore import QModelIndex
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QFrame, QGridLayout, QHeaderView, QLabel, QProgressBar, QVBoxLayout, QWidget

from app import wording
from app.wording import count, event_kind, event_sentence, pending_work
from ui.inspector import fmt
from ui.inspector.columns import Column, toned
from ui.inspector.host import PanelHost
from ui.inspector.models import ListModel
from ui.inspector.tables import InspectorTable
from ui.inspector.tabs.common import heading, hide_technical


# ====================================================================== Overview
class Card(QFrame):
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
            k: Card(t)
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
        lay.addWidget(heading("What changed in memory lately"))
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


def _event_text(e) -> str:
    return event_sentence(e.kind, e.item_kind, e.item_id, e.detail, e.summary)
