"""The inspector's Space filter and Space column (both hidden while the memory has one space) on the pages
view and on the persona's facts and traits: real store with two spaces, real panel offscreen. Grabs are
saved as /tmp/spaces/inspector-filter.png and /tmp/spaces/inspector-persona-filter.png."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

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
    ids = [p.id for p in store.pages.list_pages(limit=10_000)]
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
    assert sorted(p.id for p in shown) == sorted(p.id for p in store.pages.list_pages(space_id=work, limit=10_000))
    assert m.rowCount() == store.pages.count_pages(space_id=work) == len(ids) // 3
    assert {m.index(r, m.column_index("space")).data() for r in range(m.rowCount())} == {"Work"}  # by name
    assert not view.table.isColumnHidden(m.column_index("space"))
    view.space.setCurrentIndex(0)  # All spaces
    qtbot.waitUntil(lambda: "space_id" not in m.filters, timeout=5000)
    settle(panel)
    assert m.rowCount() == store.pages.count_pages()
    view.space.setCurrentIndex(i)
    settle(panel)
    Path("/tmp/spaces").mkdir(parents=True, exist_ok=True)
    assert view.grab().save("/tmp/spaces/inspector-filter.png")


def test_pages_space_column_hidden_with_one_space(qtbot, store, filled, panel_factory):
    panel = panel_factory("pages")
    view, m = panel.pages, panel.pages.model
    settle(panel)
    qtbot.waitUntil(lambda: view.space.count() == 2, timeout=10_000)  # "All spaces" and Personal
    assert not view.space.isVisible() and view.table.isColumnHidden(m.column_index("space"))
    assert m.index(0, m.column_index("space")).data() == "Personal"


def _facts(view) -> list[tuple[str, str]]:
    m = view.table_model()
    return [(m.record(r).text, m.index(r, m.column_index("space")).data()) for r in range(m.rowCount())]


def _traits(pv) -> list[tuple[str, str]]:
    return sorted(
        (t.value, pv.traits.index_of_key(("trait", t.id), pv.traits.SPACE).data()) for t in pv.traits.traits()
    )


def test_persona_facts_and_traits_filter_by_space(qtbot, store, panel_factory):
    store.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    store.persona.add_knowledge("assistant", "I will answer in French.")
    store.persona.add_trait("likes", "jazz")
    panel = panel_factory("persona")
    pv = panel.persona
    settle(panel)
    user = pv.kviews["user"]
    qtbot.waitUntil(lambda: user.table_model().rowCount() == 1, timeout=10_000)
    assert not pv.space.isVisible()  # one space: no filter, no Space columns
    assert user.isColumnHidden(user.table_model().column_index("space"))
    assert pv.tree.isColumnHidden(pv.traits.SPACE)

    work = store.spaces.create("Work")
    store.persona.add_knowledge("user", "The user's report is due on Friday.", space_id=work)
    store.persona.add_trait("occupation", "engineer", space_id=work)
    pv.refresh()
    settle(panel)
    qtbot.waitUntil(lambda: pv.space.count() == 3 and user.table_model().rowCount() == 2, timeout=10_000)
    assert pv.space.isVisible() and not user.isColumnHidden(user.table_model().column_index("space"))
    assert not pv.tree.isColumnHidden(pv.traits.SPACE)
    assert pv.traits.headerData(pv.traits.SPACE, Qt.Orientation.Horizontal) == "Space"
    assert sorted(_facts(user)) == [
        ("The user's dog is called Biscuit.", "Personal"),
        ("The user's report is due on Friday.", "Work"),
    ]
    assert _traits(pv) == [("engineer", "Work"), ("jazz", "Personal")]

    pv.space.setCurrentIndex(pv.space.findText("Work"))
    qtbot.waitUntil(lambda: user.table_model().rowCount() == 1, timeout=10_000)
    settle(panel)
    assert _facts(user) == [("The user's report is due on Friday.", "Work")]
    assert pv.kviews["assistant"].table_model().rowCount() == 0  # the assistant's fact is in Personal
    assert _traits(pv) == [("engineer", "Work")]
    user.selectRow(0)
    qtbot.waitUntil(lambda: "space “Work”" in pv.detail.toPlainText(), timeout=10_000)  # the detail names it
    Path("/tmp/spaces").mkdir(parents=True, exist_ok=True)
    assert pv.grab().save("/tmp/spaces/inspector-persona-filter.png")

    # the filtered space renamed, then merged away: the filter follows, then falls back to every space
    store.spaces.rename(work, "Office")
    pv.refresh()
    qtbot.waitUntil(lambda: pv.space.currentText() == "Office", timeout=10_000)
    settle(panel)
    assert _facts(user) == [("The user's report is due on Friday.", "Office")]
    store.spaces.merge(work, 1)
    pv.refresh()
    qtbot.waitUntil(lambda: pv.space.count() == 2 and user.table_model().rowCount() == 2, timeout=10_000)
    settle(panel)
    assert pv.space.currentData() is None and not pv.space.isVisible()
