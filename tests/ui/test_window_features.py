"""Sidebar, settings, model-load errors, themes, accessibility, big pastes, inspector hook."""

from __future__ import annotations

import sys
import time
import types

import pytest
from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QAbstractButton, QApplication, QInputDialog, QMessageBox, QPlainTextEdit


def test_settings_survive_a_restart_of_the_window(make_window, qtbot, mnemo_dirs):
    from app.context import AppContext
    from ui.settings_dialog import SettingsDialog

    win = make_window(start=False)
    win.resize(760, 520)
    dlg = SettingsDialog(win.ctx, win)
    qtbot.addWidget(dlg)
    dlg.enter_check.setChecked(False)
    dlg.temp_spin.setValue(0.35)
    dlg.min_p_spin.setValue(0.2)
    dlg.repeat_spin.setValue(1.0)
    dlg.self_repeat_spin.setValue(1.5)
    dlg.max_tokens_spin.setValue(333)
    dlg.server_radio.setChecked(True)
    dlg.url_edit.setText("http://127.0.0.1:9999/v1")
    dlg.param_edits["stm_capacity"].setValue(7)
    dlg.param_edits["tau"].setValue(3.5)
    dlg.theme_combo.setCurrentIndex(dlg.theme_combo.findData("dark"))
    changed = win.dialogs.apply_settings(dlg)
    assert {"chat", "memory", "ui"} <= changed
    assert win.composer.edit.enter_sends is False
    win.close()

    ctx = AppContext.create()  # a new process would read the same file
    s = ctx.settings
    assert s.ui.enter_sends is False and s.ui.theme == "dark"
    assert s.chat.temperature == pytest.approx(0.35) and s.chat.max_tokens == 333
    assert s.chat.min_p == pytest.approx(0.2) and s.chat.repeat_penalty == pytest.approx(1.0)
    from app.runtime.backends import build_chat_model  # the llama backend gets them (loaded for real)

    s.chat.backend = "llama"
    model = build_chat_model(s.chat)
    assert (model.config.min_p, model.config.repeat_penalty, model.config.temperature) == (0.2, 1.0, 0.35)
    assert s.chat.self_repeat_penalty == pytest.approx(1.5) and model.config.self_repeat_penalty == pytest.approx(1.5)
    model.close()
    s.chat.backend = "openai"
    assert s.chat.backend == "openai" and s.chat.server_url == "http://127.0.0.1:9999/v1"
    assert s.memory == {"stm_capacity": 7, "tau": 3.5}
    assert ctx.memory_params().tiers.stm_capacity == 7
    win2 = make_window(ctx=ctx, start=False)
    assert win2.composer.edit.enter_sends is False
    assert "Ctrl+Enter" in win2.composer.hint.text()
    assert (win2.width(), win2.height()) == (760, 520)  # geometry restored
    assert win2.palette().color(QPalette.ColorRole.Window).lightness() < 80  # dark theme
    dlg2 = SettingsDialog(ctx, win2)
    qtbot.addWidget(dlg2)
    assert dlg2.temp_spin.value() == pytest.approx(0.35) and dlg2.min_p_spin.value() == pytest.approx(0.2)
    assert dlg2.param_edits["stm_capacity"].value() == 7
    assert dlg2.server_radio.isChecked() and not dlg2.gguf_edit.isEnabled()


def test_settings_dialog_has_every_required_field(make_window, qtbot, monkeypatch):
    from ui.settings_dialog import SettingsDialog

    win = make_window(start=False)
    dlg = SettingsDialog(win.ctx, win)
    qtbot.addWidget(dlg)
    for name in ("stm_capacity", "mtm_capacity", "theta", "alpha", "beta", "gamma", "mu", "tau"):
        assert name in dlg.param_edits
    for w in (
        dlg.gguf_edit,
        dlg.url_edit,
        dlg.server_model_edit,
        dlg.key_edit,
        dlg.ctx_spin,
        dlg.threads_spin,
        dlg.gpu_spin,
        dlg.temp_spin,
        dlg.top_p_spin,
        dlg.min_p_spin,
        dlg.repeat_spin,
        dlg.self_repeat_spin,
        dlg.max_tokens_spin,
        dlg.onnx_edit,
        dlg.tokenizer_edit,
    ):
        assert w is not None
    opened = []
    monkeypatch.setattr("ui.settings_dialog.QDesktopServices.openUrl", lambda url: opened.append(url) or True)
    qtbot.mouseClick(dlg.open_data_button, Qt.MouseButton.LeftButton)
    assert opened and opened[0].toLocalFile() == str(win.ctx.paths.data_dir)
    # Nothing changed: nothing reported.
    assert dlg.apply() == set()


def test_sidebar_rename_search_and_delete(make_window, chat, qtbot, monkeypatch):
    win = make_window(max_tokens=8)
    a = chat.send(win, "Planning a trip to Lisbon.").result
    win.new_chat()
    b = chat.send(win, "Recipe for lentil soup.").result
    chat.wait_db(win)
    # Rename (F2 on the current chat) through the dialog.
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("Soup", True)))
    win.menus.rename_action.trigger()
    chat.wait_db(win)
    assert win.title_label.text() == "Soup"
    assert win.sidebar.title_of(b.conversation_id) == "Soup"
    # Search finds message text, Ctrl+K focuses the box.
    win.activateWindow()
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    assert win.sidebar.search.hasFocus()
    qtbot.keyClicks(win.sidebar.search, "Lisbon")
    qtbot.waitUntil(lambda: win.sidebar.ids() == [a.conversation_id], timeout=10_000)
    win.sidebar.search.clear()
    qtbot.waitUntil(lambda: len(win.sidebar.ids()) == 2, timeout=10_000)
    # Delete asks first; "Cancel" keeps it.
    asked = []
    monkeypatch.setattr(win.chats, "ask_delete", lambda name, held: asked.append(name) or (False, False))
    win.chats.delete_conversation(a.conversation_id)
    chat.wait_db(win)
    assert len(win.sidebar.ids()) == 2 and asked
    monkeypatch.setattr(win.chats, "ask_delete", lambda name, held: (True, False))
    win.chats.delete_conversation(b.conversation_id)
    qtbot.waitUntil(lambda: win.sidebar.ids() == [a.conversation_id], timeout=10_000)
    assert win.current_id is None and win.chat_view.is_empty  # the open chat was deleted


def test_a_long_chat_title_ends_with_an_ellipsis_and_keeps_the_header_buttons(make_window, qtbot):
    from PySide6.QtGui import QTextDocument

    from ui import plain

    win = make_window(start=False)
    title = "Hi! My name is Dana, I keep bees on my roof in Lyon and my sister Ines is visiting next week"
    win.current_title = title
    win.update_header()
    win.resize(900, 700)
    qtbot.waitUntil(lambda: win.title_label.text() != title, timeout=5000)
    shown = win.title_label.text()
    assert shown.endswith("…") and title.startswith(shown[:-1])  # cut, not clipped mid-letter
    assert win.title_label.fontMetrics().horizontalAdvance(shown) <= win.title_label.contentsRect().width()
    assert win.title_label.toolTip() == plain.tip(title) and win.title_label.accessibleName() == title
    for button in (win.incognito_button, win.memory_button, win.settings_button):
        assert button.isVisible() and button.width() >= button.sizeHint().width()
    win.current_title = "Soup"
    win.update_header()
    assert win.title_label.text() == "Soup" and win.title_label.toolTip() == ""
    # markup is text: labels and tooltips guess rich text, and "Use the <div> element" lost its tag
    win.current_title = title = "Use the <div> element & <b>not</b> <span> for blocks, says our team's style guide"
    win.update_header()
    qtbot.waitUntil(lambda: win.title_label.text() != title, timeout=5000)
    assert win.title_label.textFormat() == Qt.TextFormat.PlainText and title.startswith(win.title_label.text()[:-1])
    tip = QTextDocument()
    tip.setHtml(win.title_label.toolTip())
    assert tip.toPlainText() == title  # the whole title, tags and all
    w = win.chat_view.add_message("assistant", "x")
    w.set_final("failed", error="server error 502: <html><body>Bad gateway</body></html>")
    assert w.error_label.textFormat() == Qt.TextFormat.PlainText and "<html>" in w.error_label.text()


def test_delete_confirmation_is_a_real_question(make_window, qtbot, monkeypatch):
    from app.operations.chat_memory import ChatMemory
    from memory_core import ConversationMemory

    win = make_window(start=False)
    # the Delete dialog offers to forget what memory holds from the chat, unticked by default
    boxes = []

    def answer(box, button, tick):
        boxes.append((box.text(), box.informativeText(), box.checkBox() and box.checkBox().text()))
        assert box.textFormat() == Qt.TextFormat.PlainText  # a chat named "<b>…" is text
        assert box.button(QMessageBox.StandardButton.Yes).text() in ("Delete", "Forget")
        assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
        if box.checkBox() is not None:
            box.checkBox().setChecked(tick)
        return button

    held = ChatMemory(7, ConversationMemory(7, [1, 2, 3], 1, [("trait", 4)]))
    monkeypatch.setattr(QMessageBox, "exec", lambda box: answer(box, QMessageBox.StandardButton.Yes, True))
    assert win.chats.ask_delete("Soup", held) == (True, True)
    assert boxes[-1][0] == "Delete “Soup” and its messages?"
    assert boxes[-1][2] == (
        "Also forget what Mnemo learned from it: 3 pages (1 pinned) and 1 persona item drawn only from them"
    )
    monkeypatch.setattr(QMessageBox, "exec", lambda box: answer(box, QMessageBox.StandardButton.Yes, False))
    assert win.chats.ask_delete("Soup", held) == (True, False)
    monkeypatch.setattr(QMessageBox, "exec", lambda box: answer(box, QMessageBox.StandardButton.Cancel, True))
    assert win.chats.ask_delete("Soup", held) == (False, False)
    monkeypatch.setattr(QMessageBox, "exec", lambda box: answer(box, QMessageBox.StandardButton.Yes, True))
    assert win.chats.ask_delete("Soup", ChatMemory(7, ConversationMemory(7, [], 0, []))) == (True, False)
    assert boxes[-1][1] == "Memory holds nothing from it." and boxes[-1][2] is None
    assert win.chats.ask_forget("Soup", held) is True
    assert boxes[-1][0] == "Forget what Mnemo learned from “Soup”?" and boxes[-1][2] is None
    assert boxes[-1][1].startswith("This forgets 3 pages (1 pinned) and 1 persona item drawn only from them, for good.")
    monkeypatch.setattr(QMessageBox, "exec", lambda box: answer(box, QMessageBox.StandardButton.Cancel, False))
    assert win.chats.ask_forget("Soup", held) is False


def test_forget_what_a_chat_taught_then_delete_another_with_its_memory(make_window, chat, qtbot, monkeypatch):
    win = make_window(max_tokens=8)
    a = chat.send(win, "Remember that my locker code is 4312.").result
    assert a.stats["remembered"]["outcome"] == "added"
    chat.send(win, "The hotel in Krakow was noisy last night.")
    win.new_chat()
    b = chat.send(win, "I keep bees on my roof in Lyon.").result
    win.new_chat()
    c = chat.send(win, "Recipe for lentil soup with cumin.").result
    assert win.backend.scheduler.wait_idle(timeout=60)

    def ask(fn):
        return win.backend.db(fn).result(timeout=30)

    assert ask(lambda s: s.pages.count_pages(conversation_id=a.conversation_id)) == 2
    # "Show what Mnemo remembers from it": the inspector's pages of that chat only
    win.sidebar.memoryRequested.emit(a.conversation_id)
    panel = win.inspector
    pages = panel.pages
    qtbot.waitUntil(
        lambda: panel.tabs.currentWidget() is pages and pages.model.ready and pages.model.rowCount() == 2,
        timeout=30_000,
    )
    assert {pages.model.record(r).conversation_id for r in range(2)} == {a.conversation_id}
    assert pages.chat_chip.isVisible() and pages.chat_chip.text().startswith("Chat: Remember that my locker")
    pages.chat_chip.click()  # the chip clears the filter
    qtbot.waitUntil(lambda: pages.model.ready and pages.model.rowCount() == 4, timeout=30_000)
    assert not pages.chat_chip.isVisible()
    win.sidebar.memoryRequested.emit(a.conversation_id)
    qtbot.waitUntil(lambda: pages.model.ready and pages.model.rowCount() == 2, timeout=30_000)
    # from the chat list's menu: the question names what goes; "Cancel" keeps it
    asked = []
    monkeypatch.setattr(win.chats, "ask_forget", lambda name, held: asked.append(held.describe()) or False)
    win.sidebar.forgetRequested.emit(a.conversation_id)
    chat.wait_db(win)
    assert asked == ["2 pages and 1 fact it asked to remember"]
    assert ask(lambda s: s.pages.count_pages(conversation_id=a.conversation_id)) == 2
    monkeypatch.setattr(win.chats, "ask_forget", lambda name, held: True)
    win.sidebar.forgetRequested.emit(a.conversation_id)
    qtbot.waitUntil(lambda: "Forgot what Mnemo learned" in win.statusBar().currentMessage(), timeout=30_000)
    assert ask(lambda s: s.pages.count_pages(conversation_id=a.conversation_id)) == 0
    assert ask(lambda s: s.persona.get_knowledge(a.stats["remembered"]["id"])) is None
    assert ask(lambda s: len(s.conversations.all_messages(a.conversation_id))) == 4  # the chat stays
    assert a.conversation_id in win.sidebar.ids()
    qtbot.waitUntil(lambda: pages.model.ready and pages.model.rowCount() == 0, timeout=30_000)  # the inspector follows
    # nothing left: saying so instead of asking
    told = []
    monkeypatch.setattr(win.chats, "tell", lambda title, text: told.append(text))
    win.sidebar.forgetRequested.emit(a.conversation_id)
    chat.wait_db(win)
    assert told and "Memory holds nothing from" in told[0]
    # Delete with "also forget" ticked (the chat on screen): chat and memory go; the others stay
    monkeypatch.setattr(win.chats, "ask_delete", lambda name, held: (True, True))
    win.menus.delete_action.trigger()
    qtbot.waitUntil(lambda: c.conversation_id not in win.sidebar.ids(), timeout=30_000)
    chat.wait_db(win)
    assert "forgotten: 1 page" in win.statusBar().currentMessage()
    assert ask(lambda s: s.pages.count_pages()) == 1
    assert ask(lambda s: s.pages.list_pages()[0].conversation_id) == b.conversation_id
    assert ask(lambda s: s.check_integrity()) == []
    # deleted without forgetting: Memory ▸ Memory from deleted chats finds what it taught
    monkeypatch.setattr(win.chats, "ask_delete", lambda name, held: (True, False))
    win.chats.delete_conversation(b.conversation_id)
    qtbot.waitUntil(lambda: b.conversation_id not in win.sidebar.ids(), timeout=30_000)
    win.menus.deleted_memory_action.trigger()
    qtbot.waitUntil(lambda: pages.model.ready and pages.model.rowCount() == 1, timeout=30_000)
    assert pages.model.record(0).conversation_id is None and "bees" in pages.model.record(0).user_text
    assert pages.chat_chip.isVisible() and pages.chat_chip.text().startswith("From deleted chats")


def test_broken_model_file_shows_an_error_and_the_app_stays_usable(make_window, chat, qtbot, tmp_path):
    from app.context import AppContext

    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"this is not a gguf file" * 100)
    ctx = AppContext.create()
    ctx.settings.chat.gguf_path = str(bad)
    ctx.settings.chat.max_tokens = 8
    ctx.save()
    win = make_window(ctx=ctx, share_model=False)
    assert win.backend.model_error and "broken.gguf" in win.backend.model_error
    qtbot.waitUntil(
        lambda: getattr(win.status, "model_error_box", None) is not None and win.status.model_error_box.isVisible(),
        timeout=10_000,
    )
    assert "broken.gguf" in win.status.model_error_box.informativeText()
    assert win.status.model_label.text() == "Model: not loaded"
    assert not win.status.load_progress.isVisible()
    win.status.model_error_box.close()
    # Sending fails inline: the message is kept in the chat, with a failed reply that can be regenerated.
    turn = chat.send(win, "Are you there?")
    assert turn.error and "broken.gguf" in turn.error
    last = win.chat_view.last()
    assert last.status == "failed" and last.error_label.isVisible()
    assert last.message_id is not None and last.message_id == turn.failed_reply_id
    assert win.composer.text() == ""  # stored: not put back, so it is not sent twice
    # Fix the setting: the model reloads in the background, and the failed reply is regenerated.
    ctx.settings.chat.gguf_path = ""
    with qtbot.waitSignal(win.backend.modelLoaded, timeout=120_000):
        win.dialogs.settings_changed({"chat"})
    assert "SmolLM2" in win.status.model_label.text()
    with qtbot.waitSignal(win.backend.turnFinished, timeout=120_000) as done:
        win.turns.regenerate(turn.failed_reply_id)
    assert done.args[0].result.status == "complete"
    assert done.args[0].result.user_message_id == turn.user_message_id


def test_reload_after_a_model_setting_changes(make_window, chat, qtbot):
    win = make_window(max_tokens=8, share_model=False)
    first = win.backend.scheduler.model
    assert first is not None
    win.ctx.settings.chat.n_ctx = 1024
    with qtbot.waitSignal(win.backend.modelLoaded, timeout=120_000):
        win.dialogs.settings_changed({"chat"})
    assert win.backend.scheduler.model is not first
    assert win.backend.scheduler.model.n_ctx == 1024
    assert chat.send(win, "Hi.").result.status == "complete"


def test_a_one_megabyte_paste_does_not_freeze_the_ui(make_window, chat, qtbot):
    win = make_window(max_tokens=4)
    big = "lorem ipsum dolor sit amet " * 40_000  # ~1 MB, one paragraph (the worst case for layout)
    mime = QMimeData()
    mime.setText(big)
    t0 = time.perf_counter()
    win.composer.edit.insertFromMimeData(mime)
    QApplication.processEvents()
    assert time.perf_counter() - t0 < 0.25
    assert win.composer.attachment == big and win.composer.chip.isVisible()
    assert win.composer.text() == big
    t0 = time.perf_counter()
    w = win.chat_view.add_message("user", big)
    QApplication.processEvents()
    assert time.perf_counter() - t0 < 0.5
    assert w.elide_row.isVisible() and len(w.shown_text()) < 10_000
    w.show_all_button.click()
    assert win.chat_view.show_all_dialog.findChild(QPlainTextEdit).toPlainText() == big
    win.chat_view.show_all_dialog.close()
    win.chat_view.clear()
    # Sending it works (the agent truncates it for the prompt) and the event loop keeps turning.
    gaps = []
    last = [time.perf_counter()]

    def tick():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    from PySide6.QtCore import QTimer

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(tick)
    timer.start()
    with qtbot.waitSignal(win.backend.turnFinished, timeout=180_000):
        win.turns.send()
    timer.stop()
    turn = win.backend.turn
    assert turn.result is not None and turn.result.status in ("complete", "stopped"), turn.error
    stored = win.backend.db(lambda s: s.conversations.get_message(turn.result.user_message_id)).result(timeout=60)
    assert stored.content == big
    assert max(gaps) < 0.5, f"the UI stalled {max(gaps) * 1000:.0f} ms"


def test_icon_only_buttons_have_accessible_names(make_window, chat):
    win = make_window(max_tokens=8)
    chat.send(win, "Hello.")
    missing = [b for b in win.findChildren(QAbstractButton) if not b.text().strip() and not b.accessibleName().strip()]
    assert missing == []
    assert win.memory_button.accessibleName() == "Memory inspector"
    assert win.settings_button.accessibleName() == "Settings"
    assert win.composer.send_button.accessibleName() == "Send"


def test_theme_follows_the_override_and_the_system(make_window):
    from ui import theme

    win = make_window(start=False)
    win.menus.set_theme("dark")
    assert theme.colors().name == "dark"
    assert win.palette().color(QPalette.ColorRole.Window).lightness() < 80
    assert win.ctx.settings.ui.theme == "dark" and win.menus.theme_actions["dark"].isChecked()
    win.menus.set_theme("light")
    assert win.palette().color(QPalette.ColorRole.Window).lightness() > 200
    win.menus.set_theme("system")
    expected = "dark" if theme.system_is_dark() else "light"
    assert theme.colors().name == expected


def test_markdown_and_code_blocks_render(make_window):
    from ui import markdown

    win = make_window(start=False)
    w = win.chat_view.add_message("assistant", "Some **bold** text and `code`.\n\n```python\nprint('hi')\n```\n")
    doc = w.body.document()
    assert "bold" in doc.toPlainText() and "print('hi')" in doc.toPlainText()
    assert "**" not in doc.toPlainText()
    shaded = [b for b in _blocks(doc) if b.blockFormat().background().color().name() == markdown.theme.colors().code_bg]
    assert shaded and "print('hi')" in shaded[0].text()


def _blocks(doc):
    b = doc.begin()
    while b.isValid():
        yield b
        b = b.next()


def test_shortcuts_help_and_memory_notice_open_the_inspector(make_window, qtbot, monkeypatch):
    win = make_window(start=False)
    win.dialogs.show_shortcuts()
    table = win.dialogs.shortcuts_dialog.table
    keys = {table.item(r, 0).text() for r in range(table.rowCount())}
    assert {"Ctrl+N", "Ctrl+K", "Esc", "F1"} <= keys
    win.dialogs.shortcuts_dialog.close()
    # Without ui.inspector.attach: a message instead of an error.
    shown = []
    monkeypatch.setattr(QMessageBox, "information", staticmethod(lambda *a, **k: shown.append(a[1])))
    monkeypatch.setitem(sys.modules, "ui.inspector", types.ModuleType("ui.inspector"))
    win.dock.show_inspector()
    assert shown == ["Memory inspector"]
    # With it: attach(main_window) is called, also from the "memory updated" notice.
    attached = []
    fake = types.ModuleType("ui.inspector")
    fake.attach = lambda mw: attached.append(mw)
    monkeypatch.setitem(sys.modules, "ui.inspector", fake)
    win.status.memory_event(types.SimpleNamespace(kind="page_added", summary="page 1 entered short-term memory"))
    assert not win.status.memory_notice.isVisible()
    win.status.memory_event(types.SimpleNamespace(kind="trait_added", summary="trait 1 added"))
    assert win.status.memory_notice.isVisible()
    qtbot.mouseClick(win.status.memory_notice, Qt.MouseButton.LeftButton)
    assert attached == [win] and not win.status.memory_notice.isVisible()
    win.menus.inspector_action.trigger()
    assert attached == [win, win]


def test_status_bar_counts_pending_memory_jobs(make_window, chat, qtbot):
    win = make_window(max_tokens=8)
    seen = []
    win.backend.jobsChanged.connect(seen.append)
    chat.send(win, "I like tea.")
    assert win.backend.scheduler.wait_idle(timeout=60)
    # the memory thread reports the count after its commit: wait for that report to arrive
    qtbot.waitUntil(lambda: 0 in seen, timeout=30_000)
    qtbot.waitUntil(lambda: win.status.jobs_label.text() == "Memory: up to date", timeout=30_000)


def test_ui_code_never_touches_sql_or_models_directly():
    """ui → app → memory_core, models: the window uses record types and the read API only."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "ui"
    banned_modules = {"apsw", "sqlite3", "sqlite_vec", "llama_cpp", "onnxruntime", "tokenizers"}
    bad = []
    for path in [*root.glob("*.py"), *root.glob("window/*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            if set(names) & banned_modules:
                bad.append(f"{path.name}: imports {names}")
            if isinstance(node, ast.Attribute) and node.attr in ("execute", "_x", "_rows", "_one", "_scalar"):
                bad.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert bad == []


def test_go_to_message_opens_its_branch_and_trace_goes_to_the_inspector(make_window, chat, qtbot, monkeypatch):
    win = make_window(max_tokens=8)
    first = chat.send(win, "Pick a number.").result
    with qtbot.waitSignal(win.backend.turnFinished, timeout=120_000):
        win.turns.regenerate(first.assistant_message_id)
    second = win.backend.turn.result
    assert win.chat_view.last().message_id == second.assistant_message_id
    win.new_chat()
    # The inspector's "go to message" lands on the older branch, highlighted.
    win.show_message(first.conversation_id, first.assistant_message_id)
    qtbot.waitUntil(
        lambda: [w.message_id for w in win.chat_view.messages()] == [first.user_message_id, first.assistant_message_id],
        timeout=30_000,
    )
    assert win.current_id == first.conversation_id
    assert win.chat_view.last().property("highlight") == "true"
    # "What this reply recalled" asks the inspector for that message's trace.
    traced = []
    fake = types.ModuleType("ui.inspector")
    fake.attach = lambda mw: types.SimpleNamespace(show_trace_for_message=traced.append)
    monkeypatch.setitem(sys.modules, "ui.inspector", fake)
    reply = win.chat_view.last()
    assert reply.trace_button.accessibleName() == "What this reply recalled"
    qtbot.mouseClick(reply.trace_button, Qt.MouseButton.LeftButton)
    assert traced == [first.assistant_message_id]


def test_one_pause_switch_for_menu_inspector_and_store(make_window, chat, qtbot, mnemo_dirs):
    """The Memory menu, the inspector's checkbox and `mnemo memory pause` are one switch (in the store)."""
    from app.context import AppContext

    win = make_window()
    qtbot.waitUntil(lambda: win.menus.pause_action.isEnabled(), timeout=10_000)
    assert not win.menus.pause_action.isChecked()
    win.menus.pause_action.trigger()  # the menu pauses the store
    probe = AppContext.create().open_store()
    try:
        qtbot.waitUntil(probe.is_paused, timeout=10_000)
    finally:
        probe.close()
    panel = win.dock.show_inspector()
    assert panel.wait_idle()
    qtbot.waitUntil(lambda: panel.pause_box.isChecked(), timeout=10_000)  # the inspector shows it
    panel.pause_box.setChecked(False)  # the inspector resumes ...
    qtbot.waitUntil(lambda: not win.menus.pause_action.isChecked(), timeout=10_000)  # ... and the menu follows
    probe = AppContext.create().open_store()
    try:
        assert not probe.is_paused()
    finally:
        probe.close()


def test_a_pause_saved_by_an_old_settings_file_moves_to_the_store(mnemo_dirs, embedder):
    from app.context import AppContext

    ctx = AppContext.create()
    ctx._embedder = embedder
    ctx.settings.memory_paused = True  # what version 0.1 saved
    ctx.save()
    ctx = AppContext.create()
    ctx._embedder = embedder
    store = ctx.open_store()
    try:
        assert store.is_paused()
    finally:
        store.close()
    assert AppContext.create().settings.memory_paused is False


def test_import_conversations_from_the_app_with_progress_and_cancel(make_window, qtbot, monkeypatch):
    """Chat ▸ Import conversations…: a ChatGPT export is imported in the background (the window
    stays usable), the chats appear in the sidebar; a cancelled import keeps what it wrote and
    importing the file again finishes it."""
    from pathlib import Path

    from PySide6.QtWidgets import QFileDialog

    fixture = Path(__file__).parents[1] / "app" / "fixtures" / "chatgpt_conversations.json"
    win = make_window(start=True)
    from ui.import_dialog import ImportDialog

    first = ImportDialog(win.ctx, fixture, win)
    qtbot.addWidget(first)
    first.cancel()  # cancelled before it could write anything
    with qtbot.waitSignal(first.finished_import, timeout=60_000):
        first.start()
    assert first.job.phase == "cancelled" and "import the same file again" in first.status.text()
    first.accept()
    written = win.backend.db(lambda s: (s.stats()["conversations"], s.check_integrity())).result(timeout=30)
    assert written == (0, [])
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(fixture), "")))
    win.menus.import_action.trigger()  # the menu entry, as a user would: how to get an export, then the file
    assert "Export data" in win.dialogs.import_help.text.toPlainText()
    win.dialogs.import_help.choose_button.click()
    dlg = win.dialogs.import_window
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000) as sig:
        pass
    job = sig.args[0]
    assert job.phase == "done" and job.report.count("imported") == 3
    assert "3 conversation(s) imported" in dlg.status.text() and dlg.close_button.isVisible()
    assert dlg.details.isVisible() and "skipped" in dlg.details.toPlainText()  # malformed records listed
    qtbot.waitUntil(lambda: win.sidebar.list.count() >= 3, timeout=10_000)
    dlg.accept()
    again = win.dialogs.import_file(str(fixture))
    with qtbot.waitSignal(again.finished_import, timeout=60_000):
        pass
    assert again.job.phase == "done" and again.job.report.count("already imported") == 3
    again.accept()


def test_import_of_a_claude_export_zip_from_the_app(make_window, qtbot, tmp_path):
    import zipfile
    from pathlib import Path

    export = tmp_path / "data-2024-04-03.zip"
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr(
            "conversations.json",
            (Path(__file__).parents[1] / "app" / "fixtures" / "claude_conversations.json").read_bytes(),
        )
    win = make_window(start=True)
    dlg = win.dialogs.import_file(str(export))
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        pass
    assert dlg.job.phase == "done" and "3 conversation(s) imported" in dlg.status.text()
    qtbot.waitUntil(lambda: win.sidebar.list.count() >= 3, timeout=10_000)
    titles = [win.sidebar.list.item(i).text() for i in range(win.sidebar.list.count())]
    assert "Planning a vegetable garden" in titles and "Cover letter" in titles
    dlg.accept()


def test_export_the_chat_on_screen_from_the_menu_and_the_sidebar(make_window, chat, qtbot, tmp_path, monkeypatch):
    import json

    from PySide6.QtWidgets import QFileDialog

    win = make_window(max_tokens=8)
    turn = chat.send(win, "My cat is called Miso.")
    assert turn.result.status == "complete"
    chat.wait_db(win)
    answers = iter(
        [
            (str(tmp_path / "miso"), "JSON, every field (*.json)"),
            (str(tmp_path / "miso.md"), "Markdown transcript (*.md)"),
        ]
    )
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: next(answers)))
    win.menus.export_chat_action.trigger()  # Chat ▸ Export chat…
    qtbot.waitUntil(lambda: (tmp_path / "miso.json").exists(), timeout=30_000)  # the suffix of the chosen type
    doc = json.loads((tmp_path / "miso.json").read_text(encoding="utf-8"))
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant"]
    assert doc["messages"][0]["content"] == "My cat is called Miso."
    assert doc["messages"][1]["content"] == win.chat_view.messages()[-1].text
    qtbot.waitUntil(lambda: "Exported" in win.statusBar().currentMessage(), timeout=10_000)
    win.sidebar.exportRequested.emit(win.current_id)  # the sidebar's Export…
    qtbot.waitUntil(lambda: (tmp_path / "miso.md").exists(), timeout=30_000)
    assert "**User:** My cat is called Miso." in (tmp_path / "miso.md").read_text(encoding="utf-8")
    win.chats.export_conversation(None)
    assert "Open a chat" in win.statusBar().currentMessage()


def test_import_of_a_broken_file_says_why(make_window, qtbot, tmp_path):
    bad = tmp_path / "conversations.json"
    bad.write_text('[{"title": "x", "mapping": {', encoding="utf-8")
    win = make_window(start=True)
    dlg = win.dialogs.import_file(str(bad))
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        pass
    assert dlg.job.phase == "failed" and "The import failed" in dlg.status.text()
    assert "JSON" in dlg.status.text()
    dlg.accept()


def test_a_full_disk_keeps_the_typed_message_and_says_why(full_disk, make_window, chat, qtbot):
    win = make_window(max_tokens=8)
    assert chat.send(win, "My cat is called Miso.").result.status == "complete"
    chat.wait_db(win)
    full_disk.full = True
    turn = chat.send(win, "And my dog is called Tofu.")
    assert turn.result is None and "disk is full" in turn.error
    assert win.composer.text() == "And my dog is called Tofu."  # nothing typed is lost
    assert "disk is full" in win.statusBar().currentMessage()
    full_disk.full = False
    turn = chat.send(win, win.composer.text())  # space freed: send again
    assert turn.result is not None and turn.result.status == "complete", turn.error
    msgs = win.backend.db(lambda s: s.conversations.list_messages(turn.conversation_id)).result(timeout=60)
    assert [m.content for m in msgs if m.role == "user"] == ["My cat is called Miso.", "And my dog is called Tofu."]
    # the failed try is gone from the view: one bubble per message actually sent
    assert [w.text for w in win.chat_view.messages() if w.role == "user"] == [
        "My cat is called Miso.",
        "And my dog is called Tofu.",
    ]
    assert all(w.status != "failed" for w in win.chat_view.messages())


def test_unreadable_settings_are_reported_once_and_kept(make_window, qtbot, mnemo_dirs):
    from app.context import AppContext

    mnemo_dirs["config"].mkdir(parents=True, exist_ok=True)
    (mnemo_dirs["config"] / "settings.json").write_text('{"chat": {"n_ctx": 2048,')
    ctx = AppContext.create()
    win = make_window(ctx=ctx)
    qtbot.waitUntil(
        lambda: (
            getattr(win.dialogs, "settings_notes_box", None) is not None and win.dialogs.settings_notes_box.isVisible()
        ),
        timeout=10_000,
    )
    text = win.dialogs.settings_notes_box.informativeText()
    assert "settings.json.broken" in text and "default settings are used" in text
    assert (mnemo_dirs["config"] / "settings.json.broken").read_text() == '{"chat": {"n_ctx": 2048,'
    win.dialogs.settings_notes_box.close()
    assert ctx.settings_notes == []


def test_a_damaged_memory_database_is_explained_and_left_untouched(make_window, qtbot, mnemo_dirs):
    mnemo_dirs["data"].mkdir(parents=True, exist_ok=True)
    db = mnemo_dirs["data"] / "mnemo.sqlite3"
    junk = b"this is no database" * 400
    db.write_bytes(junk)
    win = make_window(wait=False)
    qtbot.waitUntil(
        lambda: getattr(win.backups, "store_error_box", None) is not None and win.backups.store_error_box.isVisible(),
        timeout=60_000,
    )
    box = win.backups.store_error_box
    assert box.text() == "The memory file is damaged, or is not a Mnemo memory."
    assert str(db) in box.informativeText() and "left exactly as it was" in box.informativeText()
    assert "There is no backup yet. Move the file away" in box.informativeText()
    assert "DamagedDatabaseError" in box.detailedText()
    assert win.backups.restore_button is None and win.status.jobs_label.text() == "Memory: unavailable"
    win.backups.store_error_box.close()
    qtbot.waitUntil(lambda: bool(win.backend.model_id), timeout=120_000)  # the model still loads
    assert win.backend.model_error is None
    win.composer.set_text("Hello?")
    win.turns.send()  # refused, with the reason; the text stays
    assert not win.backend.busy and win.composer.text() == "Hello?"
    assert "memory database could not be opened" in win.statusBar().currentMessage()
    assert db.read_bytes() == junk


def test_re_embedding_after_a_model_change_shows_progress(make_window, qtbot, mnemo_dirs, embedder):
    from memory_core import MemoryStore

    mnemo_dirs["data"].mkdir(parents=True, exist_ok=True)
    old = MemoryStore.open(
        mnemo_dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id="an-older-model", dim=embedder.dim
    )
    cid = old.conversations.create_conversation()
    old.intake.add_pages(cid, [{"user_text": f"note {i} about tea", "assistant_text": "ok"} for i in range(300)])
    old.close()
    win = make_window(start=False)
    seen = []
    win.backend.jobProgress.connect(
        lambda what, done, total: seen.append((what, done, total, win.status.jobs_label.text()))
    )
    win.start_background_loading()
    qtbot.waitUntil(lambda: bool(seen) and seen[-1][1] == seen[-1][2], timeout=120_000)
    # two jobs (256 pages, then 44): where each starts and ends, the second's start said once
    assert [s[:3] for s in seen] == [
        ("re-embedding memory", 0, 300),
        ("re-embedding memory", 256, 300),
        ("re-embedding memory", 300, 300),
    ]
    assert seen[1][3] == "Re-embedding memory: 256/300 pages (85%)"
    qtbot.waitUntil(
        lambda: (
            win.status.jobs_label.text() in ("Memory: up to date",) or win.status.jobs_label.text().endswith("waiting")
        ),
        timeout=60_000,
    )


def test_an_unsent_message_survives_quitting_and_a_sent_one_does_not_come_back(make_window, chat, qtbot, mnemo_dirs):
    from app.context import AppContext

    win = make_window(max_tokens=4)
    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, "half-written thought about tea")
    draft = mnemo_dirs["data"] / "draft.txt"
    qtbot.waitUntil(draft.exists, timeout=5_000)  # saved shortly after typing stops
    assert draft.read_text(encoding="utf-8") == "half-written thought about tea"
    win.close()
    again = make_window(ctx=AppContext.create())
    assert again.composer.text() == "half-written thought about tea"
    chat.send(again, again.composer.text())
    assert not draft.exists()  # sent: no longer a draft
    again.close()
    third = make_window(ctx=AppContext.create())
    assert third.composer.text() == ""


def test_the_window_makes_the_daily_backup_in_the_background(make_window, qtbot, mnemo_dirs, monkeypatch):
    from app.operations import backups
    from app.settings import Paths

    monkeypatch.setattr(backups, "START_DELAY_S", 0.5)  # a minute after start in the app
    win = make_window()
    paths = Paths(mnemo_dirs["config"], mnemo_dirs["data"])
    qtbot.waitUntil(lambda: len(backups.list_backups(paths)) == 1, timeout=30_000)
    made = backups.list_backups(paths)[0]
    assert made.stat().st_size > 0
    win.close()
    again = make_window()  # the next start the same day makes none
    qtbot.wait(2500)
    assert backups.list_backups(paths) == [made]
    again.close()


def test_back_up_memory_now_from_the_menu(make_window, chat, qtbot, mnemo_dirs):
    win = make_window(max_tokens=4)
    assert chat.send(win, "Remember that my bike is red.").result.status == "complete"
    win.menus.backup_action.trigger()
    qtbot.waitUntil(lambda: getattr(win.backups, "last_backup", None) is not None, timeout=30_000)
    assert (
        win.backups.last_backup.parent == mnemo_dirs["data"] / "backups" and win.backups.last_backup.stat().st_size > 0
    )
    assert "Memory backed up to" in win.statusBar().currentMessage()
    assert win.menus.backup_action.isEnabled()


def test_export_memory_from_the_memory_menu(make_window, chat, qtbot, tmp_path, monkeypatch):
    import json

    from PySide6.QtWidgets import QFileDialog

    win = make_window(max_tokens=4)
    assert chat.send(win, "Remember that my bike is red.").result.status == "complete"
    target = tmp_path / "memory.json"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "JSON, complete (*.json)"))
    )
    win.menus.export_action.trigger()
    panel = win.inspector
    qtbot.waitUntil(target.exists, timeout=30_000)
    qtbot.waitUntil(lambda: "Exported" in panel.status_label.text(), timeout=30_000)
    pages = json.loads(target.read_text(encoding="utf-8"))["pages"]
    assert [p["user_text"] for p in pages] == ["Remember that my bike is red."]
    assert panel.isVisible()  # the export's progress and outcome show there


def test_a_damaged_memory_is_restored_from_the_latest_backup_from_the_dialog(make_window, qtbot, mnemo_dirs, embedder):
    from app.operations import backups
    from app.settings import Paths
    from memory_core import MemoryStore

    paths = Paths(mnemo_dirs["config"], mnemo_dirs["data"])
    s = MemoryStore.open(paths.db_file, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    s.intake.add_page(s.conversations.create_conversation(), "I keep bees.", "Lovely.")
    saved = backups.make_backup(s, paths)
    s.close()
    for extra in ("-wal", "-shm"):
        paths.db_file.with_name(paths.db_file.name + extra).unlink(missing_ok=True)
    paths.db_file.write_bytes(b"ruined" * 1000)
    win = make_window(wait=False)
    qtbot.waitUntil(
        lambda: getattr(win.backups, "store_error_box", None) is not None and win.backups.store_error_box.isVisible(),
        timeout=60_000,
    )
    assert win.backups.restore_button is not None and "Restore the backup of" in win.backups.restore_button.text()
    win.backups.restore_button.click()
    qtbot.waitUntil(lambda: win.backups.reopen_notice is not None and not win.isVisible(), timeout=30_000)
    icon, text, info = win.backups.reopen_notice
    assert text.startswith("The backup of") and text.endswith("was restored.") and "kept as" in info
    assert win.backups.restored_from == saved
    assert paths.db_file.read_bytes() == saved.read_bytes()
    kept = [p for p in paths.data_dir.iterdir() if ".before-restore-" in p.name]
    assert [p.read_bytes() for p in kept] == [b"ruined" * 1000]
    r = MemoryStore.open(paths.db_file, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    try:
        assert [p.user_text for p in r.pages.list_pages()] == ["I keep bees."]
    finally:
        r.close()


def test_restore_from_the_menu_refuses_a_file_that_is_not_a_mnemo_memory(make_window, qtbot, mnemo_dirs, tmp_path):
    win = make_window()
    before = win.ctx.paths.db_file.read_bytes()
    win.menus.restore_action.trigger()
    dialog = win.backups.restore_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    assert dialog.list.count() == 0 and dialog.empty_label.isVisible() and not dialog.restore_button.isEnabled()
    junk = tmp_path / "notes.db"
    junk.write_text("my shopping list")
    dialog.add_file(junk)  # what "Choose another file…" does with the pick
    assert dialog.restore_button.isEnabled()
    dialog.restore_button.click()
    qtbot.waitUntil(
        lambda: (
            getattr(win.backups, "restore_refused_box", None) is not None
            and win.backups.restore_refused_box.isVisible()
        ),
        timeout=30_000,
    )
    assert "not a Mnemo memory" in win.backups.restore_refused_box.informativeText()
    assert "left as it was" in win.backups.restore_refused_box.informativeText()
    win.backups.restore_refused_box.close()
    assert win.backend.started and win.menus.restore_action.isEnabled() and win.backups.reopen_notice is None
    assert win.ctx.paths.db_file.read_bytes() == before
    assert not [p for p in win.ctx.paths.data_dir.iterdir() if "before-restore" in p.name]


def test_restoring_while_a_reply_streams_stops_it_and_keeps_both_in_the_file_set_aside(
    make_window, chat, qtbot, mnemo_dirs, embedder, chat_model
):
    from app.operations import backups
    from memory_core import MemoryStore

    win = make_window(max_tokens=400)
    saved = win.backend.db(lambda st: backups.make_backup(st, win.ctx.paths)).result(timeout=30)
    # the reply must still be streaming when the restore comes: the shared model's sampling state depends on
    # the tests before this one, and some draws end the story within a second or two
    chat_model.set_seed(11)
    chat.send(win, "Tell me a very long story about a lighthouse keeper named Ada.", wait=False)
    qtbot.waitUntil(
        lambda: win.backend.turn is not None and win.backend.turn.first_token_at is not None, timeout=120_000
    )
    qtbot.wait(300)  # the first token is saved at once (app.chat.agent)
    win.backups.restore_backup(saved)
    qtbot.waitUntil(lambda: win.backups.reopen_notice is not None and not win.isVisible(), timeout=60_000)
    assert win.backups.reopen_notice[1].endswith("was restored.")
    aside = [
        p
        for p in win.ctx.paths.data_dir.iterdir()
        if p.name.startswith("mnemo.sqlite3.before-restore-") and not p.name.endswith(("-wal", "-shm"))
    ]
    old = MemoryStore.open(aside[0], embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    try:
        msgs = [m for c in old.conversations.list_conversations() for m in old.conversations.list_messages(c.id)]
        texts = [m.content for m in msgs]
    finally:
        old.close()
    assert "Tell me a very long story about a lighthouse keeper named Ada." in texts
    replies = [m for m in msgs if m.role == "assistant"]
    assert [m.status for m in replies] == ["stopped"] and replies[0].content.strip()  # the part streamed


def test_restore_from_the_menu_reopens_the_window_on_the_restored_memory(qtbot, mnemo_dirs, embedder, chat_model):
    """The whole path a user takes, through `run_gui`'s event loop: Memory ▸ Restore from a backup…,
    the newest backup, Restore; the window closes and a new one opens on the restored memory."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.context import AppContext
    from app.operations import backups
    from memory_core import MemoryStore
    from ui.app import run_gui
    from ui.main_window import MainWindow

    paths = AppContext.create().paths
    s = MemoryStore.open(paths.db_file, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)
    bees = s.conversations.create_conversation("Bees")
    s.conversations.add_message(bees, "user", "I keep bees.")
    s.intake.add_page(bees, "I keep bees.", "Lovely.")
    saved = backups.make_backup(s, paths)
    s.intake.add_page(s.conversations.create_conversation("Tea"), "I drink green tea.", "Nice.")  # after the backup
    s.close()
    ctx = AppContext.create()
    ctx._embedder, ctx._chat_model = embedder, chat_model
    seen: dict = {"windows": [], "titles": [], "error": None}

    def titles(win):  # the chats, not their date headings
        return [win.sidebar.title_of(cid) for cid in win.sidebar.ids()]

    def windows():
        return [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]

    def step() -> None:
        try:
            shown = windows()
            for w in shown:
                if w not in seen["windows"]:
                    seen["windows"].append(w)
            if not shown or not shown[0].backend.store_ok:
                return
            win = shown[0]
            if len(seen["windows"]) == 1 and win.current_id is None:
                win.open_conversation(bees)  # the chat on screen
            elif len(seen["windows"]) == 1 and getattr(win.backups, "restore_dialog", None) is None:
                win.menus.restore_action.trigger()
                assert win.backups.restore_dialog.selected() == saved  # the newest backup, preselected
                win.backups.restore_dialog.restore_button.click()
            elif len(seen["windows"]) == 2 and titles(win) and getattr(win.backups, "notice_box", None):
                seen["titles"] = titles(win)
                seen["notice"] = win.backups.notice_box.text()
                seen["chat"] = (win.current_id, win.current_title)
                win.close()
        except Exception as exc:
            seen["error"] = exc
            for w in windows():
                w.close()

    timer = QTimer()
    timer.timeout.connect(step)
    timer.start(50)
    QTimer.singleShot(180_000, lambda: [w.close() for w in windows()])  # a watchdog
    try:
        code = run_gui(ctx)
    finally:
        timer.stop()
    assert seen["error"] is None, seen["error"]
    assert code == 0 and len(seen["windows"]) == 2
    assert seen["titles"] == ["Bees"] and seen["notice"].endswith("was restored.")
    assert seen["chat"] == (bees, "Bees")  # the same chat, reopened
    assert [p.name for p in paths.data_dir.iterdir() if ".before-restore-" in p.name]


def _open_warmed_chat(make_window, qtbot, mnemo_dirs, embedder, *, exchanges: int, at_least: int):
    """A window showing a chat of `exchanges` long exchanges, once the model has prepared its prompt."""
    from memory_core import MemoryStore

    s = MemoryStore.open(
        mnemo_dirs["data"] / "mnemo.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
    )
    cid = s.conversations.create_conversation("Drought")
    for i in range(exchanges):
        s.conversations.add_message(cid, "user", f"Question {i}: how do gardens handle drought in region {i}?")
        s.conversations.add_message(cid, "assistant", "Mulch, deep watering, native plants and shade. " * 4)
    s.close()
    win = make_window(max_tokens=4)
    win.open_conversation(cid)
    qtbot.waitUntil(
        lambda: (
            win.backend.last_warm is not None
            and win.backend.last_warm.done()
            and win.backend.last_warm.result() > at_least
        ),
        timeout=120_000,
    )
    return win


def test_opening_a_chat_prepares_its_prompt_so_the_reply_starts_sooner(make_window, chat, qtbot, mnemo_dirs, embedder):
    win = _open_warmed_chat(make_window, qtbot, mnemo_dirs, embedder, exchanges=4, at_least=200)
    warmed = win.backend.last_warm.result()
    turn = chat.send(win, "What keeps the soil moist?")
    assert turn.result.status == "complete"
    assert turn.result.stats["cached_prompt_tokens"] >= warmed - 2
    assert "already processed" in win.status.speed_label.toolTip()
    win.dock.show_trace(turn.result.assistant_message_id)  # the inspector's trace says it too
    header = win.inspector.trace.header
    qtbot.waitUntil(lambda: "already processed" in header.text(), timeout=30_000)
    assert f"({turn.result.stats['cached_prompt_tokens']:,} already processed)" in header.text()
    qtbot.waitUntil(lambda: win.backend.last_warm.done(), timeout=120_000)  # after the reply: warmed again
    assert win.backend.last_warm.result() > warmed


def test_preparing_replies_can_be_switched_off_in_settings(make_window, qtbot, mnemo_dirs):
    from app.context import AppContext

    ctx = AppContext.create()
    ctx.settings.ui.prepare_replies = False
    ctx.settings.chat.max_tokens = 4
    win = make_window(ctx=ctx)
    win.open_conversation(None)
    qtbot.wait(300)
    assert win.backend.last_warm is None  # nothing was sent to the model
    win.dialogs.open_settings()
    dlg = win.dialogs.settings_dialog
    assert not dlg.prepare_check.isChecked()
    dlg.prepare_check.setChecked(True)
    assert "ui" in dlg.apply() and ctx.settings.ui.prepare_replies
    dlg.close()
    win.new_chat()
    qtbot.waitUntil(lambda: win.backend.last_warm is not None and win.backend.last_warm.done(), timeout=60_000)
    assert win.backend.last_warm.result() > 0  # the system prompt at least


def test_the_chat_is_prepared_again_after_memory_work_used_the_model(
    make_window, qtbot, mnemo_dirs, embedder, chat_model
):
    win = _open_warmed_chat(make_window, qtbot, mnemo_dirs, embedder, exchanges=3, at_least=100)
    first = win.backend.last_warm
    win.backend.submit(lambda store, model: model._llm.reset()).result(timeout=30)  # as a memory job would
    win.backend.jobsChanged.emit(1)
    win.backend.jobsChanged.emit(0)  # the memory work is done
    assert win.backend.last_warm is not first
    qtbot.waitUntil(lambda: win.backend.last_warm.done(), timeout=120_000)
    assert win.backend.last_warm.result() == first.result()


def _home_for_model_search(monkeypatch, home) -> None:
    """Other apps' model folders are looked for under `home` only (not under the real home or the
    folders the environment names)."""
    monkeypatch.setenv("HOME", str(home))
    for var in ("HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "OLLAMA_MODELS"):
        monkeypatch.delenv(var, raising=False)


def test_settings_offer_the_models_other_apps_keep_and_the_window_switches_to_one(
    make_window, qtbot, tmp_path, monkeypatch
):
    import os

    from models.resolve import default_gguf_path
    from ui.settings_dialog import SettingsDialog

    home = tmp_path / "home"
    found = home / ".lmstudio/models/me/Tiny-GGUF/Tiny-Chat-Q4_1.gguf"
    found.parent.mkdir(parents=True)
    os.symlink(default_gguf_path(), found)
    _home_for_model_search(monkeypatch, home)

    win = make_window(share_model=False)
    dlg = SettingsDialog(win.ctx, win)
    qtbot.addWidget(dlg)
    dlg.server_radio.setChecked(True)
    combo = dlg.found_combo
    qtbot.waitUntil(lambda: combo.isEnabled(), timeout=10_000)  # searched on a thread of its own
    assert [combo.itemText(i) for i in range(combo.count())][0] == "1 GGUF chat model found: choose one"
    assert combo.itemText(1).startswith("Tiny-Chat-Q4_1 (LM Studio, ")
    dlg.show()
    dlg.tabs.setCurrentIndex(0)
    dlg.grab().save(str(tmp_path / "settings-found.png"))
    combo.setCurrentIndex(1)
    combo.activated.emit(1)  # what a click on the item sends
    assert dlg.gguf_edit.text() == str(found) and dlg.local_radio.isChecked()
    assert "chat" in win.dialogs.apply_settings(dlg)
    assert win.ctx.settings.chat.gguf_path == str(found)
    qtbot.waitUntil(lambda: win.backend.model_id == "Tiny-Chat-Q4_1.gguf", timeout=60_000)  # reloaded


def test_settings_say_when_no_model_is_found(make_window, qtbot, tmp_path, monkeypatch):
    from ui.settings_dialog import SettingsDialog

    _home_for_model_search(monkeypatch, tmp_path / "empty-home")
    win = make_window(start=False)
    dlg = SettingsDialog(win.ctx, win)
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.found_combo.itemText(0).startswith("None found"), timeout=10_000)
    assert not dlg.found_combo.isEnabled() and "Browse" in dlg.found_combo.itemText(0)
    assert dlg.apply() == set()


def test_the_empty_chat_says_when_better_models_are_on_this_computer(make_window, qtbot, tmp_path, monkeypatch):
    import os

    from models.resolve import default_gguf_path
    from tests.models.test_discover import write_gguf

    home = tmp_path / "home"
    write_gguf(home / "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", {"general.architecture": "qwen2"}, pad=4096)
    bundled_copy = home / ".lmstudio/models/x/SmolLM2-135M-Instruct-Q4_1.gguf"  # the bundled file itself
    bundled_copy.parent.mkdir(parents=True)
    os.symlink(default_gguf_path(), bundled_copy)
    _home_for_model_search(monkeypatch, home)

    win = make_window(share_model=False)
    hint = win.chat_view.empty.models_hint
    qtbot.waitUntil(hint.isVisible, timeout=10_000)
    assert "<b>Qwen2.5-7B-Instruct-Q4_K_M</b> (~/models)" in hint.text()  # not the bundled file again
    assert "SmolLM2" not in hint.text()
    win.chat_view.empty.grab().save(str(tmp_path / "empty-hint.png"))
    hint.linkActivated.emit("settings")  # a click on the link
    dlg = win.dialogs.settings_dialog
    assert dlg.isVisible() and dlg.tabs.currentIndex() == 0
    combo = dlg.found_combo
    qtbot.waitUntil(lambda: combo.count() == 3, timeout=10_000)  # heading + the two files
    combo.activated.emit(combo.findText("SmolLM2-135M-Instruct-Q4_1 (LM Studio", Qt.MatchFlag.MatchStartsWith))
    assert "chat" in win.dialogs.apply_settings(dlg)
    assert not hint.isVisible()  # a model of the user's choice: nothing to suggest
    qtbot.waitUntil(lambda: win.backend.model_id == "SmolLM2-135M-Instruct-Q4_1.gguf", timeout=60_000)
    dlg.reject()


def test_the_empty_chat_names_a_server_running_here(make_window, qtbot, tmp_path, monkeypatch, server_url):
    from app.context import AppContext

    _home_for_model_search(monkeypatch, tmp_path / "empty-home")  # no files: only the server is found
    ctx = AppContext.create()
    ctx.settings.chat.server_url = server_url  # typed once, but the bundled model still answers
    win = make_window(ctx=ctx)
    hint = win.chat_view.empty.models_hint
    qtbot.waitUntil(hint.isVisible, timeout=10_000)
    assert f"On this computer, the server at {server_url} serves <b>smollm2</b>" in hint.text()


def test_no_hint_when_a_model_of_ones_own_is_chosen(make_window, qtbot, tmp_path, monkeypatch):
    from tests.models.test_discover import write_gguf

    home = tmp_path / "home"
    write_gguf(home / "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", {"general.architecture": "qwen2"})
    _home_for_model_search(monkeypatch, home)
    from app.context import AppContext

    ctx = AppContext.create()
    ctx.settings.chat.backend = "openai"  # a server answers: nothing to suggest
    win = make_window(ctx=ctx, start=False)
    win.start_background_loading()
    assert not hasattr(win, "model_finder")
    assert not win.chat_view.empty.models_hint.isVisible()


def test_settings_offer_the_servers_running_here_and_the_window_chats_through_one(make_window, qtbot, server_url):
    from ui.settings_dialog import SettingsDialog

    win = make_window(share_model=False)
    win.ctx.settings.chat.server_url = server_url  # e.g. typed earlier; the usual ports are asked too
    dlg = SettingsDialog(win.ctx, win)
    qtbot.addWidget(dlg)
    combo = dlg.server_combo
    qtbot.waitUntil(combo.isEnabled, timeout=10_000)
    items = [combo.itemText(i) for i in range(combo.count())]
    assert f"smollm2 ({server_url})" in items
    dlg.server_model_edit.setText("")
    combo.activated.emit(items.index(f"smollm2 ({server_url})"))
    assert dlg.server_radio.isChecked() and dlg.url_edit.text() == server_url
    assert dlg.server_model_edit.text() == "smollm2"
    assert "chat" in win.dialogs.apply_settings(dlg)
    qtbot.waitUntil(lambda: win.backend.model_id == "smollm2", timeout=30_000)  # now answered by the server


def test_forgetting_a_chat_while_its_reply_streams_stops_it_first(make_window, chat, qtbot, monkeypatch):
    win = make_window(max_tokens=8)
    first = chat.send(win, "My bicycle is a green Dutch city bike.").result
    win.ctx.settings.chat.max_tokens = 300
    chat.send(win, "Tell me a long story about the sea.", wait=False)
    turn = win.backend.turn
    qtbot.waitUntil(lambda: turn.first_token_at is not None, timeout=120_000)
    assert not turn.done
    monkeypatch.setattr(win.chats, "ask_forget", lambda name, held: True)
    win.chats.forget_conversation_memory(first.conversation_id)
    qtbot.waitUntil(lambda: "Forgot what Mnemo learned" in win.statusBar().currentMessage(), timeout=120_000)
    assert turn.done and turn.result.status == "stopped"  # stopped, then saved, then forgotten
    assert win.backend.scheduler.wait_idle(timeout=60)
    stored = win.backend.db(
        lambda s: (
            s.pages.count_pages(conversation_id=first.conversation_id),
            [j for j in s.jobs.list_jobs(status="pending") if j.kind == "add_page"],
            [m.status for m in s.conversations.all_messages(first.conversation_id)],
        )
    ).result(timeout=30)
    assert stored == (0, [], ["complete", "complete", "complete", "stopped"])


def test_each_menu_gives_every_item_its_own_access_key(make_window):
    """Alt+C then a letter picks one item: two items with the same letter need a second press."""
    win = make_window(start=False)
    for menu in (a.menu() for a in win.menuBar().actions() if a.menu() is not None):
        keys = [a.text().split("&", 1)[1][0].lower() for a in menu.actions() if "&" in a.text()]
        assert len(keys) == len(set(keys)), (menu.title(), sorted(keys))
        assert keys, menu.title()


def test_the_trace_tab_opens_on_the_newest_reply(make_window, chat, qtbot):
    """The trace tab, opened with no reply selected, showed empty tables and "Select an assistant message…";
    it now shows what the newest reply on screen recalled (seen on the virtual screen)."""
    win = make_window(max_tokens=8)
    first = chat.send(win, "My cat is called Miso.").result
    second = chat.send(win, "What is my cat called?").result
    assert win.latest_reply_id() == second.assistant_message_id
    panel = win.dock.show_inspector()
    assert panel.wait_idle()
    panel.show_tab("trace")
    qtbot.waitUntil(
        lambda: panel.trace.data is not None and panel.trace.data.message_id == second.assistant_message_id,
        timeout=30_000,
    )
    assert f"Reply {second.assistant_message_id}" in panel.trace.header.text()
    # an older reply's icon, with the tab empty: that reply, not the newest
    panel.trace.set_data(None)
    panel.show_tab("overview")
    panel.show_trace_for_message(first.assistant_message_id)
    assert panel.wait_idle()
    assert panel.trace.data.message_id == first.assistant_message_id
    win.new_chat()
    assert win.latest_reply_id() is None
