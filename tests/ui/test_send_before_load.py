"""What the user typed is stored before anything waits on the model (issue: a crash while the
model loaded lost the message, the composer having been cleared already)."""

from __future__ import annotations

import threading

from tests.ui.conftest import LOAD_TIMEOUT_MS, TURN_TIMEOUT_MS


def _messages(ctx):
    store = ctx.open_store()
    try:
        return [
            (m.role, m.content, m.status)
            for c in store.conversations.list_conversations()
            for m in store.conversations.list_messages(c.id)
        ]
    finally:
        store.close()


def test_the_message_is_stored_while_the_model_still_loads(make_window, qtbot, chat_model):
    from app.context import AppContext

    ctx = AppContext.create()
    ctx.settings.chat.max_tokens = 8
    gate = threading.Event()

    def slow_load():  # the model "loads" until the test lets it
        assert gate.wait(LOAD_TIMEOUT_MS / 1000)
        return chat_model

    ctx.chat_model = slow_load  # type: ignore[method-assign]
    win = make_window(ctx=ctx, share_model=False, wait=False)
    qtbot.waitUntil(lambda: win.backend.store_ok is not None, timeout=LOAD_TIMEOUT_MS)
    win.composer.set_text("Please remember the parcel code 7731.")
    win.turns.send()
    assert win.composer.text() == ""
    qtbot.waitUntil(lambda: ("user", "Please remember the parcel code 7731.", "pending") in _messages(ctx))
    assert win.backend.model_loading  # stored while the model was still loading
    with qtbot.waitSignal(win.backend.turnFinished, timeout=TURN_TIMEOUT_MS) as done:
        gate.set()
    turn = done.args[0]
    assert turn.result is not None and turn.result.user_message_id == turn.user_message_id
    roles = [(r, s) for r, _c, s in _messages(ctx)]
    assert roles[0] == ("user", "complete") and roles[1][0] == "assistant"


def test_a_model_that_fails_to_load_leaves_the_message_with_a_failed_reply(make_window, qtbot):
    from app.context import AppContext

    ctx = AppContext.create()

    def broken():
        raise RuntimeError("the model file /tmp/broken.gguf is not a GGUF file")

    ctx.chat_model = broken  # type: ignore[method-assign]
    win = make_window(ctx=ctx, share_model=False)
    assert win.backend.model_error
    win.composer.set_text("Hello there.")
    with qtbot.waitSignal(win.backend.turnFinished, timeout=TURN_TIMEOUT_MS) as done:
        win.turns.send()
    turn = done.args[0]
    assert turn.error and "not a GGUF file" in turn.error
    assert turn.user_message_id is not None and turn.failed_reply_id is not None
    assert win.composer.text() == ""  # stored, so not put back to be sent twice
    msgs = _messages(ctx)
    assert msgs[0] == ("user", "Hello there.", "complete")
    assert msgs[1][0] == "assistant" and msgs[1][2] == "failed"
    reply = win.chat_view.last("assistant")
    assert reply.message_id == turn.failed_reply_id  # so it can be regenerated
