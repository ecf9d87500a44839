"""What the inspector says is in plain words: every string a user can read on its tabs (labels, buttons, tab
titles, table headers, cells and tooltips of the columns shown, detail panes, chart titles) is walked, with the
Details switch off, and none may use the memory core's own terms (app.wording.INTERNAL_TERMS: STM, MTM, LPM,
τ, N_visit, cos, FIFO, llm fallback). With Details on, the technical terms are there, one click away.

The store is filled by the real memory core (real embedder, LLM-free promotion); a reply of the bundled
model gives the Recall tab a real trace; the events of kinds the filled store lacks (a promotion whose model
output was rejected, a pinned fact not updated, a failed job, a new embedding model, a page forgotten by a
regenerate) are emitted through the core's own event log with the summaries the core writes.
"""

from __future__ import annotations

import re

from PySide6.QtCharts import QChartView
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QComboBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTabBar,
    QTextBrowser,
    QWidget,
)

from app.wording import internal_terms_in
from tests.ui.test_inspector_fixtures import (  # noqa: F401  (fixtures)
    ctx,
    fill_store,
    filled,
    load_all,
    panel_factory,
    settle,
    store,
)

ROWS_READ = 300  # the first rows of each table (every row of these small stores)
_TAGS = re.compile(r"<[^>]+>")


def _strings_of_view(view: QAbstractItemView) -> list[tuple[str, str]]:
    """(where, text) of a table or tree: the headers and cells (text and tooltip) of the columns shown."""
    model = view.model()
    out = []
    hidden = getattr(view, "isColumnHidden", lambda c: False)
    cols = [c for c in range(model.columnCount()) if not hidden(c)]
    for c in cols:
        for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            v = model.headerData(c, Qt.Orientation.Horizontal, role)
            if v:
                out.append((f"{type(view).__name__} header {c}", str(v)))

    def walk(parent: QModelIndex, depth: int) -> None:
        for r in range(min(model.rowCount(parent), ROWS_READ)):
            for c in cols:
                idx = model.index(r, c, parent)
                for role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
                    v = idx.data(role)
                    if v:
                        out.append((f"{type(model).__name__} row {r} col {c}", str(v)))
            if depth < 1 and model.rowCount(model.index(r, 0, parent)):
                walk(model.index(r, 0, parent), depth + 1)

    walk(QModelIndex(), 0)
    return out


def visible_strings(root: QWidget) -> list[tuple[str, str]]:
    """Every string of `root` a user can read now: of its visible widgets."""
    out: list[tuple[str, str]] = []
    for w in [root, *root.findChildren(QWidget)]:
        if not w.isVisibleTo(root) and w is not root:
            continue
        name = f"{type(w).__name__} {w.objectName()}".strip()
        if w.toolTip():
            out.append((f"{name} tooltip", w.toolTip()))
        if isinstance(w, QLabel):
            out.append((name, w.text()))
        elif isinstance(w, QAbstractButton):
            out.append((name, w.text()))
        elif isinstance(w, QTextBrowser):
            out.append((name, w.toPlainText()))
        elif isinstance(w, QLineEdit):
            out.append((f"{name} placeholder", w.placeholderText()))
        elif isinstance(w, QComboBox):
            out += [(name, w.itemText(i)) for i in range(w.count())]
        elif isinstance(w, QTabBar):
            for i in range(w.count()):
                out += [(name, w.tabText(i)), (f"{name} tooltip", w.tabToolTip(i))]
        elif isinstance(w, QAbstractItemView) and not isinstance(w, QHeaderView) and w.model() is not None:
            out += _strings_of_view(w)
        elif isinstance(w, QChartView):
            chart = w.chart()
            out.append((f"{name} title", chart.title()))
            out += [(f"{name} series", s.name()) for s in chart.series()]
            out += [(f"{name} axis", a.titleText()) for a in chart.axes()]
            for s in chart.series():
                for bar_set in getattr(s, "barSets", lambda: [])():
                    out.append((f"{name} bar set", bar_set.label()))
    return [(where, _TAGS.sub(" ", text)) for where, text in out if text]


def offending(strings: list[tuple[str, str]]) -> list[tuple[str, list[str], str]]:
    return [(where, terms, text[:160]) for where, text in strings if (terms := internal_terms_in(text))]


def _emit_the_other_events(store) -> None:
    """Events of the kinds a filled store has none of, as the memory core writes them."""
    seg = store.segments.list_segments(limit=1)[0]
    fact = store.persona.list_knowledge(limit=1)[0]
    with store.transaction():
        emit = store.db.emit
        emit(
            "llm_fallback",
            "segment",
            seg.id,
            f"LLM output for segment {seg.id} was rejected; used the extractive path",
            {"reason": "ValueError: no JSON", "model": "smollm2", "in_a_row": 1},
        )
        emit(
            "update_skipped",
            "knowledge",
            fact.id,
            f"knowledge {fact.id} is pinned; a conflicting fact was not applied",
            {"similarity": 0.81, "pages": [1]},
        )
        emit("job_failed", None, None, "memory job 12 (promote_segment) failed", {"job_id": 12, "error": "OSError"})
        emit(
            "embed_model_changed",
            None,
            None,
            "embedding model changed to bge-small; re-embedding queued",
            {"previous": "minilm", "model_id": "bge-small"},
        )
        emit("segment_visited", "segment", seg.id, f"segment {seg.id} recalled (N_visit 3)", {"count": 1, "n_visit": 3})
        emit("paused", None, None, "memory paused")
        emit("resumed", None, None, "memory resumed")


def test_the_inspector_speaks_plain_words_and_keeps_the_technical_ones_one_click_away(
    qtbot, store, filled, panel_factory, chat_model
):
    from app.chat.agent import ChatAgent

    agent = ChatAgent(store, chat_model)
    cid = store.conversations.create_conversation("Luna")
    first = agent.send(cid, "What happened with my cat Luna at the vet?")
    store.jobs.run_pending(allow_llm=False)  # its page is made, then the regenerate forgets it
    again = agent.regenerate(first.assistant_message_id)  # forgets the replaced reply's page: an event
    store.jobs.run_pending(allow_llm=False)
    _emit_the_other_events(store)
    panel = panel_factory("overview")
    panel.resize(1100, 900)
    settle(panel)
    assert not panel.details
    found: list = []
    # the Overview: its cards and every event shown (all the kinds above among them)
    kinds = {e.kind for e in panel.overview.events.records()}
    assert {"llm_fallback", "update_skipped", "job_failed", "forgotten", "promoted", "page_moved"} <= kinds, kinds
    found += offending(visible_strings(panel))
    # every tab, as it opens
    for name in panel.TABS:
        panel.show_tab(name)
        settle(panel)
        if name == "segments":  # a topic's detail: its heat in words, its history
            load_all(panel.segments.model, panel)
            for sid in [s.id for s in store.segments.list_segments(limit=3)]:
                panel.segments.show_segment(sid)
                settle(panel)
                found += offending(visible_strings(panel.segments))
        if name == "pages":
            load_all(panel.pages.model, panel)
            panel.pages.table.selectRow(0)
            settle(panel)
        found += offending(visible_strings(panel))
    # the Recall tab on the regenerated reply: each recalled page's and item's reason, in its table and detail
    panel.show_trace_for_message(again.assistant_message_id)
    settle(panel)
    tv = panel.trace
    assert tv.in_prompt.rowCount() + tv.not_in_prompt.rowCount() > 0
    reasons = [r["reason"] for m in (tv.in_prompt, tv.not_in_prompt, tv.items, tv.segs) for r in m.records()]
    assert any(internal_terms_in(r) for r in reasons)  # the ranking's own words are what is translated
    for i, view in enumerate((tv.in_prompt_view, tv.items_view, tv.segs_view)):
        tv.tabs.setCurrentIndex(min(i, 2))
        for row in range(view.model().rowCount()):
            view.selectRow(row)
            found += offending(visible_strings(tv))
    for row in range(tv.not_in_prompt.rowCount()):
        tv.not_in_prompt_view.selectRow(row)
        found += offending(visible_strings(tv))
    assert not found, "\n".join(f"{where}: {terms} in {text!r}" for where, terms, text in found[:25])

    # Details: the technical terms are one click away
    panel.details_btn.click()
    assert panel.details
    panel.show_tab("segments")
    settle(panel)
    panel.segments.show_segment(store.segments.list_segments(limit=1)[0].id)
    settle(panel)
    assert "N_visit" in panel.segments.detail.toPlainText()
    panel.show_tab("overview")
    settle(panel)
    technical = [t for _w, t in visible_strings(panel.overview) if internal_terms_in(t)]
    assert technical, "with Details on, the Overview shows the memory's own terms"
