"""Issue 31 item 4 and issue 35 (whose memory): facts stated as facts, updated when contradicted, counted
when confirmed, capped without losing what the user pinned or wrote, quoted only when the message needs
them; facts about the other people of an imported dialogue kept as theirs."""

from __future__ import annotations

import pytest

from memory_core import MemoryParams, MemoryStore
from tests.memory_core.conftest import Clock

USER_FACTS = [
    "The user has a beagle called Rex.",
    "The user works as a nurse at the city hospital.",
    "The user is training for the Lisbon marathon in April.",
]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fresh(tmp_path, embedder, clock):
    def open_(**flat):
        return MemoryStore.open(
            tmp_path / "m.sqlite3",
            embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
            params=MemoryParams.from_flat(**flat),
            clock=clock,
        )

    return open_


def test_hi_in_a_fresh_chat_quotes_no_fact_and_a_question_quotes_its_fact(tmp_path, embedder, chat_model):
    """The prompt as the agent builds it (real store, embedder and model): small talk quotes none of the
    facts retrieval brings (it brought five to every prompt); a question quotes the fact it is about."""
    from app.chat.agent import ChatAgent

    store = MemoryStore.open(
        tmp_path / "hi.sqlite3",
        embedder.embed,
        embed_model_id=embedder.model_id,
        dim=embedder.dim,
        params=MemoryParams.from_flat(stm_capacity=3),
    )
    try:
        for f in USER_FACTS:
            store.persona.add_knowledge("user", f)
        agent = ChatAgent(store, chat_model, reply_reserve=256, max_tokens=8)
        hi = agent.send(agent.new_conversation(), "Hi!")
        assert hi.trace["knowledge"], "retrieval brought no fact: the test would say nothing"
        assert hi.trace["included"]["knowledge"] == []
        assert not any("Known facts" in m["content"] for m in hi.prompt.messages)
        asked = agent.send(agent.new_conversation(), "What is my dog called?")
        rex = next(k.id for k in store.persona.list_knowledge("user") if "beagle" in k.text)
        assert rex in asked.trace["included"]["knowledge"]
    finally:
        store.close()


def _people(me):
    return {"people": {"user_side": "Caroline", "assistant_side": "Melanie", "me": me}}


def _page(store, cid, user, assistant, meta=None):
    pid = store.intake.add_page(cid, user, assistant, meta=meta or {})
    return pid


def test_facts_about_other_people_are_theirs_and_named(fresh):
    """Pages built by hand with the importer's contract (page.meta["people"]): in a dialogue of other
    people both speakers' facts are about them, by name; with `me` the user's side is the user's; own
    chats (no "people") are the user's. Person facts stay out of the user's facts."""
    store = fresh(stm_capacity=0, tau=0.5)
    try:
        cid = store.conversations.create_conversation()
        _page(
            store,
            cid,
            "Caroline: I moved to Sweden four years ago with my family.",
            "Melanie: I ran a charity race for mental health last Saturday.",
            _people(None),
        )
        _page(
            store,
            cid,
            "Caroline: I joined a pottery class at the community center.",
            "Melanie: I painted a lake sunrise with my kids yesterday.",
            _people("Melanie"),
        )
        own = store.conversations.create_conversation()
        _page(store, own, "I adopted a beagle called Rex last spring.", "Lovely, Rex is a great name.")
        store.jobs.run_pending(allow_llm=False)
        mine = [k.text for k in store.persona.list_knowledge("user")]
        theirs = store.persona.list_knowledge("person")
        assert "The user adopted a beagle called Rex last spring." in mine
        assert "The user painted a lake sunrise with their kids yesterday." in mine  # me = Melanie
        assert {(k.subject, k.text) for k in theirs} >= {
            ("Caroline", "Caroline moved to Sweden four years ago with their family."),
            ("Melanie", "Melanie ran a charity race for mental health last Saturday."),
            ("Caroline", "Caroline joined a pottery class at the community center."),
        }
        assert not any("Caroline" in t or "Melanie" in t for t in mine)
        assert all(k.owner == "person" for k in theirs)
        # no trait from a stranger's side: "location: Sweden" would be the user's profile
        assert not any(t.value == "Sweden" for t in store.persona.list_traits())
        # the Saved memories view lists the user's own facts only
        from ui.inspector.memories import saved_memories

        listed = [m.text for m in saved_memories(store) if m.kind == "knowledge"]
        assert sorted(listed) == sorted(mine)
    finally:
        store.close()


def test_an_llm_free_fact_is_updated_by_a_contradicting_one_and_confirmed_without_a_version(fresh, clock):
    store = fresh(stm_capacity=0, tau=0.5)
    try:
        cid = store.conversations.create_conversation()
        _page(store, cid, "I live in Porto with my partner.", "Porto is lovely.")
        store.jobs.run_pending(allow_llm=False)
        home = next(k for k in store.persona.list_knowledge("user") if "Porto" in k.text)
        assert home.text == "The user lives in Porto with their partner."
        clock.advance(60)
        _page(store, cid, "I live in Porto with my partner.", "You said so, yes.")
        store.jobs.run_pending(allow_llm=False)
        again = store.persona.get_knowledge(home.id)
        assert (again.version, again.confirmations) == (1, 1)
        clock.advance(60)
        _page(store, cid, "I moved to Lyon last month for a new job.", "Exciting!")
        store.jobs.run_pending(allow_llm=False)
        moved = store.persona.get_knowledge(home.id)
        assert moved.text == "The user moved to Lyon last month for a new job." and moved.version == 2
        assert [v.text for v in store.persona.item_versions("knowledge", home.id)] == [
            "The user lives in Porto with their partner.",
            "The user moved to Lyon last month for a new job.",
        ]
        assert not any("Porto" in k.text for k in store.persona.list_knowledge("user"))
    finally:
        store.close()


def test_knowledge_is_capped_by_setting_aside_the_longest_unused_never_a_pinned_or_written_fact(fresh, clock):
    store = fresh(stm_capacity=0, tau=0.5, max_knowledge=3)
    try:
        written = store.persona.add_knowledge("user", "The user is allergic to peanuts.")
        cid = store.conversations.create_conversation()
        said = [
            "I adopted a beagle called Rex last spring.",
            "I play the violin in a community orchestra.",
            "I am training for the Lisbon marathon in April.",
            "I grow tomatoes and basil on my balcony.",
        ]
        first = None
        for i, s in enumerate(said):
            clock.advance(60)
            _page(store, cid, s, "Nice.")
            store.jobs.run_pending(allow_llm=False)
            if i == 0:
                first = next(k.id for k in store.persona.list_knowledge("user") if "beagle" in k.text)
                store.curation.pin("knowledge", first)
        active = store.persona.list_knowledge("user")
        assert len(active) == 3
        assert {written, first} <= {k.id for k in active}
        archived = [k for k in store.persona.list_knowledge("user", include_archived=True) if k.status == "archived"]
        assert sorted(k.text for k in archived) == [
            "The user is training for the Lisbon marathon in April.",
            "The user plays the violin in a community orchestra.",
        ]
        events = store.event_log.events(kinds=["knowledge_archived"])
        assert sorted(e.item_id for e in events) == sorted(k.id for k in archived)
    finally:
        store.close()


def test_the_llm_path_asks_about_the_people_by_name_and_keeps_their_facts_theirs():
    """A dialogue of two other people: the model is asked about Caroline and Melanie by name, and what it
    says about either is about her, whatever subject it wrote ("The user …" included); no trait."""
    from memory_core.persona.extract import PageText, llm_extract

    asked = []

    def llm(messages, schema):
        asked.append(messages[0]["content"])
        return {
            "traits": [{"dimension": "hometown", "value": "Sweden", "confidence": 0.8}],
            "user_knowledge": ["The user moved from Sweden four years ago"],
            "assistant_knowledge": ["Melanie ran a charity race for mental health"],
        }

    page = PageText(
        1,
        "Caroline: I moved from Sweden four years ago.",
        "Melanie: I ran a charity race for mental health.",
        0.0,
        {"user_side": "Caroline", "assistant_side": "Melanie", "me": None},
    )
    out = llm_extract(llm, [page], "a-model")
    assert "Caroline" in asked[0] and "Melanie" in asked[0]
    assert out.traits == []
    assert [(f.owner, f.text) for f in out.facts] == [
        ("person", "Caroline moved from Sweden four years ago"),
        ("person", "Melanie ran a charity race for mental health"),
    ]
    own = PageText(2, "I moved from Sweden four years ago.", "Nice.", 0.0)
    mine = llm_extract(llm, [own], "a-model")
    assert ("user", "The user moved from Sweden four years ago") in [(f.owner, f.text) for f in mine.facts]
