"""The inspector's space filter on the pages view (hidden while the memory has one space) and its Space
column: real store with two spaces, real panel offscreen. A grab is saved as /tmp/spaces/inspector-filter.png."""

from __future__ import annotations

from pathlib import Path

from tests.ui.test_inspector_fixtures import (  # noqa: F401  (fixtures)
    ctx,
    fill_store,
    filled,
    load_all,
    panel_factory,
    settle,
    store,
)


def test_pages_filter_by_space(qtbot, store, filled, panel_factory):
    work = store.spaces.create("Work")
    ids = [p.id for p in store.list_pages(limit=10_000)]
    store.spaces.move_pages(ids[: len(ids) // 3], work)
    panel = panel_factory("pages")
    view, m = panel.pages, panel.pages.model
    settle(panel)
    qtbot.waitUntil(lambda: view.space.count() == 3, timeout=10_000)
    assert view.space.isVisible()
    i = view.space.findText("Work")
    view.space.setCurrentIndex(i)
    qtbot.waitUntil(lambda: m.filters.get("space_id") == work, timeout=5000)
    settle(panel)
    shown = load_all(m, panel)
    assert sorted(p.id for p in shown) == sorted(p.id for p in store.list_pages(space_id=work, limit=10_000))
    assert m.rowCount() == store.count_pages(space_id=work) == len(ids) // 3
    assert {m.index(r, m.column_index("space")).data() for r in range(m.rowCount())} == {str(work)}
    view.space.setCurrentIndex(0)  # All spaces
    qtbot.waitUntil(lambda: "space_id" not in m.filters, timeout=5000)
    settle(panel)
    assert m.rowCount() == store.count_pages()
    view.space.setCurrentIndex(i)
    settle(panel)
    Path("/tmp/spaces").mkdir(parents=True, exist_ok=True)
    assert view.grab().save("/tmp/spaces/inspector-filter.png")
