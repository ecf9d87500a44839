"""`ChatSession` and `app.operations.chats` on the real store and the bundled model: what both front ends call."""

from __future__ import annotations

import pytest

from app.chat.session import ChatOptions, ChatSession
from app.operations import chats as operations


def test_a_session_creates_its_chat_with_the_first_message_and_keeps_its_agent(store, chat_model):
    session = ChatSession(options=ChatOptions(max_tokens=8), incognito=True)
    assert session.conversation_id is None
    first = operations.send(session, store, chat_model, "Hello, I am Ada.")
    cid = session.conversation_id
    assert cid is not None and first.conversation_id == cid
    assert store.conversations.get_conversation(cid).incognito
    agent = session.agent(store, chat_model)
    assert agent.max_tokens == 8
    second = operations.send(session, store, chat_model, "And you?")
    assert session.agent(store, chat_model) is agent  # one agent for the whole chat
    assert [m.id for m in store.conversations.list_messages(cid)] == [
        first.user_message_id,
        first.assistant_message_id,
        second.user_message_id,
        second.assistant_message_id,
    ]


def test_what_the_agent_learned_about_the_template_outlives_a_turn(store, chat_model):
    session = ChatSession(options=ChatOptions(max_tokens=4))
    agent = session.agent(store, chat_model)
    agent._recall_at_end = False  # as after a template that refused a second system message
    operations.send(session, store, chat_model, "Hi.")
    assert session.agent(store, chat_model)._recall_at_end is False
    other_store_agent = session.agent(object(), chat_model)  # another store (or model): a new agent
    assert other_store_agent is not agent and other_store_agent._recall_at_end is True


def test_options_follow_the_session(store, chat_model):
    session = ChatSession(options=ChatOptions(reply_reserve=300, max_tokens=5))
    agent = session.agent(store, chat_model)
    session.options = ChatOptions(reply_reserve=400, max_tokens=6)
    assert session.agent(store, chat_model) is agent
    assert (agent.reply_reserve, agent.max_tokens) == (400, 6)


def test_regenerate_and_edit_make_siblings(store, chat_model):
    session = ChatSession(options=ChatOptions(max_tokens=6))
    first = operations.send(session, store, chat_model, "Name a colour.")
    again = operations.regenerate(session, store, chat_model, first.assistant_message_id)
    assert again.user_message_id == first.user_message_id
    assert again.assistant_message_id != first.assistant_message_id
    edited = operations.edit(session, store, chat_model, first.user_message_id, "Name a fruit.")
    assert edited.user_message_id != first.user_message_id
    assert store.conversations.get_message(edited.user_message_id).content == "Name a fruit."
    assert (
        store.conversations.get_message(edited.user_message_id).parent_id
        == store.conversations.get_message(first.user_message_id).parent_id
    )


def test_rename_chat_tidies_the_title_and_refuses_nothing(store):
    cid = store.conversations.create_conversation("New chat")
    assert operations.rename_chat(store, cid, "  Trip   to  Rome ") == "Trip to Rome"
    assert store.conversations.get_conversation(cid).title == "Trip to Rome"
    with pytest.raises(ValueError):
        operations.rename_chat(store, cid, "   ")
    with pytest.raises(LookupError):
        operations.rename_chat(store, cid + 1000, "x")


def test_delete_chat_forgets_what_it_taught_only_when_asked(store, chat_model):
    kept, gone = ChatSession(options=ChatOptions(max_tokens=6)), ChatSession(options=ChatOptions(max_tokens=6))
    operations.send(kept, store, chat_model, "Remember that my cat is called Miso.")
    operations.send(gone, store, chat_model, "Remember that my dog is called Rex.")
    store.jobs.run_pending(allow_llm=False)
    assert not operations.chat_taught(store, gone.conversation_id).empty
    assert operations.delete_chat(store, kept.conversation_id) is None
    assert store.conversations.get_conversation(kept.conversation_id) is None
    assert any("Miso" in k.text for k in store.persona.list_knowledge())  # what it taught stays
    forgotten = operations.delete_chat(store, gone.conversation_id, forget=True)
    assert forgotten is not None and not forgotten.empty
    assert store.conversations.get_conversation(gone.conversation_id) is None
    assert not any("Rex" in k.text for k in store.persona.list_knowledge())


def test_forget_chat_keeps_the_chat(store, chat_model):
    session = ChatSession(options=ChatOptions(max_tokens=6))
    operations.send(session, store, chat_model, "Remember that I was born in Lyon.")
    store.jobs.run_pending(allow_llm=False)
    held = operations.chat_taught(store, session.conversation_id)
    assert not held.empty
    gone = operations.forget_chat(store, session.conversation_id)
    assert gone.describe() == held.describe()
    assert operations.chat_taught(store, session.conversation_id).empty
    assert store.conversations.get_conversation(session.conversation_id) is not None


def test_remember_pause_incognito_and_export(store, tmp_path):
    done = operations.remember(store, "I keep bees")
    assert done.kind == "knowledge" and any(k.text == "I keep bees" for k in store.persona.list_knowledge())
    with pytest.raises(ValueError):
        operations.remember(store, "   ")
    trait = operations.remember_a_trait(store, "likes", "jazz")
    assert any(t.value == "jazz" for t in store.persona.list_traits()) and trait.kind == "trait"
    operations.set_memory_paused(store, True)
    assert store.is_paused()
    operations.set_memory_paused(store, False)
    assert not store.is_paused()
    cid = store.conversations.create_conversation("Notes")
    store.conversations.add_message(cid, "user", "hello there")
    operations.set_incognito(store, cid, True)
    operations.set_memory_paused(store, True, cid=cid)
    conv = store.conversations.get_conversation(cid)
    assert conv.incognito and conv.memory_paused and not store.is_paused()
    chat = operations.export_chat(store, cid, tmp_path / "notes.md")
    assert chat.messages == 1 and "hello there" in (tmp_path / "notes.md").read_text()
    memory = operations.export_memory(store, tmp_path / "memory.json")
    assert operations.describe_memory_export(memory).endswith("and 1 fact")
