"""Forgetting what memory learned from one chat (app.operations.chat_memory), through the real agent, the
bundled GGUF, the real embedder and a real store file."""

from __future__ import annotations

from app.operations.chat_memory import chat_memory, forget_chat_memory


def _send(agent, store, cid, text):
    result = agent.send(cid, text)
    store.jobs.run_pending(allow_llm=False)
    return result


def test_forgetting_a_chat_takes_its_pages_and_facts_and_leaves_the_rest(agent, store):
    keep = agent.new_conversation()
    _send(agent, store, keep, "My brother Tomas repairs old clocks in Vienna.")
    kept_fact = store.persona.add_knowledge("user", "I play the cello on Sundays.")  # added in the inspector: no chat

    cid = agent.new_conversation()
    added = _send(agent, store, cid, "Remember that my locker code is 4312.").stats["remembered"]
    _send(agent, store, cid, "Remember that I live in Porto.")
    for text in (
        "The hotel in Krakow was noisy last night.",
        "Our flight home is on Thursday morning.",
        "We tried pierogi with mushrooms for lunch.",
        "I bought a wooden chess set at the market.",
    ):
        _send(agent, store, cid, text)
    other = agent.new_conversation()
    moved = _send(agent, store, other, "Remember that I live in Lyon now.").stats["remembered"]
    assert moved["outcome"] == "updated" and moved["version"] == 2
    # back in the chat to forget, the move is taken back: the fact reads Lyon from `other`'s message
    wrong = agent.new_conversation()
    undone = _send(agent, store, wrong, "Remember that I live in Madrid now.").stats["remembered"]
    assert undone["outcome"] == "updated" and undone["id"] == moved["id"] and undone["version"] == 3

    preview = chat_memory(store, cid)
    assert len(preview.memory.page_ids) == 6 and store.pages.get(preview.memory.page_ids[0]) is not None
    assert [(r.id, r.outcome) for r in preview.remembered] == [(added["id"], "added")]  # Porto was changed since
    assert preview.describe().startswith("6 pages") and "1 fact it asked to remember" in preview.describe()

    gone = forget_chat_memory(store, cid)
    assert store.pages.count_pages(conversation_id=cid) == 0
    assert store.persona.get_knowledge(added["id"]) is None  # the locker code is gone
    assert store.persona.get_knowledge(moved["id"]).text == "I live in Madrid now"  # confirmed elsewhere since: stays
    assert store.persona.get_knowledge(kept_fact) is not None
    assert store.pages.count_pages(conversation_id=keep) == 1 and len(store.conversations.list_messages(cid)) == 12
    assert sorted(gone.memory.page_ids) == sorted(preview.memory.page_ids)
    hits = store.retrieve("locker code hotel Krakow pierogi", None)
    assert all(h.page.conversation_id != cid for h in hits.pages)
    assert all("4312" not in h.item.text for h in hits.knowledge)

    # a chat whose message *changed* a fact: forgetting it puts the earlier text back
    back = forget_chat_memory(store, wrong)
    assert [(r.id, r.outcome) for r in back.remembered] == [(moved["id"], "updated")]
    k = store.persona.get_knowledge(moved["id"])
    assert (k.text, k.version) == ("I live in Lyon now", 2)
    assert "1 fact it changed" in back.describe()
    assert chat_memory(store, wrong).empty
    assert store.check_integrity() == []
