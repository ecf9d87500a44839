"""The inspector's Topics tab says which titles the chat model wrote (decision 0026), and Settings reaches the
choice of who writes them."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.memory_core.conftest import mix
from tests.memory_core.test_titles import POTTERY
from tests.ui.test_inspector_fixtures import ctx, load_all, panel_factory, settle  # noqa: F401  (fixtures)


@pytest.fixture
def store(ctx):
    """The fixtures' store with one page of recent chat per conversation (the least STM there is)."""
    ctx.settings.memory["stm_capacity"] = 1
    s = ctx.open_store()
    yield s
    s.close()


def _two_topics(store):
    """A pottery topic titled by a (scripted) model and a kayak topic with its keywords' title."""
    store.promotion.llm, store.promotion.llm_model_id, store.titles.model_writes = (
        (lambda m, s: {"title": "Learning pottery"}),
        "big-7b.gguf",
        True,
    )
    cid = store.conversations.create_conversation()
    for i, (u, a) in enumerate(POTTERY[:4]):  # the last stays in recent chat
        store.intake.add_page(cid, u, a, embedding=mix(384, 0, 10 + i, 0.9))
    cid = store.conversations.create_conversation()
    for i in range(4):
        store.intake.add_page(cid, f"kayak river paddle trip {i}", "fun", embedding=mix(384, 1, 20 + i, 0.9))
    store.jobs.run_pending()
    by = {s.title_by: s for s in store.segments.list_segments(tier="mtm", limit=100) if s.page_count >= 2}
    assert by["big-7b.gguf"].title == "Learning pottery" and "" in by
    return by["big-7b.gguf"], by[""]


def test_the_topics_tab_marks_the_models_titles(qtbot, store, panel_factory):
    titled, plain = _two_topics(store)
    panel = panel_factory("segments")
    settle(panel)
    sv, m = panel.segments, panel.segments.model
    rows = {rec.id: i for i, rec in enumerate(load_all(m, panel))}
    col = m.column_index("title")
    cell = m.index(rows[titled.id], col)
    assert cell.data(Qt.ItemDataRole.DisplayRole) == "Learning pottery"
    assert "Title written by the chat model (big-7b.gguf)" in cell.data(Qt.ItemDataRole.ToolTipRole)
    assert cell.data(Qt.ItemDataRole.ForegroundRole) is not None  # in colour
    other = m.index(rows[plain.id], col)
    assert other.data(Qt.ItemDataRole.DisplayRole) == plain.title
    assert "made of its keywords" in other.data(Qt.ItemDataRole.ToolTipRole)
    assert other.data(Qt.ItemDataRole.ForegroundRole) is None
    sv.show_segment(titled.id)
    settle(panel)
    assert "Learning pottery" in sv.detail.toPlainText() and "(title by the chat model)" in sv.detail.toPlainText()
    sv.show_segment(plain.id)
    settle(panel)
    assert "title by the chat model" not in sv.detail.toPlainText()


def test_settings_chooses_who_writes_topic_titles(qtbot, ctx):
    from ui.settings_dialog import SettingsDialog

    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    assert dlg.titles_combo.currentData() == "auto"
    dlg.titles_combo.setCurrentIndex(dlg.titles_combo.findData("off"))
    assert "topic_titles" in dlg.apply()
    assert ctx.settings.topic_titles == "off"
    ctx.save()
    from app.context import AppContext

    assert AppContext.create().settings.topic_titles == "off"
    dlg2 = SettingsDialog(ctx)
    qtbot.addWidget(dlg2)
    assert dlg2.titles_combo.currentData() == "off"
