"""QAbstractItemModelTester on every inspector model, through loads, sorts, filters, live refreshes,
forgetting and wiping; the heat-history replay; the dock `attach()` contract."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow

from memory_core import Event, MemoryParams
from tests.ui.test_inspector_fixtures import (  # noqa: F401  (fixtures)
    ctx,
    fill_store,
    filled,
    load_all,
    model_tester,
    panel_factory,
    random_items,
    settle,
    store,
)
from ui.inspector.charts import heat_history, segment_events


def test_lazy_models_pass_model_tester_through_changes(qtbot, store, filled, panel_factory):
    panel = panel_factory("pages")
    pages, segs = panel.pages.model, panel.segments.model
    panel.show_tab("segments")
    settle(panel)
    with model_tester(pages, segs):
        load_all(pages, panel)
        # sort in SQL and filter in SQL, with the tester watching the resets
        pages.sort(pages.column_index("id"), Qt.SortOrder.AscendingOrder)
        settle(panel)
        segs.sort(segs.column_index("page_count"), Qt.SortOrder.DescendingOrder)
        pages.set_filters(text="pasta")
        settle(panel)
        assert pages.rowCount() == store.pages.count_pages(text="pasta") > 0
        pages.set_filters()
        settle(panel)
        load_all(pages, panel)
        # live refresh with rows added (end inserts + layout change) ...
        store.intake.add_pages(filled["cat"], random_items(25, store.dim, start=1_800_000_000.0))
        pages.refresh()
        segs.refresh()
        settle(panel)
        assert pages.rowCount() == store.pages.count_pages()
        # ... and with rows removed
        gone = [p.id for p in store.pages.list_pages(limit=7)]
        store.curation.forget("page", gone)
        pages.refresh()
        segs.refresh()
        settle(panel)
        assert pages.rowCount() == store.pages.count_pages()
        store.curation.wipe_memory()
        pages.refresh()
        segs.refresh()
        settle(panel)
        assert pages.rowCount() == 0 and segs.rowCount() == 0


def test_list_and_tree_models_pass_model_tester(qtbot, store, filled, panel_factory):
    panel = panel_factory("persona")
    persona = panel.persona
    panel.show_tab("trace")
    with model_tester(
        persona.traits,
        persona.knowledge["user"],
        persona.knowledge["assistant"],
        persona.versions,
        panel.overview.events,
        panel.trace.in_prompt,
        panel.trace.not_in_prompt,
        panel.trace.stm,
        panel.trace.items,
        panel.trace.segs,
    ):
        panel.trace.query.setText("hiking boots in the mountains")
        panel.trace.run_query()
        settle(panel)
        assert panel.trace.not_in_prompt.rowCount() > 0
        panel.trace.query.setText("my cat at the vet")
        panel.trace.run_query()
        settle(panel)
        traits = store.persona.list_traits()
        if traits:
            persona.load_item("trait", traits[0].id)
            settle(panel)
            assert persona.versions.rowCount() == len(store.persona.item_versions("trait", traits[0].id))
        persona.archived.setChecked(True)
        settle(panel)
        store.intake.add_pages(filled["spanish"], random_items(30, store.dim, start=1_800_000_000.0, seed=3))
        store.jobs.run_pending(allow_llm=False)
        panel.refresh_all(force=True)
        persona.refresh()
        settle(panel)
        store.curation.wipe_memory()
        panel.refresh_all(force=True)
        persona.refresh()
        settle(panel)
        assert persona.traits.rowCount() == 0
        panel.trace.set_data(None)


def test_heat_history_replays_events():
    p = MemoryParams()
    ev = [
        Event(1, 100.0, "segment_created", "segment", 7, "", {"page_id": 1}),
        Event(2, 100.0, "page_moved", "page", 1, "", {"segment_id": 7, "how": "created"}),
        Event(3, 200.0, "page_moved", "page", 2, "", {"segment_id": 7, "how": "joined"}),
        Event(4, 250.0, "page_moved", "page", 9, "", {"segment_id": 8, "how": "joined"}),  # another segment
        Event(5, 300.0, "page_moved", "page", 3, "", {"segment_id": 7, "how": "joined"}),
        Event(6, 400.0, "promoted", "segment", 7, "", {}),
        Event(7, 500.0, "page_moved", "page", 4, "", {"segment_id": 7, "how": "joined"}),
    ]
    assert [e.id for e in segment_events(ev, 7)] == [1, 2, 3, 5, 6, 7]
    now = 600.0
    import math

    rec = math.exp(-(now - 500.0) / p.heat.mu)
    seg = SimpleNamespace(id=7, heat=1.0 + rec, n_visit=0, l_interaction=1, last_access=500.0)
    h = heat_history(ev, seg, p, now=now)
    assert h.complete and not h.notes
    # L_interaction 1, 2, 3 then reset by the promotion, then 1 again; recency ~1 at each access
    values = [round(v, 3) for t, v in h.points if t in (100.0, 200.0, 300.0, 500.0)]
    assert values[:2] == [1.0, 2.0] and 3.0 in values and 4.0 in values
    # just before the promotion: 3 new messages + recency 100 s after the last (mu is days: ~1)
    assert h.marks and h.marks[0][2] == "promoted" and h.marks[0][1] == pytest.approx(4.0, abs=0.01)
    assert h.points[-1] == (now, seg.heat) and h.now == (now, seg.heat)
    # visits are not in the log: the history says so
    seg2 = SimpleNamespace(id=7, heat=3.0 + rec, n_visit=2, l_interaction=1, last_access=500.0)
    h2 = heat_history(ev, seg2, p, now=now)
    assert any("used in 2 replies, which the log does not hold" in n for n in h2.notes)
    assert h2.now == (now, seg2.heat) and h2.points[-1][1] == pytest.approx(1.0 + rec)  # the line: no visits


def test_heat_history_of_a_real_segment_matches_the_store(store, filled):
    p = store.params
    for seg in store.segments.list_segments(limit=50):
        h = heat_history(store.event_log.segment_events(seg.id), seg, p)
        assert h.complete, h.notes
        assert h.now[1] == pytest.approx(seg.heat)


class _FakeMain(QMainWindow):
    memory_event = Signal(object)

    def __init__(self, ctx):
        super().__init__()
        self.ctx = ctx
        self.setCentralWidget(QLabel("chat"))
        self.shown = []

    def show_message(self, conversation_id, message_id):
        self.shown.append((conversation_id, message_id))


def test_attach_creates_one_right_dock_and_listens(qtbot, ctx, store, filled):
    from ui.inspector import InspectorPanel, attach

    main = _FakeMain(ctx)
    qtbot.addWidget(main)
    main.show()
    panel = attach(main)
    try:
        assert isinstance(panel, InspectorPanel)
        assert attach(main) is panel
        docks = main.findChildren(QDockWidget)
        assert len(docks) == 1 and docks[0].widget() is panel
        assert main.dockWidgetArea(docks[0]) == Qt.DockWidgetArea.RightDockWidgetArea
        assert docks[0].isVisible()
        settle(panel)
        before = panel.overview.stats.get("pages_total")
        store.intake.add_pages(filled["cat"], random_items(3, store.dim, start=1_800_000_000.0))
        main.memory_event.emit(object())  # the main window's re-emitted scheduler event
        deadline = time.monotonic() + 10
        while panel.overview.stats.get("pages_total") == before and time.monotonic() < deadline:
            settle(panel)
        assert panel.overview.stats["pages_total"] == store.pages.count_pages()
        panel.open_message(1, 42)
        assert main.shown == [(1, 42)]
        docks[0].close()
        assert attach(main) is panel and docks[0].isVisible()
    finally:
        panel.shutdown()


def test_the_ui_thread_never_touches_the_store_and_no_sql_in_the_ui(qtbot, ctx, store, filled, monkeypatch):
    """Every store call of the inspector runs on its worker thread; ui/inspector holds no SQL."""
    import pathlib
    import re
    import threading

    from ui.inspector import InspectorWindow

    calls: list[tuple[str, str]] = []
    real_open = ctx.open_store

    class Spy:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            attr = getattr(self._inner, name)
            if callable(attr):

                def wrapped(*a, **kw):
                    calls.append((name, threading.current_thread().name))
                    return attr(*a, **kw)

                return wrapped
            if type(attr).__module__.startswith("memory_core."):  # a component: store.pages, store.curation...
                return Spy(attr)
            return attr

    monkeypatch.setattr(ctx, "open_store", lambda **kw: Spy(real_open(**kw)))
    w = InspectorWindow(ctx)
    qtbot.addWidget(w)
    w.show()
    p = w.panel
    try:
        for tab in p.TABS:
            p.show_tab(tab)
            settle(p)
        p.trace.query.setText("hiking in the Alps")
        p.trace.run_query()
        p.pages.load_page(store.pages.list_pages(limit=1)[0].id)
        p.segments.show_segment(store.segments.list_segments(limit=1)[0].id)
        p.confirm = lambda *a, **kw: True
        p.pages.forget_btn.click()
        settle(p)
    finally:
        p.shutdown()
    names = {n for n, _ in calls}
    assert {"list_pages", "count_pages", "list_segments", "stats", "events", "retrieve", "forget"} <= names
    main = threading.main_thread().name
    assert not [c for c in calls if c[1] == main], "store calls on the UI thread"
    src = "\n".join(f.read_text(encoding="utf-8") for f in pathlib.Path("ui/inspector").rglob("*.py"))
    assert "import apsw" not in src and "import sqlite3" not in src
    assert not re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\s+[\w*]", src.replace("ON DELETE", ""))
    assert not re.search(r"\b(store|st|s)\._\w", src)  # only the public API of the memory core


def test_the_real_main_window_opens_the_inspector_dock(make_window, qtbot):
    """ui.main_window.MainWindow.show_inspector() → attach(): one dock on the right, fed by backend events."""
    from ui.inspector import InspectorPanel

    win = make_window()
    win.dock.show_inspector()
    panel = win.inspector
    try:
        assert isinstance(panel, InspectorPanel)
        docks = win.findChildren(QDockWidget)
        assert [d for d in docks if d.widget() is panel]
        dock = next(d for d in docks if d.widget() is panel)
        assert win.dockWidgetArea(dock) == Qt.DockWidgetArea.RightDockWidgetArea and dock.isVisible()
        win.dock.show_inspector()
        assert win.inspector is panel and len([d for d in win.findChildren(QDockWidget) if d.widget() is panel]) == 1
        settle(panel)
        assert panel.overview.stats.get("schema_version")
    finally:
        panel.shutdown()


def test_a_block_arriving_redraws_only_rows_shown_as_placeholders(qtbot, store, filled, panel_factory):
    """A dataChanged repaints the whole viewport even for rows off screen, so a block fetched
    ahead (prefetch) must not announce itself; rows painted as placeholders must be redrawn."""
    panel = panel_factory("pages")
    pages = panel.pages.model
    pages.BLOCK, pages.PREFETCH = 4, 2  # 48 pages: twelve small blocks, the view shows a few
    pages.reload()
    settle(panel)
    u = min(b for b in range(12) if b not in pages._disp)  # the first block the view did not need
    assert u - 1 in pages._disp and u + 3 < 12
    changed = []
    pages.dataChanged.connect(lambda a, b, roles=None: changed.append((a.row(), b.row())))
    pages.paint_info(u * 4 - 1, 0)  # the last row of a loaded block: its neighbour is fetched ahead
    settle(panel)
    assert u in pages._disp and changed == []  # nothing on screen changed
    row = (u + 3) * 4
    text, *_ = pages.paint_info(row + 1, 0)  # rows of an unloaded block, painted as placeholders
    assert text == "…"
    pages.paint_info(row + 2, 1)
    settle(panel)
    assert changed == [(row + 1, row + 2)]
    assert pages.paint_info(row + 1, 0)[0] != "…"


def test_the_window_grows_to_make_room_for_the_dock_as_far_as_the_screen_allows():
    from PySide6.QtCore import QRect

    from ui.inspector.panel import DOCK_WIDTH, room_for_dock

    screen = QRect(0, 0, 1920, 1080)
    # room on the screen: the chat keeps its width, the dock gets its own
    assert room_for_dock(QRect(100, 50, 1100, 720), screen) == QRect(100, 50, 1100 + DOCK_WIDTH, 720)
    # near the right edge: moved left to stay on screen
    assert room_for_dock(QRect(1000, 50, 1100, 720), screen) == QRect(
        1920 - 1100 - DOCK_WIDTH, 50, 1100 + DOCK_WIDTH, 720
    )
    # a small screen: as wide as the screen, never wider; never narrower than it was
    assert room_for_dock(QRect(0, 0, 1100, 720), QRect(0, 0, 1440, 900)) == QRect(0, 0, 1440, 720)
    assert room_for_dock(QRect(0, 0, 1600, 720), QRect(0, 0, 1440, 900)) == QRect(0, 0, 1600, 720)
    # a second screen to the right of the first
    assert room_for_dock(QRect(2000, 0, 1100, 720), QRect(1920, 0, 1920, 1080)).right() <= 1920 + 1920 - 1


def test_a_narrow_history_chart_keeps_its_date_labels_apart(qtbot):
    from PySide6.QtCharts import QDateTimeAxis

    from ui.inspector.charts import HeatHistory, SegmentHistoryChart

    view = SegmentHistoryChart()
    qtbot.addWidget(view)
    seg = type("Seg", (), {"id": 3, "heat": 2.0})()
    params = MemoryParams()
    view.set_history(seg, HeatHistory(points=[(1_700_000_000.0, 1.0), (1_700_090_000.0, 2.0)]), params)

    def ticks() -> int:
        (axis,) = [a for a in view.chart().axes(Qt.Orientation.Horizontal) if isinstance(a, QDateTimeAxis)]
        return axis.tickCount()

    view.resize(600, 260)
    view.show()
    qtbot.waitUntil(lambda: view.width() == 600)
    assert ticks() == 5
    view.resize(240, 260)
    qtbot.waitUntil(lambda: view.width() == 240)
    assert ticks() == 2
    # a new history drawn into the narrow view is fitted too
    view.set_history(seg, HeatHistory(points=[(1_700_000_000.0, 1.0), (1_700_000_600.0, 2.0)]), params)
    assert ticks() == 2
