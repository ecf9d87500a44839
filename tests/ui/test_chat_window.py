"""The chat window end to end, offscreen, with the real bundled GGUF and the real embedder."""

from __future__ import annotations

from PySide6.QtCore import Qt

from ui.chat_view import MessageWidget


def _assistants(win) -> list[MessageWidget]:
    return [w for w in win.chat_view.messages() if w.role == "assistant"]


def test_typed_message_streams_tokens_into_the_view(make_window, chat, qtbot):
    win = make_window(max_tokens=32)
    assert win.chat_view.is_empty
    appended: list[str] = []
    states: list[tuple[bool, str]] = []

    def spy(widget):
        original = widget.append_text

        def append_text(chunk):
            if chunk:
                appended.append(chunk)
            return original(chunk)

        widget.append_text = append_text

    win.composer.edit.setFocus()
    qtbot.keyClicks(win.composer.edit, "Tell me about the moon.")
    with qtbot.waitSignal(win.backend.turnFinished, timeout=120_000):
        qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)
        assistant = win.chat_view.last()
        states.append((assistant.pending, assistant.status_label.text()))
        spy(assistant)
        assert win.composer.edit.toPlainText() == ""
        assert win.composer.send_button.accessibleName() == "Stop"
    # Before the first token the reply showed a "reading your message" state.
    from ui.window.turns import PENDING_PROMPT

    assert states[0] == (True, PENDING_PROMPT)
    user, assistant = win.chat_view.messages()
    assert user.role == "user" and user.text == "Tell me about the moon."
    turn = win.backend.turn
    assert turn.result.status == "complete", turn.error
    # Tokens arrived in several batches while streaming, and the final text is the stored reply.
    assert len(appended) >= 2, appended
    assert "".join(appended) == turn.result.text == assistant.text
    assert assistant.body.toPlainText().strip()
    assert not assistant.pending
    assert assistant.message_id == turn.result.assistant_message_id
    assert user.message_id == turn.result.user_message_id
    assert win.composer.send_button.accessibleName() == "Send"
    # Status bar: model and tokens/s of the last reply; the conversation appears in the sidebar.
    assert "SmolLM2" in win.status.model_label.text()
    assert "tokens/s" in win.status.speed_label.text()
    chat.wait_db(win)
    assert win.current_id == turn.conversation_id
    assert win.sidebar.ids() == [turn.conversation_id]
    assert win.title_label.text() == "Tell me about the moon."


def test_shift_enter_adds_a_line_and_enter_sends_is_switchable(qtbot):
    from ui.composer import Composer

    composer = Composer()
    qtbot.addWidget(composer)
    composer.show()
    edit = composer.edit
    edit.setFocus()
    qtbot.keyClicks(edit, "one")
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(edit, "two")
    assert edit.toPlainText() == "one\ntwo"
    sent = []
    composer.sendRequested.connect(lambda: sent.append(composer.text()))
    composer.set_enter_sends(False)
    qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert not sent and edit.toPlainText() == "one\ntwo\n"
    qtbot.keyClick(edit, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert sent == ["one\ntwo\n"]


def test_escape_stops_a_generation(make_window, chat, qtbot):
    win = make_window(max_tokens=400)
    win.activateWindow()
    chat.send(win, "Write a very long story about a dragon who collects clocks.", wait=False)
    qtbot.waitUntil(lambda: win.backend.turn.first_token_at is not None, timeout=120_000)
    qtbot.waitUntil(lambda: bool(win.chat_view.last().text), timeout=10_000)
    with qtbot.waitSignal(win.backend.turnFinished, timeout=60_000):
        qtbot.keyClick(win.composer.edit, Qt.Key.Key_Escape)
    result = win.backend.turn.result
    assert result.status == "stopped"
    assert result.stats["completion_tokens"] < 400
    last = win.chat_view.last()
    assert last.status == "stopped" and last.status_label.text() == "Stopped"
    assert last.text == result.text
    # The partial reply is stored with its status.
    stored = win.backend.db(lambda s: s.conversations.get_message(result.assistant_message_id)).result(timeout=30)
    assert stored.status == "stopped" and stored.content == result.text


def test_stop_button_stops_and_the_window_stays_usable(make_window, chat, qtbot):
    win = make_window(max_tokens=400)
    chat.send(win, "Count from one to two hundred in words.", wait=False)
    qtbot.waitUntil(lambda: win.backend.turn.first_token_at is not None, timeout=120_000)
    assert win.composer.send_button.accessibleName() == "Stop"
    with qtbot.waitSignal(win.backend.turnFinished, timeout=60_000):
        qtbot.mouseClick(win.composer.send_button, Qt.MouseButton.LeftButton)
    assert win.backend.turn.result.status == "stopped"
    win.ctx.settings.chat.max_tokens = 8
    turn = chat.send(win, "Thanks.")
    assert turn.result.status == "complete"


def test_regenerate_makes_a_new_sibling_reply(make_window, chat, qtbot):
    win = make_window(max_tokens=16)
    first = chat.send(win, "Name a colour.").result
    reply = win.chat_view.last()
    assert reply.message_id == first.assistant_message_id
    assert reply.regenerate_button.accessibleName() == "Regenerate reply"
    with qtbot.waitSignal(win.backend.turnFinished, timeout=120_000):
        qtbot.mouseClick(reply.regenerate_button, Qt.MouseButton.LeftButton)
    second = win.backend.turn.result
    assert second.status == "complete"
    assert second.assistant_message_id != first.assistant_message_id
    assert second.user_message_id == first.user_message_id
    shown = win.chat_view.messages()
    assert [w.role for w in shown] == ["user", "assistant"]
    assert shown[1].message_id == second.assistant_message_id and shown[1].text == second.text
    children = win.backend.db(lambda s: s.conversations.message_children(first.user_message_id)).result(timeout=30)
    assert [m.id for m in children] == [first.assistant_message_id, second.assistant_message_id]


def test_versions_navigator_switches_between_regenerated_replies(make_window, chat, qtbot):
    """‹ 1/2 › on a regenerated reply: the older version comes back, and a message sent while it
    is shown continues that branch (nothing the user saw is lost or silently re-parented)."""
    win = make_window(max_tokens=12)
    first = chat.send(win, "Name a fruit.").result
    reply = win.chat_view.last()
    assert not reply.branch_label.isVisibleTo(win)  # one version: no navigator
    with qtbot.waitSignal(win.backend.turnFinished, timeout=120_000):
        qtbot.mouseClick(reply.regenerate_button, Qt.MouseButton.LeftButton)
    second = win.backend.turn.result
    newest = win.chat_view.last()
    qtbot.waitUntil(lambda: newest.branch_label.isVisibleTo(win), timeout=10_000)
    assert newest.branch_label.text() == "2/2" and not newest.next_branch.isEnabled()
    qtbot.mouseClick(newest.prev_branch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.chat_view.last().message_id == first.assistant_message_id, timeout=10_000)
    older = win.chat_view.last()
    assert older.text == first.text and older.branch_label.text() == "1/2"
    assert older.next_branch.isEnabled() and not older.prev_branch.isEnabled()
    third = chat.send(win, "And a vegetable?").result
    user = win.backend.db(lambda s: s.conversations.get_message(third.user_message_id)).result(timeout=30)
    assert user.parent_id == first.assistant_message_id  # continues the version on screen
    qtbot.mouseClick(win.chat_view.messages()[1].next_branch, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.chat_view.messages()[1].message_id == second.assistant_message_id, timeout=10_000)
    assert len(win.chat_view.messages()) == 2  # that version has no follow-up


def test_edit_and_resend_branches_from_the_edited_message(make_window, chat, qtbot):
    win = make_window(max_tokens=16)
    first = chat.send(win, "My cat is called Tom.").result
    user = win.chat_view.messages()[0]
    qtbot.mouseClick(user.edit_button, Qt.MouseButton.LeftButton)
    assert win.turns.editing_id == first.user_message_id
    assert win.edit_banner.isVisible()
    assert win.composer.text() == "My cat is called Tom."
    turn = chat.send(win, "My cat is called Felix.")
    assert turn.kind == "edit"
    second = turn.result
    assert second.status == "complete"
    assert not win.edit_banner.isVisible() and win.turns.editing_id is None
    shown = win.chat_view.messages()
    assert [(w.role, w.message_id) for w in shown] == [
        ("user", second.user_message_id),
        ("assistant", second.assistant_message_id),
    ]
    assert shown[0].text == "My cat is called Felix."
    old, new = win.backend.db(
        lambda s: (
            s.conversations.get_message(first.user_message_id),
            s.conversations.get_message(second.user_message_id),
        )
    ).result(timeout=30)
    assert old.content == "My cat is called Tom." and new.parent_id == old.parent_id  # siblings


def test_edit_can_be_cancelled_with_escape(make_window, chat, qtbot):
    win = make_window(max_tokens=8)
    chat.send(win, "Hello.")
    win.activateWindow()
    win.turns.edit_last()
    assert win.edit_banner.isVisible() and win.composer.text() == "Hello."
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Escape)
    assert win.turns.editing_id is None and not win.edit_banner.isVisible() and win.composer.text() == ""


def test_switching_conversations_shows_each_ones_messages(make_window, chat, qtbot):
    win = make_window(max_tokens=8)
    a = chat.send(win, "First conversation here.").result
    win.activateWindow()
    qtbot.keyClick(win.composer.edit, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert win.current_id is None and win.chat_view.is_empty
    b = chat.send(win, "Second conversation here.").result
    assert a.conversation_id != b.conversation_id
    chat.wait_db(win)
    assert win.sidebar.ids() == [b.conversation_id, a.conversation_id]  # newest first
    # Click the older one in the sidebar (under the "Today" heading with the other).
    assert win.sidebar.groups() == ["Today"]
    item = win.sidebar.list.item(2)
    rect = win.sidebar.list.visualItemRect(item)
    qtbot.mouseClick(win.sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(
        lambda: bool(win.chat_view.messages()) and win.chat_view.messages()[0].text == "First conversation here.",
        timeout=30_000,
    )
    assert win.current_id == a.conversation_id
    assert win.title_label.text() == "First conversation here."
    assert [w.message_id for w in win.chat_view.messages()] == [a.user_message_id, a.assistant_message_id]
    # And back; a new message goes to the conversation on screen.
    win.open_conversation(b.conversation_id)
    qtbot.waitUntil(
        lambda: bool(win.chat_view.messages()) and win.chat_view.messages()[0].text == "Second conversation here.",
        timeout=30_000,
    )
    c = chat.send(win, "More in the second.").result
    assert c.conversation_id == b.conversation_id
    assert len(win.chat_view.messages()) == 4


def test_switching_away_while_streaming_keeps_the_reply(make_window, chat, qtbot):
    win = make_window(max_tokens=300)
    win.ctx.settings.chat.max_tokens = 8
    a = chat.send(win, "Short one.").result
    win.ctx.settings.chat.max_tokens = 300
    win.new_chat()
    chat.send(win, "Tell me a long story about the sea.", wait=False)
    turn = win.backend.turn
    qtbot.waitUntil(lambda: turn.first_token_at is not None and turn.conversation_id is not None, timeout=120_000)
    win.open_conversation(a.conversation_id)
    qtbot.waitUntil(
        lambda: [w.message_id for w in win.chat_view.messages()] == [a.user_message_id, a.assistant_message_id],
        timeout=30_000,
    )
    # Back to the conversation that is still streaming: the reply so far is shown and keeps growing.
    win.open_conversation(turn.conversation_id)
    qtbot.waitUntil(
        lambda: (
            len(win.chat_view.messages()) == 2
            and win.chat_view.messages()[0].text == "Tell me a long story about the sea."
        ),
        timeout=30_000,
    )
    if win.backend.busy:
        shown = len(win.chat_view.last().text)
        qtbot.waitUntil(lambda: not win.backend.busy or len(win.chat_view.last().text) > shown, timeout=30_000)
        win.turns.stop()
    turn = chat.wait_turn(win)
    assert turn.result.status in ("complete", "stopped")
    assert [w.role for w in win.chat_view.messages()] == ["user", "assistant"]
    assert win.chat_view.last().text == turn.result.text
    assert win.chat_view.last().message_id == turn.result.assistant_message_id


def test_incognito_conversation_writes_no_memory(make_window, chat, qtbot):
    win = make_window(max_tokens=12)
    assert win.incognito_button.accessibleName() == "Incognito"
    qtbot.mouseClick(win.incognito_button, Qt.MouseButton.LeftButton)
    assert win.current_incognito and win.incognito_banner.isVisible()
    t1 = chat.send(win, "My secret is that I love pineapple pizza.").result
    t2 = chat.send(win, "Remember my secret.").result
    assert t1.status == t2.status == "complete"
    assert t1.trace.get("memory") == "off"
    assert win.backend.scheduler.wait_idle(timeout=60)
    store = win.ctx.open_store()
    try:
        conv = store.conversations.get_conversation(t1.conversation_id)
        assert conv.incognito
        assert store.pages.count_pages() == 0
        assert store.segments.count_segments() == 0
        assert store.persona.list_knowledge() == []
        assert store.persona.list_traits() == []
        assert [j for j in store.jobs.list_jobs() if j.kind == "add_page"] == []
    finally:
        store.close()
    # The same turn in an ordinary conversation does write memory (so the check above can fail).
    win.new_chat()
    assert not win.incognito_button.isChecked() and not win.incognito_banner.isVisible()
    t3 = chat.send(win, "My hobby is rowing.").result
    assert win.backend.scheduler.wait_idle(timeout=60)
    store = win.ctx.open_store()
    try:
        assert [j.kind for j in store.jobs.list_jobs()] == ["add_page"]
        assert store.pages.count_pages() == 1
        assert store.pages.list_pages()[0].conversation_id == t3.conversation_id
    finally:
        store.close()


def test_incognito_toggle_on_an_existing_conversation_is_saved(make_window, chat, qtbot):
    win = make_window(max_tokens=8)
    t = chat.send(win, "Hi.").result
    win.menus.incognito_action.trigger()
    assert win.incognito_button.isChecked()
    chat.wait_db(win)
    conv = win.backend.db(lambda s: s.conversations.get_conversation(t.conversation_id)).result(timeout=30)
    assert conv.incognito
    win.new_chat()
    win.open_conversation(t.conversation_id)
    qtbot.waitUntil(lambda: len(win.chat_view.messages()) == 2, timeout=30_000)
    assert win.incognito_button.isChecked() and win.incognito_banner.isVisible()


def test_an_empty_reply_says_so(qtbot):
    from ui.chat_view import MessageWidget

    empty = MessageWidget("assistant", "", status="complete", message_id=3)
    qtbot.addWidget(empty)
    assert not empty.error_label.isHidden() and "empty reply" in empty.error_label.text()
    streaming = MessageWidget("assistant", "", status="streaming", message_id=4)
    qtbot.addWidget(streaming)
    assert streaming.error_label.isHidden()
    full = MessageWidget("assistant", "Hello!", status="complete", message_id=5)
    qtbot.addWidget(full)
    assert full.error_label.isHidden()


def test_a_reply_cut_short_says_why(qtbot):
    from ui.chat_view import MessageWidget

    stats = {"completion_tokens": 41, "tokens_per_s": 60.0, "time_to_first_token_s": 0.3}
    looped = MessageWidget("assistant", "The sea is calm tonight.", status="streaming", message_id=6)
    qtbot.addWidget(looped)
    looped.set_final("complete", stats={**stats, "finish_reason": "repetition"})
    assert looped.stats_label.text().endswith("stopped: the model began repeating itself")
    long = MessageWidget(
        "assistant",
        "Once upon a time",
        status="complete",
        message_id=7,
        meta={"stats": {**stats, "finish_reason": "length"}},
    )  # as loaded from the database
    qtbot.addWidget(long)
    assert "cut off at the reply length limit" in long.stats_label.text()
    done = MessageWidget(
        "assistant", "Rome.", status="complete", message_id=8, meta={"stats": {**stats, "finish_reason": "stop"}}
    )
    qtbot.addWidget(done)
    assert done.stats_label.text() == "41 tokens · 60 tok/s · first token 0.3 s"


def test_asking_to_remember_keeps_the_fact_and_the_reply_links_to_it(make_window, chat, qtbot, monkeypatch):
    """ "Remember that …" keeps the fact at once; the reply's footer link shows it in the inspector;
    Memory ▸ Remember something… opens Persona ▸ Add…."""
    from ui.inspector.panel import InspectorPanel

    win = make_window(max_tokens=8)
    turn = chat.send(win, "Remember that I keep bees on my roof.")
    kept = turn.result.stats["remembered"]
    assert (kept["kind"], kept["outcome"], kept["text"]) == ("knowledge", "added", "I keep bees on my roof")
    reply = _assistants(win)[-1]
    assert f">remembered as fact {kept['id']}</a>" in reply.stats_label.text()
    reply.stats_label.linkActivated.emit(f"remembered:knowledge:{kept['id']}")
    panel = win.inspector
    try:
        qtbot.waitUntil(
            lambda: panel.persona.item is not None and panel.persona.item[1].id == kept["id"], timeout=20_000
        )
        assert panel.tabs.currentWidget() is panel.persona
        monkeypatch.setattr(
            InspectorPanel,
            "ask_new_item",
            lambda self, dims: {"kind": "trait", "dimension": "hobbies", "value": "beekeeping", "pin": False},
        )
        win.menus.remember_action.trigger()
        qtbot.waitUntil(lambda: any(t.value == "beekeeping" for t in panel.persona.traits.traits()), timeout=20_000)
        assert panel.status_label.text().startswith("Remembered as trait")
    finally:
        panel.shutdown()
