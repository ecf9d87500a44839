"""Rule "others" (memory_core.recall.ranking.weigh_others, decision 0020): for a question about the user ("Where
do I live?") a page of a conversation between other people (`meta["people"]["me"]` None) weighs
OTHERS_WEIGHT, so the user's own words rank first on like evidence; questions about the dialogue's
people, and dialogues the user is in, rank as before."""

from __future__ import annotations

import pytest

from memory_core.recall.ranking import OTHERS_WEIGHT, SWITCHABLE, first_person

T = 1_690_000_000.0
STRANGERS = [
    ("Grace: I live near the river in Dublin now, and I love living there.", "Omar: Living by water sounds lovely."),
    ("Grace: We moved to Dublin a few years ago; living downtown suits me.", "Omar: I live in a quiet suburb."),
    ("Omar: My new flat is on a hill, the best place I've lived in.", "Grace: Where do you live exactly?"),
    ("Grace: I started a new job at the gallery.", "Omar: I took my dog Max to the vet."),
]


@pytest.fixture
def open_store(tmp_path, embedder):
    """A store with the word-by-word match, as the app's (the rule weighs whole scores)."""
    from memory_core import MemoryParams, MemoryStore

    opened = []

    def _open(**params):
        s = MemoryStore.open(
            tmp_path / f"m{len(opened)}.db",
            embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
            params=MemoryParams.from_flat(**params),
            embed_tokens=embedder.embed_with_tokens,
        )
        opened.append(s)
        return s

    yield _open
    for s in opened:
        s.close()


def _memory(open_store, me: str | None = None):
    s = open_store(stm_capacity=2)
    people = {"user_side": "Grace", "assistant_side": "Omar", "me": me}
    cid = s.conversations.create_conversation("Grace & Omar", created_at=T, source="locomo", external_id="g-1")
    s.intake.add_pages(
        cid,
        [
            {"user_text": u, "assistant_text": a, "timestamp": T + i * 60, "meta": {"people": people}}
            for i, (u, a) in enumerate(STRANGERS)
        ],
    )
    own = s.conversations.create_conversation("chat", created_at=T + 86400)
    lisbon = s.intake.add_page(
        own, "I moved to Lisbon last year.", "Lisbon is lovely! How are you settling in?", timestamp=T + 86400
    )
    s.intake.add_page(
        own, "Can you give me a risotto recipe?", "Toast the rice, add stock slowly.", timestamp=T + 86500
    )
    s.jobs.run_pending(allow_llm=False)
    return s, lisbon


def _ids(s, q, off=()):
    return [h.page.id for h in s.retrieve(q, None, record_visits=False, off=off).pages]


def test_the_users_own_words_rank_first_for_a_question_about_them(open_store):
    s, lisbon = _memory(open_store)
    before = _ids(s, "Where do I live?", off=("others",))
    assert before[0] != lisbon  # the strangers' "live" wins without the rule
    hits = s.retrieve("Where do I live?", None, record_visits=False).pages
    assert hits[0].page.id == lisbon
    theirs = [h for h in hits if h.page.conversation_id != hits[0].page.conversation_id]
    assert theirs and all("said by other people" in h.reason for h in theirs)
    # still recalled, only lower: a stranger's score is OTHERS_WEIGHT of what it was
    off = {h.page.id: h.score for h in s.retrieve("Where do I live?", None, record_visits=False, off=("others",)).pages}
    for h in theirs:
        if h.page.id in off:
            assert h.score == pytest.approx(off[h.page.id] * OTHERS_WEIGHT)


@pytest.mark.parametrize(
    "question",
    ["Where does Grace live?", "What did Grace tell me about living by the river?"],
)
def test_a_question_about_the_dialogues_people_ranks_as_before(open_store, question):
    """No first person, or the question names one of them: the rule leaves the ranking alone."""
    s, _ = _memory(open_store)
    hits = s.retrieve(question, None, record_visits=False).pages
    assert [h.page.id for h in hits] == _ids(s, question, off=("others",))
    assert not any("said by other people" in h.reason for h in hits)
    assert hits[0].page.user_text.startswith(("Grace:", "Omar:"))


def test_a_dialogue_the_user_is_in_is_theirs(open_store):
    s, _ = _memory(open_store, me="Grace")
    assert _ids(s, "Where do I live?") == _ids(s, "Where do I live?", off=("others",))


def test_first_person_and_the_switch():
    assert "others" in SWITCHABLE
    for q in ("Where do I live?", "what's my dog called", "Where are we going?", "I’m lost: where's my car?"):
        assert first_person(q), q
    for q in ("When did Caroline move?", "Which US cities did John visit?", "Is Lisbon big?"):
        assert not first_person(q), q
