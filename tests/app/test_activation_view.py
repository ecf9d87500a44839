"""The inspector's Activation memory view over a real cache folder: rows, totals, Clear."""

from __future__ import annotations

from app.chat import activation_cache
from tests.ui import test_inspector_fixtures as fixtures

ctx, store, panel_factory = fixtures.ctx, fixtures.store, fixtures.panel_factory  # the inspector tests' fixtures

KEY = {"model": "/models/SmolLM2-135M.gguf", "n_ctx": 2048}


def test_the_view_lists_the_saved_states_and_clear_deletes_them(qtbot, ctx, store, panel_factory):
    cid = store.conversations.create_conversation("Allotment plans")
    cache = activation_cache.open_cache(ctx.paths.data_dir)
    cache.put(KEY, activation_cache.NEW_CHAT, list(range(50)), b"\x01" * 5000)
    hit = cache.put(KEY, activation_cache.chat_slot(cid), list(range(300)), b"\x02" * 30000)
    cache.touch(hit)
    panel = panel_factory()
    view = panel.activation
    panel.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view.summary is not None and view.table.rowCount() == 2)
    cells = {view.table.item(r, 0).text(): view.table.item(r, 1).text() for r in range(2)}
    assert cells == {"Allotment plans": "300", "New chats": "50"}
    assert view.headline.text().startswith("2 saved states, ") and "of 1.0 GiB; 1 hit, 0 misses" in view.headline.text()
    assert view.table.item(0, 4).text() == "just now"  # the chat's state was loaded a moment ago
    assert "2,048-token context" in view.table.item(0, 5).text()

    panel.confirm = lambda *a, **k: True
    view.clear_btn.click()
    qtbot.waitUntil(lambda: view.table.rowCount() == 0)
    assert cache.entries() == []
    assert not view.clear_btn.isEnabled()


def test_the_trace_says_a_reply_started_from_a_saved_state(qtbot, store, panel_factory):
    cid = store.conversations.create_conversation("garden")
    uid = store.conversations.add_message(cid, "user", "What keeps the soil moist?")
    trace = {"query": "What keeps the soil moist?", "included": {}, "prompt_tokens": 1900}
    restored = store.conversations.add_message(
        cid,
        "assistant",
        "Mulch.",
        parent_id=uid,
        meta={"trace": trace, "stats": {"cached_prompt_tokens": 1850, "restored_prompt_tokens": 1840}},
    )
    plain = store.conversations.add_message(
        cid, "assistant", "Mulch.", parent_id=uid, meta={"trace": trace, "stats": {"cached_prompt_tokens": 1850}}
    )
    panel = panel_factory("trace")
    panel.trace.show_message(restored)
    qtbot.waitUntil(lambda: panel.trace.data is not None and panel.trace.data.message_id == restored)
    assert "it started from a saved state (1,840 tokens not processed again)" in panel.trace.header.text()
    panel.trace.show_message(plain)
    qtbot.waitUntil(lambda: panel.trace.data is not None and panel.trace.data.message_id == plain)
    assert "1,850 already processed" in panel.trace.header.text()
    assert "saved state" not in panel.trace.header.text()
