"""The inspector's Adapters view over a real data folder: rows (the chat's choice, the model each is
for, one that does not fit), turning one on in a chat and in new chats, Add and Remove, and teaching
the model (a tiny distill on its own worker, with progress; Cancel keeps nothing) where the extra is."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.parametric import adapters as ad
from app.parametric import distill
from tests.adapter_files import bundled_adapter, wrong_shape_adapter
from tests.ui import test_inspector_fixtures as fixtures

ctx, store, panel_factory = fixtures.ctx, fixtures.store, fixtures.panel_factory  # the inspector tests' fixtures


def _open(qtbot, panel, cid):
    view = panel.adapters
    view.current_chat = lambda: cid
    panel.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.rows is not None)
    return view


def test_the_view_lists_adapters_and_keeps_the_chats_choice(qtbot, ctx, store, panel_factory, tmp_path):
    cid = store.conversations.create_conversation("Trip planning")
    reg = ad.AdapterRegistry(ctx.paths.data_dir)
    reg.add(bundled_adapter(tmp_path / "style.gguf"), scale=0.5)
    reg.add(wrong_shape_adapter(tmp_path / "wide.gguf"))
    panel = panel_factory()
    view = _open(qtbot, panel, cid)
    qtbot.waitUntil(lambda: view.table.rowCount() == 2)
    cells = [[view.table.item(r, c).text() for c in (1, 2, 4)] for r in range(2)]
    assert cells == [["style", "SmolLM2 135M", "0.5"], ["wide", "SmolLM2 360M", "1"]]
    assert "1 not for the current model" in view.headline.text()
    wide_box = view.table.item(1, 0)
    assert not wide_box.flags() & Qt.ItemFlag.ItemIsEnabled and "made for SmolLM2 360M" in wide_box.toolTip()

    view.table.item(0, 0).setCheckState(Qt.CheckState.Checked)  # on in this chat
    qtbot.waitUntil(lambda: [a.name for a in reg.chosen(cid)[0]] == ["style"])
    qtbot.waitUntil(lambda: view.rows is not None and view.rows[0].in_chat)
    view.table.item(0, 6).setCheckState(Qt.CheckState.Checked)  # on in new chats
    qtbot.waitUntil(lambda: reg.get("style").new_chats)
    assert ad.AdapterRegistry(ctx.paths.data_dir).chosen(cid) == ([reg.get("style")], True)  # kept

    panel.confirm = lambda *a, **k: True
    qtbot.waitUntil(lambda: view.table.rowCount() == 2)
    view.table.selectRow(1)
    view.remove_btn.click()
    qtbot.waitUntil(lambda: view.table.rowCount() == 1)
    assert [r.name for r in reg.records()] == ["style"]


def test_add_refuses_a_file_that_is_no_adapter(qtbot, ctx, store, panel_factory, tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_bytes(b"not a gguf at all")
    panel = panel_factory()
    view = _open(qtbot, panel, None)
    errors = []
    panel.status_error = errors.append
    view.add_file(str(bad))
    qtbot.waitUntil(lambda: bool(errors))
    assert errors[0].startswith("Not added: notes.gguf: ") and "\n" not in errors[0]
    view.add_file(str(bundled_adapter(tmp_path / "ok.gguf")))
    qtbot.waitUntil(lambda: view.table.rowCount() == 1)


@pytest.mark.skipif(bool(distill.missing_packages()), reason='needs the [train] extra: pip install "mnemo[train]"')
def test_teaching_runs_in_the_background_and_cancel_keeps_nothing(qtbot, ctx, store, panel_factory):
    store.persona.add_knowledge("user", "My sister's name is Clara.")
    panel = panel_factory()
    view = _open(qtbot, panel, None)
    said = []
    panel.status = lambda text, error=False: said.append(text)
    view.teach(config=distill.DistillConfig(steps=400, batch=2, rank=2, threads=2))
    assert view.teaching and view.cancel_btn.isVisibleTo(view) and not view.teach_btn.isEnabled()
    qtbot.waitUntil(lambda: view.progress.maximum() == 400 and view.progress.value() >= 1, timeout=120_000)
    view.cancel_btn.click()
    qtbot.waitUntil(lambda: not view.teaching, timeout=60_000)
    assert "Teaching stopped; nothing was kept" in said and view.teach_btn.isEnabled()
    assert ad.AdapterRegistry(ctx.paths.data_dir).records() == []


def test_settings_list_the_adapters(qtbot, ctx, tmp_path):
    from ui.settings_dialog import SettingsDialog

    reg = ad.AdapterRegistry(ctx.paths.data_dir)
    reg.add(bundled_adapter(tmp_path / "style.gguf"), scale=0.5, new_chats=True)
    dlg = SettingsDialog(ctx)
    qtbot.addWidget(dlg)
    table = dlg.adapters_table
    assert table.rowCount() == 1
    assert [table.item(0, c).text() for c in range(4)] == ["style (new chats)", "SmolLM2 135M", "166.6 KiB", "0.5"]
