"""Activation memory through the agent and the CLI: a warm saves the chat's prompt beginning and the
new-chat one, the first reply after a restart starts from it and says so, incognito chats and
forgotten memory leave none behind, `mnemo memory activation` lists and clears."""

from __future__ import annotations

import pytest

from app.chat import activation_cache
from app.chat.agent import ChatAgent
from app.cli import main as cli_main
from models.llama_cpp_backend import LlamaCppChatModel


def _fresh_model(data_dir) -> LlamaCppChatModel:
    """The model as the app loads it after a restart: nothing in its KV cache, the profile's cache on."""
    model = LlamaCppChatModel(n_ctx=2048, max_tokens=12, seed=3, temperature=0.0)
    activation_cache.attach(model, data_dir)
    return model


def _garden_chat(store) -> int:
    cid = store.conversations.create_conversation("garden")
    for i in range(3):
        store.conversations.add_message(cid, "user", f"Question {i}: how do gardens handle drought in region {i}?")
        store.conversations.add_message(cid, "assistant", "Mulch, deep watering and shade. " * 3)
    return cid


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


def test_the_first_reply_after_a_restart_starts_from_the_saved_state_and_says_so(store, data_dir):
    cid = _garden_chat(store)
    store.persona.add_trait("hobby", "gardening")  # the persona is part of the stable prefix
    model = _fresh_model(data_dir)
    try:
        warmed = ChatAgent(store, model, max_tokens=12).warm(cid)
    finally:
        model.close()
    cache = activation_cache.open_cache(data_dir)
    rows = {r.slot: r for r in activation_cache.summary(cache, store).rows}
    assert set(rows) == {"new-chat", f"chat:{cid}"}
    assert rows[f"chat:{cid}"].tokens == warmed and rows[f"chat:{cid}"].chat == "garden"
    assert rows["new-chat"].chat == "New chats" and 0 < rows["new-chat"].tokens < warmed

    model = _fresh_model(data_dir)  # the restart
    try:
        result = ChatAgent(store, model, max_tokens=12).send(cid, "What keeps the soil moist?")
    finally:
        model.close()
    assert result.status == "complete"
    assert result.stats["restored_prompt_tokens"] == warmed == result.stats["cached_prompt_tokens"]
    saved = store.conversations.get_message(result.assistant_message_id).meta["stats"]
    assert saved["restored_prompt_tokens"] == warmed  # what the trace view shows
    after = activation_cache.summary(cache, store)
    assert after.hits == 1 and {r.slot: r.hits for r in after.rows}[f"chat:{cid}"] == 1


def test_an_incognito_chat_keeps_no_state(store, data_dir):
    cid = store.conversations.create_conversation("secret", incognito=True)
    store.conversations.add_message(cid, "user", "Something I would rather not keep anywhere, about my plans.")
    store.conversations.add_message(cid, "assistant", "Understood. " * 10)
    model = _fresh_model(data_dir)
    try:
        assert ChatAgent(store, model).warm(cid) > 0
    finally:
        model.close()
    assert activation_cache.open_cache(data_dir).entries() == []


def test_states_built_while_forgotten_memory_existed_are_deleted(store, data_dir):
    cid = _garden_chat(store)
    trait = store.persona.add_trait("employer", "works at the Acme bakery")
    model = _fresh_model(data_dir)
    try:
        agent = ChatAgent(store, model)
        agent.warm(cid)
        cache = activation_cache.open_cache(data_dir)
        assert len(cache.entries()) == 2
        store.curation.forget("trait", [trait])
        assert activation_cache.summary(cache, store).rows == []  # they held the trait's text
        agent.warm(cid)  # built again, without it
    finally:
        model.close()
    assert len(cache.entries()) == 2
    assert activation_cache.purge_forgotten(cache, store.db.purge.spans()) == 0


def test_mnemo_memory_activation_lists_and_clears(mnemo_dirs, capsys):
    cache = activation_cache.open_cache(mnemo_dirs["data"])
    key = {"model": "/models/SmolLM2.gguf", "n_ctx": 2048}
    cache.put(key, "new-chat", list(range(40)), b"\x01" * 4000)
    cache.put(key, "chat:7", list(range(90)), b"\x02" * 9000)
    assert cli_main(["memory", "activation", "list"]) == 0
    out = capsys.readouterr().out
    assert "New chats" in out and "(deleted chat)" in out and "SmolLM2.gguf" in out
    assert "2 saved states" in out and "of 1.0 GiB" in out
    assert cli_main(["memory", "activation", "clear"]) == 0
    assert "Deleted 2 saved states" in capsys.readouterr().out
    assert cache.entries() == []
