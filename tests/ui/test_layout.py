"""The window as a person uses it: the inspector toggles and never squeezes the chat, the chat list collapses,
messages re-wrap, tab titles are whole, dates in the chat and the chat list, menus that need a chat are off
without one, imported lines have no reply actions, a paused memory says so in the chat, Saved memories and the
prompt view act on the real store, and custom instructions reach the prompt."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt

from tests.ui.conftest import LOAD_TIMEOUT_MS, TURN_TIMEOUT_MS


def _dock(win):
    from ui.inspector.panel import DOCK_ATTR

    assert DOCK_ATTR == "_mnemo_inspector_dock"  # the name the window looks its dock up by
    return getattr(win, DOCK_ATTR)


def test_the_inspector_toggles_from_the_key_the_menu_and_the_header(make_window, qtbot):
    win = make_window(start=False)
    win.resize(1440, 900)
    win.start_background_loading()
    qtbot.waitUntil(lambda: win.backend.store_ok is not None, timeout=LOAD_TIMEOUT_MS)
    qtbot.keyClick(win, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    dock = _dock(win)
    try:
        assert dock.isVisible() and win.memory_button.isChecked() and win.menus.inspector_action.isChecked()
        qtbot.keyClick(win, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)  # the same key closes it
        assert not dock.isVisible() and not win.memory_button.isChecked() and not win.menus.inspector_action.isChecked()
        win.memory_button.click()
        assert dock.isVisible() and win.menus.inspector_action.isChecked()
        win.menus.inspector_action.trigger()
        assert not dock.isVisible() and not win.memory_button.isChecked()
        win.menus.inspector_action.trigger()
        assert dock.isVisible()
        dock.close()  # the dock's own ×: the toggles follow
        qtbot.waitUntil(lambda: not win.memory_button.isChecked(), timeout=15_000)
    finally:
        win.inspector.shutdown()


def test_docked_the_inspector_never_squeezes_the_chat(make_window, chat, qtbot):
    from ui.main_window import CHAT_MIN_WIDTH

    win = make_window(max_tokens=8)
    long = "a long message that must wrap " * 12
    chat.send(win, long.strip())
    win.resize(1440, 900)
    panel = win.dock.show_inspector()
    dock = _dock(win)
    try:
        qtbot.waitUntil(lambda: dock.isVisible() and not dock.isFloating(), timeout=15_000)
        assert win.sidebar.isVisible() and win.chat_pane.width() >= CHAT_MIN_WIDTH
        # 800 × 600: the chat list gives way, the chat keeps its readable width, the inspector stays docked
        win.resize(800, 600)
        qtbot.waitUntil(lambda: not win.sidebar.isVisible(), timeout=15_000)
        assert not dock.isFloating() and win.chat_pane.width() >= CHAT_MIN_WIDTH
        # every message re-wraps inside the chat: nothing is cut at its right edge
        view = win.chat_view.scroll_area.viewport()
        qtbot.waitUntil(lambda: all(w.width() <= view.width() for w in win.chat_view.messages()), timeout=15_000)
        for w in win.chat_view.messages():
            assert w.body.document().size().width() <= w.body.width() + 1
        # too narrow for both: the inspector floats beside the window
        win.resize(660, 480)
        qtbot.waitUntil(dock.isFloating, timeout=15_000)
        assert win.chat_pane.width() >= CHAT_MIN_WIDTH
        # wide again: docked by the user, the chat list comes back by itself
        dock.setFloating(False)
        win.resize(1440, 900)
        qtbot.waitUntil(win.sidebar.isVisible, timeout=15_000)
        # the tab titles are whole (a bar too narrow scrolls), each with a tooltip
        bar = panel.tabs.tabBar()
        for i in range(bar.count()):
            assert bar.tabRect(i).width() >= bar.fontMetrics().horizontalAdvance(bar.tabText(i)), bar.tabText(i)
            assert bar.tabToolTip(i)
        assert panel.tabs.elideMode() == Qt.TextElideMode.ElideNone and panel.tabs.usesScrollButtons()
    finally:
        panel.shutdown()


def test_the_chat_list_collapses_and_the_users_choice_is_kept(make_window, qtbot):
    win = make_window(start=False)
    win.resize(1200, 800)
    qtbot.waitExposed(win)
    win.sidebar_button.click()
    assert not win.sidebar.isVisible() and not win.menus.sidebar_action.isChecked()
    win.resize(1300, 820)  # room enough: still hidden, as the user chose
    qtbot.wait(50)
    assert not win.sidebar.isVisible()
    qtbot.keyClick(win, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert win.sidebar.isVisible() and win.sidebar_button.isChecked()


def test_dates_in_the_chat_and_date_groups_in_the_chat_list(make_window, qtbot, chat):
    from app.wording import when
    from ui.conversation_list import date_group

    now = time.time()
    day = 86400
    assert [date_group(now - d * day, now) for d in (0, 1, 3, 20)] == [
        "Today",
        "Yesterday",
        "Previous 7 days",
        "Previous 30 days",
    ]
    win = make_window(start=False)
    store = win.ctx.open_store()
    try:
        old = store.conversations.create_conversation("Old trip", created_at=now - 40 * day)
        u = store.conversations.add_message(old, "user", "Where did we go?", created_at=now - 40 * day)
        store.conversations.add_message(old, "assistant", "To Porto.", parent_id=u, created_at=now - 40 * day + 5)
        fresh = store.conversations.create_conversation("Today's chat")
        store.conversations.add_message(fresh, "user", "Hello.")
        expected_old = date_group(store.conversations.get_conversation(old).updated_at, now)
    finally:
        store.close()
    win.start_background_loading()
    qtbot.waitUntil(lambda: len(win.sidebar.ids()) == 2, timeout=LOAD_TIMEOUT_MS)
    assert win.sidebar.groups() == ["Today", expected_old]
    assert win.sidebar.ids() == [fresh, old]  # the headings are not chats
    heading = win.sidebar.list.item(0)
    assert not (heading.flags() & Qt.ItemFlag.ItemIsSelectable)
    win.open_conversation(old)
    qtbot.waitUntil(lambda: len(win.chat_view.messages()) == 2, timeout=30_000)
    first = win.chat_view.messages()[0]
    assert first.date_label.isVisible() and first.date_label.text() == when(now - 40 * day)
    assert first.date_label.toolTip()  # the whole date and time


def test_chat_actions_need_a_chat_and_imported_lines_have_no_reply_actions(make_window, qtbot, chat):
    win = make_window(max_tokens=8)
    for act in (
        win.menus.rename_action,
        win.menus.export_chat_action,
        win.menus.forget_chat_action,
        win.menus.delete_action,
    ):
        assert not act.isEnabled(), act.text()
    assert not win.menus.regenerate_action.isEnabled() and not win.menus.edit_last_action.isEnabled()
    chat.send(win, "Hello there.")
    chat.wait_db(win)
    for act in (
        win.menus.rename_action,
        win.menus.export_chat_action,
        win.menus.delete_action,
        win.menus.regenerate_action,
    ):
        assert act.isEnabled(), act.text()
    win.new_chat()
    assert not win.menus.rename_action.isEnabled() and not win.menus.regenerate_action.isEnabled()
    # an imported chat: its lines have no trace to show, nothing of Mnemo's to regenerate or resend
    store = win.ctx.open_store()
    try:
        cid = store.conversations.create_conversation("From ChatGPT", source="chatgpt")
        u = store.conversations.add_message(
            cid, "user", "What is a haiku?", meta={"import_source": "chatgpt", "turn_id": "u1"}
        )
        store.conversations.add_message(
            cid, "assistant", "A short poem.", parent_id=u, meta={"import_source": "chatgpt"}
        )
    finally:
        store.close()
    win.open_conversation(cid)
    qtbot.waitUntil(lambda: len(win.chat_view.messages()) == 2, timeout=30_000)
    user, reply = win.chat_view.messages()
    assert reply.copy_button.isVisibleTo(reply) and user.copy_button.isVisibleTo(user)
    for b in (reply.regenerate_button, reply.trace_button, user.edit_button):
        assert not b.isVisibleTo(b.parentWidget()), b.accessibleName()
    assert not win.menus.regenerate_action.isEnabled() and not win.menus.edit_last_action.isEnabled()


def test_a_paused_memory_says_so_in_the_chat(make_window, qtbot, chat):
    win = make_window(max_tokens=8)
    assert not win.paused_banner.isVisible()
    # the switch is enabled once the store has said whether memory is paused (a read after the store opens)
    qtbot.waitUntil(win.menus.pause_action.isEnabled, timeout=30_000)
    win.menus.pause_action.trigger()
    qtbot.waitUntil(win.paused_banner.isVisible, timeout=30_000)
    assert "paused" in win.paused_label.text()
    win.resume_button.click()
    qtbot.waitUntil(lambda: not win.paused_banner.isVisible(), timeout=30_000)
    assert not win.menus.pause_action.isChecked()


def test_saved_memories_edit_pin_and_forget_act_on_the_store(make_window, qtbot):
    from app.operations import chats as operations

    win = make_window(start=False)
    store = win.ctx.open_store()
    try:
        fact = operations.remember(store, "I moved to Lisbon in March.")
        trait = operations.remember_a_trait(store, "reply_style", "Be brief.")
    finally:
        store.close()
    win.start_background_loading()
    qtbot.waitUntil(lambda: win.backend.store_ok is not None, timeout=LOAD_TIMEOUT_MS)
    win.dock.show_saved_memories()
    panel = win.inspector
    view = panel.memories
    try:
        qtbot.waitUntil(lambda: len(view.rows) == 2, timeout=20_000)
        texts = [r.memory.text for r in view.rows]
        assert set(texts) == {"I moved to Lisbon in March.", "Reply style: Be brief."}
        row = view.row_of("knowledge", fact.id)
        assert row.memory.origin == "You added this" and row.text.wordWrap()
        panel.edit_texts = lambda title, fields, note="": ["I moved to Lisbon in March 2024."]
        row.edit_btn.click()
        qtbot.waitUntil(lambda: view.row_of("knowledge", fact.id).memory.text.endswith("2024."), timeout=20_000)
        view.row_of("trait", trait.id).pin_btn.click()
        qtbot.waitUntil(lambda: view.row_of("trait", trait.id).memory.pinned, timeout=20_000)
        assert view.row_of("trait", trait.id).pin_btn.text() == "Unpin" and view.rows[0].memory.kind == "trait"
        assert panel.status_label.text() == f"Trait {trait.id} pinned."  # the same words as the CLI's
        panel.confirm = lambda title, text, action="Forget": True
        view.row_of("knowledge", fact.id).forget_btn.click()
        qtbot.waitUntil(lambda: view.row_of("knowledge", fact.id) is None, timeout=20_000)
        check = win.ctx.open_store()
        try:
            assert check.persona.get_knowledge(fact.id) is None
            assert check.persona.get_trait(trait.id).pinned
            assert not any(h.item.id == fact.id for h in check.retrieve("Where do I live?").knowledge)
        finally:
            check.close()
    finally:
        panel.shutdown()


def test_custom_instructions_reach_the_prompt_and_the_prompt_view_shows_its_parts(make_window, qtbot, chat):
    from app.chat.prompting import INSTRUCTIONS_HEADING, SECTIONS

    win = make_window(max_tokens=8)
    win.ctx.settings.custom_instructions = "Always answer in French."
    turn = chat.send(win, "What is the capital of Italy?")
    result = turn.result
    system = result.prompt.messages[0]["content"]
    assert f"{INSTRUCTIONS_HEADING}\nAlways answer in French." in system
    sections = result.trace["prompt_sections"]
    assert set(sections) == set(SECTIONS) and sections["system"] > 0 and sections["message"] > 0
    assert sections["system"] == win.backend.scheduler.model.count_tokens(result.prompt.sections["system"])
    win.dock.show_last_prompt()
    panel = win.inspector
    try:
        qtbot.waitUntil(lambda: panel.prompt.data is not None and bool(panel.prompt.data.tokens), timeout=20_000)
        assert panel.current_tab() == "prompt"
        assert panel.prompt.section_tokens() == sections
        text = panel.prompt.whole_text()
        assert "Always answer in French." in text and "What is the capital of Italy?" in text
    finally:
        panel.shutdown()


def test_an_import_brings_chatgpts_custom_instructions_to_settings(make_window, qtbot):
    from pathlib import Path

    fixture = Path(__file__).parents[1] / "app" / "fixtures" / "chatgpt_conversations.json"
    win = make_window(start=True)
    assert win.ctx.settings.custom_instructions == ""
    dlg = win.dialogs.import_file(str(fixture))
    with qtbot.waitSignal(dlg.finished_import, timeout=TURN_TIMEOUT_MS):
        pass
    assert win.ctx.settings.custom_instructions == "Be brief."  # the export's "how to respond"
    from app.context import AppContext

    assert AppContext.create().settings.custom_instructions == "Be brief."  # saved
    dlg.accept()


def test_memory_updated_opens_the_inspector_where_the_change_is(make_window, qtbot, chat):
    win = make_window(max_tokens=8)
    turn = chat.send(win, "Remember that my locker code is 4312.")
    kept = turn.result.stats["remembered"]
    qtbot.waitUntil(win.status.memory_notice.isVisible, timeout=30_000)  # the fact was kept: "Memory updated"
    assert "New fact about you" in win.status.memory_notice.toolTip()
    win.status.memory_notice.click()
    panel = win.inspector
    try:
        qtbot.waitUntil(lambda: panel.current_tab() == "memories", timeout=30_000)
        qtbot.waitUntil(lambda: panel.memories.row_of("knowledge", kept["id"]) is not None, timeout=30_000)
        assert panel.memories.row_of("knowledge", kept["id"]).property("highlight") == "true"
    finally:
        panel.shutdown()


def test_settings_keep_a_handful_of_choices_and_the_knobs_behind_developer_settings(make_window, qtbot):
    from memory_core import MemoryParams
    from ui.settings_dialog import SettingsDialog

    win = make_window(start=False)
    dlg = SettingsDialog(win.ctx, win)
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    assert not dlg.developer_check.isChecked()
    knobs = [dlg.temp_spin, dlg.ctx_spin, dlg.gpu_spin, *dlg.param_edits.values()]
    tab_of = dlg.tabs.indexOf
    assert not dlg.tabs.isTabVisible(tab_of(dlg.embedding_tab))
    dlg.tabs.setCurrentIndex(0)
    assert not dlg.temp_spin.isVisibleTo(dlg) and not dlg.gpu_spin.isVisibleTo(dlg)
    assert dlg.tabs.tabText(2) == "Memory"
    dlg.tabs.setCurrentIndex(2)
    assert dlg.backup_spin.isVisibleTo(dlg) and not dlg.param_edits["tau"].isVisibleTo(dlg)
    dlg.developer_check.setChecked(True)
    assert dlg.param_edits["tau"].isVisibleTo(dlg)
    dlg.tabs.setCurrentIndex(0)
    assert dlg.tabs.isTabVisible(tab_of(dlg.embedding_tab)) and dlg.temp_spin.isVisibleTo(dlg)
    assert set(dlg.param_edits) == set(MemoryParams().flat())  # every memory parameter, each explained
    assert all(w.toolTip().strip() for w in knobs), [w.accessibleName() for w in knobs if not w.toolTip().strip()]
    dlg.instructions_edit.setPlainText("  Answer in French.  ")
    changed = win.dialogs.apply_settings(dlg)
    assert {"ui", "custom_instructions"} <= changed
    s = win.ctx.settings
    assert s.ui.developer and s.custom_instructions == "Answer in French."
