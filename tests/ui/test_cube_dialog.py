"""Memory cubes from the window (real window offscreen, real memory files, real embedder): Memory ▸ Import
memory… shows what a cube would add before anything is written, imports it with progress, takes it back
with Undo; Memory ▸ Memory imports… lists the imports and undoes one; a cancelled import keeps nothing; a
hostile cube is refused in one line; the inspector's Export… writes a cube of what the user chose.
Grabs of the dialogs go to /tmp/mnemo-shots/cube-*.png."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.memory_core.conftest import Clock
from tests.memory_core.cubes_support import build_memory, open_memory

SHOTS = Path("/tmp/mnemo-shots")


def shot(widget, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(SHOTS / f"cube-{name}.png"))


@pytest.fixture
def cube(tmp_path, embedder) -> tuple[Path, int]:
    s = open_memory(tmp_path / "other.db", embedder, Clock())
    try:
        build_memory(s, s.clock)  # type: ignore[arg-type]
        return s.cubes.export(tmp_path / "other-memory.mnemocube").path, s.pages.count_pages()
    finally:
        s.close()


def _import(win, qtbot, path) -> None:
    """Import a cube from the window, all the way, and close its dialog."""
    dlg = win.dialogs.import_memory(str(path))
    qtbot.waitUntil(lambda: dlg.import_button.isEnabled(), timeout=60_000)
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        dlg.start_import()
    assert dlg.job.phase == "done"
    dlg.accept()


def _pages(win) -> int:
    return win.backend.db(lambda s: s.pages.count_pages()).result(timeout=30)


def test_import_from_the_menu_then_undo(make_window, qtbot, cube, monkeypatch):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QFileDialog

    path, n = cube
    win = make_window(start=True)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(path), "")))
    win.menus.import_memory_action.trigger()  # the menu entry, as a user would
    dlg = win.cube_import_window
    qtbot.waitUntil(lambda: dlg.import_button.isEnabled(), timeout=60_000)
    assert f"pages: {n} to add" in dlg.details.toPlainText() and "Nothing has been imported yet" in dlg.status.text()
    assert _pages(win) == 0  # the plan wrote nothing
    shot(dlg, "import-plan")
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        qtbot.mouseClick(dlg.import_button, Qt.MouseButton.LeftButton)
    assert dlg.job.phase == "done" and "Imported as import 1" in dlg.status.text()
    assert dlg.undo_button.isVisible() and dlg.close_button.isVisible()
    assert _pages(win) == n
    shot(dlg, "import-done")
    qtbot.waitUntil(lambda: any(win.sidebar.list.item(i).text() == "Bread" for i in range(win.sidebar.list.count())))
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        dlg.undo_button.click()
    assert dlg.undo_report is not None and "Import 1 undone" in dlg.status.text()
    assert f"{n} pages" in dlg.details.toPlainText()
    assert _pages(win) == 0
    shot(dlg, "import-undone")
    dlg.accept()


def test_the_imports_list_undoes_one(make_window, qtbot, cube, monkeypatch):
    path, n = cube
    win = make_window(start=True)
    _import(win, qtbot, path)
    again = win.dialogs.import_memory(str(path))  # the same cube again: nothing to add
    qtbot.waitUntil(lambda: again.close_button.isVisible(), timeout=60_000)
    assert "there is nothing to import" in again.status.text() and not again.import_button.isVisible()
    shot(again, "import-nothing-new")
    again.accept()

    win.menus.memory_imports_action.trigger()
    imports = win.cube_imports_window
    qtbot.waitUntil(lambda: imports.loaded, timeout=30_000)
    assert imports.table.rowCount() == 1 and imports.table.item(0, 4).text() == "imported"
    imports.table.selectRow(0)
    assert imports.undo_button.isEnabled()
    shot(imports, "imports")
    imports.undo_selected(confirm=False)
    qtbot.waitUntil(lambda: imports.table.item(0, 4).text() == "undone", timeout=30_000)
    assert "undone" in imports.status.text() and not imports.undo_button.isEnabled()
    assert _pages(win) == 0
    imports.accept()


def test_a_cancelled_import_keeps_nothing_and_a_hostile_cube_is_refused(make_window, qtbot, cube, tmp_path):
    path, _ = cube
    win = make_window(start=True)
    dlg = win.dialogs.import_memory(str(path))
    qtbot.waitUntil(lambda: dlg.import_button.isEnabled(), timeout=60_000)
    dlg.start_import()
    dlg.cancel()  # before its first batch
    qtbot.waitUntil(lambda: dlg.job.finished, timeout=60_000)
    qtbot.waitUntil(lambda: dlg.close_button.isVisible(), timeout=10_000)
    assert dlg.job.phase in ("cancelled", "done")
    if dlg.job.phase == "cancelled":
        assert "nothing of the cube was kept" in dlg.status.text() and _pages(win) == 0
    dlg.accept()

    bad = tmp_path / "bad.mnemocube"
    bad.write_bytes(path.read_bytes()[:5000])  # cut short
    refused = win.dialogs.import_memory(str(bad))
    qtbot.waitUntil(lambda: refused.close_button.isVisible(), timeout=60_000)
    assert refused.status.text().startswith("Not imported: ") and "\n" not in refused.status.text()
    assert not refused.import_button.isVisible()
    shot(refused, "import-refused")
    refused.accept()


def test_export_a_cube_from_the_inspector(make_window, qtbot, cube, tmp_path):
    path, n = cube
    win = make_window(start=True)
    _import(win, qtbot, path)
    panel = win.dock.show_inspector()
    out = tmp_path / "persona"
    export = panel.export_cube(str(out))
    qtbot.waitUntil(lambda: export.chats_loaded, timeout=30_000)
    assert export.path.text().endswith("persona.mnemocube") and export.chat.count() == 2
    export.persona_only.setChecked(True)
    shot(export, "export")
    with qtbot.waitSignal(export.exported, timeout=60_000) as sig:
        export.start_export()
    result = sig.args[0]
    assert result.counts["pages"] == 0 and result.counts["facts"] > 0 and Path(result.path).is_file()
    assert "Exported" in export.status.text()
    export.one_chat.setChecked(True)
    export.chat.setCurrentIndex([export.chat.itemText(i) for i in range(export.chat.count())].index("Bread"))
    export.path.setText(str(tmp_path / "bread.mnemocube"))
    export.export_button.show()
    export.export_button.setEnabled(True)
    with qtbot.waitSignal(export.exported, timeout=60_000) as sig:
        export.start_export()
    assert 0 < sig.args[0].counts["pages"] < n and sig.args[0].counts["chats"] == 1
    export.reject()


def test_a_cube_imported_as_a_new_memory_space(make_window, qtbot, cube):
    """The dialog's "new memory space" box: what the cube adds goes to a space of that name (MemOS's cube
    imported as a new space), the rest of memory stays in Personal."""
    path, n = cube
    win = make_window(start=True)
    dlg = win.dialogs.import_memory(str(path))
    qtbot.waitUntil(lambda: dlg.import_button.isEnabled(), timeout=60_000)
    assert not dlg.space_name.isEnabled()
    dlg.as_space.setChecked(True)
    assert dlg.space_name.isEnabled() and dlg.space_name.text() == "other-memory"
    dlg.space_name.setText("  Their   notes ")
    shot(dlg, "import-as-space")
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        dlg.start_import()
    assert dlg.job.phase == "done" and "memory space “Their notes”" in dlg.status.text()
    spaces = win.backend.db(lambda s: {i.name: i.pages for i in s.spaces.list()}).result(timeout=30)
    assert spaces.get("Their notes") == n and spaces.get("Personal", 0) == 0
    dlg.accept()
