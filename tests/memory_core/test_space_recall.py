"""Recall scoped to memory spaces (memory_core.recall.space_filter): a chat reads only its spaces, every
stage (dense, keyword, dialogue neighbours, facts) keeps to them, and reading all spaces ranks as one
memory. Real store, real embedder."""

from __future__ import annotations

from memory_core import RetrievalBudget

PERSONAL = [
    ("I adopted a golden retriever puppy named Biscuit.", "Congratulations! Golden retrievers are sweet."),
    ("My sister Laura is getting married in Lisbon next spring.", "How exciting, Lisbon is beautiful."),
    ("I'm allergic to shellfish so I avoid shrimp.", "Good to know, I'll keep that in mind."),
]
WORK = [
    ("The quarterly report for the Biscuit account is due Friday.", "Good luck finishing it on time."),
    ("Our team adopted a new code review process.", "Reviews catch bugs early."),
    ("The client from Lisbon wants the dashboard in blue.", "Blue it is."),
]


def _two_spaces(s, clock):
    """Personal (space 1) and Work (space 2), a chat of pages in each."""
    s.db.execute("INSERT INTO space(id, name, created_at) VALUES (2, 'Work', 0)")
    home, work = s.conversations.create_conversation("home"), s.conversations.create_conversation("work")
    ids = {}
    for cid, rows in ((home, PERSONAL), (work, WORK)):
        for u, a in rows:
            clock.advance(3600)
            ids[u] = s.intake.add_page(cid, u, a)
    with s.transaction():
        s.db.execute("UPDATE page SET space_id = 2 WHERE conversation_id = ?", (work,))
    return home, work, ids


def _ids(r):
    return [h.page.id for h in r.pages]


def test_a_chat_recalls_only_the_spaces_it_reads(open_store, clock):
    s = open_store(stm_capacity=1)
    home, work, ids = _two_spaces(s, clock)
    reader = s.conversations.create_conversation("reader")
    work_ids = {ids[u] for u, _ in WORK}
    home_ids = {ids[u] for u, _ in PERSONAL}
    everything = s.retrieve("Biscuit Lisbon", reader, RetrievalBudget(pages=6))
    assert set(_ids(everything)) & work_ids and set(_ids(everything)) & home_ids
    only_home = s.retrieve("Biscuit Lisbon", reader, RetrievalBudget(pages=6), spaces=frozenset({1}))
    assert _ids(only_home) and set(_ids(only_home)) <= home_ids
    only_work = s.retrieve("Biscuit Lisbon", reader, RetrievalBudget(pages=6), spaces=frozenset({2}))
    assert _ids(only_work) and set(_ids(only_work)) <= work_ids
    # the dog is found in Personal by meaning; from Work it is not there to find
    dog = s.retrieve("What is the name of my dog?", reader, RetrievalBudget(pages=1), spaces=frozenset({1}))
    assert _ids(dog) == [ids[PERSONAL[0][0]]]


def test_reading_every_space_ranks_as_one_memory(open_store, clock):
    s = open_store(stm_capacity=1)
    _home, _work, _ids_by_text = _two_spaces(s, clock)
    reader = s.conversations.create_conversation("reader")
    for q in ("Where is the wedding?", "What is due on Friday?", "Biscuit"):
        plain = s.retrieve(q, reader, RetrievalBudget(pages=5), record_visits=False)
        both = s.retrieve(q, reader, RetrievalBudget(pages=5), record_visits=False, spaces=frozenset({1, 2}))
        assert [(h.page.id, round(h.score, 6)) for h in plain.pages] == [
            (h.page.id, round(h.score, 6)) for h in both.pages
        ]


def test_a_move_between_spaces_is_seen_by_the_next_recall(open_store, clock):
    s = open_store(stm_capacity=1)
    _home, _work, ids = _two_spaces(s, clock)
    reader = s.conversations.create_conversation("reader")
    dog = ids[PERSONAL[0][0]]
    assert dog not in _ids(s.retrieve("my dog Biscuit", reader, RetrievalBudget(pages=6), spaces=frozenset({2})))
    with s.transaction():
        s.db.execute("UPDATE page SET space_id = 2 WHERE id = ?", (dog,))
    assert dog in _ids(s.retrieve("my dog Biscuit", reader, RetrievalBudget(pages=6), spaces=frozenset({2})))
    assert dog not in _ids(s.retrieve("my dog Biscuit", reader, RetrievalBudget(pages=6), spaces=frozenset({1})))


def test_facts_keep_to_the_spaces_read(open_store, clock):
    s = open_store()
    s.db.execute("INSERT INTO space(id, name, created_at) VALUES (2, 'Work', 0)")
    home_fact = s.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    work_fact = s.persona.add_knowledge("user", "The Biscuit account's report is due on Friday.")
    with s.transaction():
        s.db.execute("UPDATE knowledge SET space_id = 2 WHERE id = ?", (work_fact,))
    cid = s.conversations.create_conversation()
    budget = RetrievalBudget(pages=0, knowledge=5)
    assert {h.item.id for h in s.retrieve("Biscuit", cid, budget).knowledge} == {home_fact, work_fact}
    assert {h.item.id for h in s.retrieve("Biscuit", cid, budget, spaces=frozenset({1})).knowledge} == {home_fact}
    assert {h.item.id for h in s.retrieve("Biscuit", cid, budget, spaces=frozenset({2})).knowledge} == {work_fact}
