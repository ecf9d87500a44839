"""A fact asked for in a chat goes to that chat's memory space, "forget that …" in a chat forgets only
what is in the spaces it reads, and the persona merge matches a new fact only with facts of its own space
(so a Work fact never confirms or updates a Personal one). Real store, real embedder."""

from __future__ import annotations

from app.operations.remember import forget_statement, remember_fact, remember_trait

WORDS = "My locker code is 4312"


def test_remember_in_a_space_and_forget_from_a_work_chat_leaves_personal(store):
    work = store.spaces.create("Work")
    home, office = (
        store.conversations.create_conversation("home"),
        store.conversations.create_conversation("office", space_id=work),
    )
    mine = remember_fact(store, WORDS)
    theirs = remember_fact(store, WORDS, space_id=store.spaces.chat_space(office)[0])
    # the same words in two spaces are two facts: the Work one did not confirm the Personal one
    assert mine.outcome == "added" and theirs.outcome == "added" and mine.id != theirs.id
    assert (
        store.persona.get_knowledge(mine.id).space_id == 1 and store.persona.get_knowledge(theirs.id).space_id == work
    )
    p_home = store.intake.add_page(home, f"{WORDS}, the blue one.", "Noted.")
    p_work = store.intake.add_page(office, f"{WORDS}, the blue one.", "Noted.")

    gone = forget_statement(store, WORDS.lower(), spaces=store.spaces.read_set(office))
    assert [kid for kid, _ in gone.facts] == [theirs.id] and gone.pages == [p_work]
    forgotten = store.persona.get_knowledge(theirs.id)
    assert forgotten is None or forgotten.status != "active"
    kept = store.persona.get_knowledge(mine.id)
    assert kept is not None and kept.status == "active" and store.pages.get(p_home) is not None
    assert store.pages.get(p_work) is None
    # a chat reading every space forgets both
    store.spaces.set_chat_space(home, reads="all")
    remember_fact(store, WORDS, space_id=work)
    gone = forget_statement(store, WORDS.lower(), spaces=store.spaces.read_set(home))
    assert len(gone.facts) == 2 and gone.pages == [p_home]


def test_an_update_is_matched_only_within_its_space(store):
    work = store.spaces.create("Work")
    home = remember_fact(store, "I live in Porto")
    moved = remember_fact(store, "I live in Lyon now", space_id=work)
    assert moved.outcome == "added"  # not "updated": the Personal fact is another space's
    assert store.persona.get_knowledge(home.id).text == "I live in Porto"
    again = remember_fact(store, "I live in Lyon now", space_id=work)
    assert again.outcome == "confirmed" and again.id == moved.id
    same_space = remember_fact(store, "I live in Lyon now")
    assert same_space.id == home.id and same_space.outcome == "updated"


def test_a_trait_is_matched_only_within_its_space(store):
    work = store.spaces.create("Work")
    a = remember_trait(store, "likes", "jazz")
    b = remember_trait(store, "likes", "jazz", space_id=work)
    assert a.id != b.id and b.outcome == "added"
    assert remember_trait(store, "likes", "jazz", space_id=work).outcome == "confirmed"
    assert {t.space_id for t in store.persona.list_traits()} == {1, work}


def test_a_chat_remembers_in_its_space_and_forgets_only_what_it_reads(agent, store):
    """Through the chat agent and the bundled model: "Remember that …" in a Work chat keeps the fact in
    Work; "Forget that …" there leaves the Personal copy of the same words."""
    work = store.spaces.create("Work")
    home, office = (
        store.conversations.create_conversation("home"),
        store.conversations.create_conversation("office", space_id=work),
    )
    at_home = agent.send(home, "Remember that my locker code is 4312.").stats["remembered"]
    at_work = agent.send(office, "Remember that my locker code is 4312.").stats["remembered"]
    assert at_work["outcome"] == "added" and at_work["id"] != at_home["id"]
    assert (
        store.persona.get_knowledge(at_work["id"]).space_id == work
        and store.persona.get_knowledge(at_home["id"]).space_id == 1
    )
    forgot = agent.send(office, "Forget that my locker code is 4312").stats["forgot"]
    assert [f[0] for f in forgot["facts"]] == [at_work["id"]]
    kept = store.persona.get_knowledge(at_home["id"])
    assert kept is not None and kept.status == "active"
