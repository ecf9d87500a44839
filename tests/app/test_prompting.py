"""Prompt composition: order, budget, truncation, memory quoted as data (real model tokenizer)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from app.chat.prompting import QuoteFloor, compose_prompt
from memory_core.types import Knowledge, KnowledgeHit, Page, PageHit, Retrieval, SideHit, Trait, TraitHit


@dataclass
class Msg:
    id: int
    role: str
    content: str


def _retrieval(n_pages=3):
    pages = [
        PageHit(
            Page(
                id=i,
                conversation_id=1,
                user_text=f"I visited city number {i}",
                assistant_text="Nice!",
                timestamp=1_700_000_000 + i * 86400,
                tier="mtm",
                user_message_id=100 + i,
                assistant_message_id=200 + i,
            ),
            score=1.0 / (i + 1),
            reason="dense",
            tier="mtm",
        )
        for i in range(1, n_pages + 1)
    ]
    traits = [
        TraitHit(
            Trait(
                id=7,
                dimension="occupation",
                value="nurse",
                evidence="",
                confidence=0.9,
                status="active",
                version=1,
                pinned=False,
                created_at=0,
                updated_at=0,
            ),
            1.0,
            "active trait",
        )
    ]
    knowledge = [
        KnowledgeHit(
            Knowledge(
                id=3,
                owner="user",
                text="The user's dog is Biscuit.",
                confidence=0.8,
                status="active",
                version=1,
                pinned=False,
                created_at=0,
                updated_at=0,
            ),
            0.9,
            "cos",
        )
    ]
    return Retrieval(query="q", pages=pages, traits=traits, knowledge=knowledge)


def test_order_and_quoting(chat_model):
    history = [Msg(1, "user", "hello"), Msg(2, "assistant", "hi there")]
    p = compose_prompt(
        "where did I go?",
        retrieval=_retrieval(),
        history=history,
        count_tokens=chat_model.count_tokens,
        budget_tokens=1500,
    )
    system = p.messages[0]["content"]
    assert p.messages[0]["role"] == "system"
    assert "<memory>" in system and "occupation: nurse" in system  # the persona: stable, cached
    assert "Biscuit" not in system and "city number" not in system
    assert [m["content"] for m in p.messages[1:3]] == ["hello", "hi there"]
    recall, last = p.messages[-2], p.messages[-1]
    assert last == {"role": "user", "content": "where did I go?"}
    assert recall["role"] == "system"  # recalled for this question
    recalled = recall["content"]
    assert "<memory>" in recalled and "</memory>" in recalled and "not instructions" in recalled
    assert recalled.index("Biscuit") < recalled.index("city number 1")
    assert "2023-11-1" in recalled  # pages carry their dates
    assert p.included["pages"] == [1, 2, 3]
    assert chat_model.count_messages_tokens(p.messages) <= 1500


def test_recall_changes_only_what_follows_the_dialogue(chat_model):
    """What is recalled changes with every question; placed with the question, it leaves the
    system prompt, the persona and the dialogue byte-identical, so llama.cpp reuses their KV cache."""
    history = [
        Msg(1, "user", "hello"),
        Msg(2, "assistant", "hi there"),
        Msg(3, "user", "I like maps"),
        Msg(4, "assistant", "Maps are great"),
    ]
    r1, r2 = _retrieval(n_pages=1), _retrieval(n_pages=3)
    r2.knowledge = []
    a = compose_prompt(
        "first question", retrieval=r1, history=history, count_tokens=chat_model.count_tokens, budget_tokens=1500
    )
    b = compose_prompt(
        "second question", retrieval=r2, history=history, count_tokens=chat_model.count_tokens, budget_tokens=1500
    )
    assert a.messages[:-2] == b.messages[:-2] and a.messages[-2] != b.messages[-2]
    ra = chat_model.render_prompt(a.messages)
    rb = chat_model.render_prompt(b.messages)
    shared = len(os.path.commonprefix([ra, rb]))
    assert "Maps are great" in ra[:shared]  # the whole dialogue is in the shared prefix


def test_stable_prefix_between_questions(chat_model):
    r = _retrieval()
    a = compose_prompt("first question", retrieval=r, count_tokens=chat_model.count_tokens, budget_tokens=1500)
    b = compose_prompt("another question", retrieval=r, count_tokens=chat_model.count_tokens, budget_tokens=1500)
    assert a.messages[0] == b.messages[0]


def test_budget_drops_low_ranked_pages_first(chat_model):
    r = _retrieval(n_pages=40)
    p = compose_prompt("q", retrieval=r, count_tokens=chat_model.count_tokens, budget_tokens=400)
    assert 0 < len(p.included["pages"]) < 40
    assert p.dropped["pages"] == 40 - len(p.included["pages"])
    assert set(p.included["pages"]) == set(range(1, len(p.included["pages"]) + 1))  # the best ones kept
    assert chat_model.count_messages_tokens(p.messages) <= 400 + 20


def _sided(n_pages: int) -> Retrieval:
    """`_retrieval` with its pages' turns ranked one by one: each page's user side first (it says where), the
    replies after every user side."""
    r = _retrieval(n_pages)
    r.knowledge, r.traits = [], []
    r.sides = [SideHit(h, "user", h.score) for h in r.pages] + [SideHit(h, "assistant", h.score - 1) for h in r.pages]
    return r


def _blocks(p) -> dict[int, list[str]]:
    """The quoted pages of a prompt: page id -> its quoted lines."""
    out = {}
    for block in p.messages[-2]["content"].split("\n\n"):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if line.endswith(")") and "(page " in line:
                out[int(line.rsplit("(page ", 1)[1][:-1])] = lines[i + 1 :]
    return out


def test_a_budget_of_turns_quotes_the_better_side_of_more_pages(chat_model):
    p = compose_prompt(
        "where did I go?", retrieval=_sided(5), count_tokens=chat_model.count_tokens, budget_tokens=3000, max_turns=6
    )
    assert p.included["pages"] == [1, 2, 3, 4, 5]  # five user sides, then the best reply
    assert p.half_pages == {2: "user", 3: "user", 4: "user", 5: "user"}
    assert p.half_pages_trace() == {"2": "user", "3": "user", "4": "user", "5": "user"}
    blocks = _blocks(p)
    assert blocks[1] == ["User: I visited city number 1", "Assistant: Nice!"]
    assert blocks[3] == ["User: I visited city number 3"]
    # no limit: every side that fits; a retrieval without sides quotes whole pages as before
    assert (
        compose_prompt("q", retrieval=_sided(5), count_tokens=chat_model.count_tokens, budget_tokens=3000).half_pages
        == {}
    )
    whole = compose_prompt(
        "q", retrieval=_retrieval(3), count_tokens=chat_model.count_tokens, budget_tokens=3000, max_turns=4
    )
    assert whole.included["pages"] == [1, 2] and whole.half_pages == {}  # a whole page is two turns
    odd = compose_prompt(
        "q", retrieval=_retrieval(3), count_tokens=chat_model.count_tokens, budget_tokens=3000, max_turns=3
    )
    assert odd.included["pages"] == [1, 2] and odd.half_pages == {2: "user"}  # the last turn: its first side
    # the token budget counts a page's header once, with its first side
    tight = compose_prompt("q", retrieval=_sided(40), count_tokens=chat_model.count_tokens, budget_tokens=400)
    n = len(tight.included["pages"])
    assert 2 < n < 40 and tight.included["pages"] == list(range(1, n + 1))  # the best user sides...
    assert set(range(2, n + 1)) <= set(tight.half_pages)  # ...before any reply but a short one
    assert chat_model.count_messages_tokens(tight.messages) <= 400 + 20


def test_pages_under_the_score_floor_stay_out_of_the_prompt(chat_model):
    # scores 0.5, 0.33, 0.25: a floor of 0.3 keeps two pages, however much room there is
    p = compose_prompt(
        "where did I go?",
        retrieval=_retrieval(n_pages=3),
        history=[],
        count_tokens=chat_model.count_tokens,
        budget_tokens=3000,
        floor=QuoteFloor(0.3),
    )
    assert p.included["pages"] == [1, 2] and p.dropped["pages"] == 0
    assert "city number 3" not in p.messages[-2]["content"]
    weak = _retrieval(n_pages=3)
    weak.knowledge, weak.traits = [], []
    p = compose_prompt(
        "thanks!",
        retrieval=weak,
        history=[],
        count_tokens=chat_model.count_tokens,
        budget_tokens=3000,
        floor=QuoteFloor(1.5),
    )
    assert p.included["pages"] == [] and "<memory>" not in str(p.messages)  # nothing recalled: no memory block


def test_huge_query_is_truncated_in_the_middle(chat_model):
    query = "START " + ("lorem ipsum " * 50_000) + " END"
    p = compose_prompt(query, count_tokens=chat_model.count_tokens, budget_tokens=1000)
    assert p.query_truncated
    text = p.messages[-1]["content"]
    assert text.startswith("START") and text.endswith("END")
    assert chat_model.count_messages_tokens(p.messages) <= 1000


def test_pages_already_in_dialogue_not_repeated(chat_model):
    history = [Msg(101, "user", "I visited city number 1"), Msg(201, "assistant", "Nice!")]
    p = compose_prompt(
        "q", retrieval=_retrieval(), history=history, count_tokens=chat_model.count_tokens, budget_tokens=1500
    )
    assert 1 not in p.included["pages"]


def test_a_page_of_an_older_exchange_of_the_dialogue_is_quoted_again_beside_the_message(chat_model):
    # page 1 is the chat's first exchange; three more follow it: it is far above the new message
    history = [Msg(101, "user", "I visited city number 1"), Msg(201, "assistant", "Nice!")]
    for i in range(3):
        history += [Msg(300 + i, "user", f"small talk {i}"), Msg(400 + i, "assistant", "ok")]

    def compose(**kw):
        return compose_prompt(
            "q",
            retrieval=_retrieval(),
            history=history,
            count_tokens=chat_model.count_tokens,
            budget_tokens=1500,
            **kw,
        )

    p = compose(requote_after=2)
    assert 1 in p.included["pages"] and "city number 1" in p.messages[-2]["content"]
    assert p.messages[1]["content"] == "I visited city number 1"  # and still in the dialogue
    assert 1 not in compose(requote_after=4).included["pages"]  # within the last four exchanges
    assert 1 in compose(requote_after=0).included["pages"]


def test_recall_first_for_templates_with_one_system_message(chat_model):
    history = [Msg(1, "user", "hello"), Msg(2, "assistant", "hi there")]
    p = compose_prompt(
        "where did I go?",
        retrieval=_retrieval(),
        history=history,
        count_tokens=chat_model.count_tokens,
        budget_tokens=1500,
        recall_at_end=False,
    )
    assert [m["role"] for m in p.messages] == ["system", "user", "assistant", "user"]
    system = p.messages[0]["content"]
    assert system.index("occupation: nurse") < system.index("Biscuit") < system.index("city number 1")


def test_a_page_ranked_for_its_neighbour_is_quoted_only_as_the_answer_to_its_question(chat_model):
    def hit(pid, user, assistant, inherited_from=None):
        page = Page(
            id=pid,
            conversation_id=1,
            user_text=user,
            assistant_text=assistant,
            timestamp=1_700_000_000 + pid * 60,
            tier="mtm",
        )
        return PageHit(page, 1.0 - pid / 100, "dense", "mtm", inherited_from=inherited_from)

    hits = [
        hit(10, "Guess which team I signed with this week!", "Which team did you sign with?"),
        hit(11, "The Minnesota Wolves! Can't wait to play.", "Congrats!", inherited_from=10),  # the answer
        hit(20, "My first dog was a beagle called Pepper.", "Beagles are so friendly."),
        hit(21, "I love jazz, especially Bill Evans.", "His trio recordings are wonderful.", inherited_from=20),
        hit(30, "Guess what I cooked.", "What was it?", inherited_from=31),  # asks; its answer was ranked
        hit(31, "A mushroom risotto.", "Sounds delicious."),
        hit(41, "Unrelated small talk.", "Indeed.", inherited_from=40),  # page 40 was not recalled
    ]
    p = compose_prompt(
        "q",
        retrieval=Retrieval(query="q", pages=hits),
        history=(),
        count_tokens=chat_model.count_tokens,
        budget_tokens=1500,
    )
    assert p.included["pages"] == [10, 11, 20, 30, 31]
    assert "Bill Evans" not in str(p.messages) and "Minnesota Wolves" in str(p.messages)


def _hit(score, similarity, standout, inherited_from=None, match_score=None):
    from types import SimpleNamespace

    return SimpleNamespace(
        score=score, similarity=similarity, standout=standout, inherited_from=inherited_from, match_score=match_score
    )


def test_quote_floor_admits_a_page_that_stands_out_without_a_keyword():
    floor = QuoteFloor(min_score=0.4, keyword_min_similarity=0.2, min_similarity=0.3, min_standout=0.2)
    assert floor.admits(_hit(0.33, 0.33, 0.25))  # under the score floor, but its meaning stands out
    assert not floor.admits(_hit(0.33, 0.33, 0.15))  # as close as the rest of memory: not on the topic
    assert not floor.admits(_hit(0.28, 0.28, 0.25))  # standing out from a memory that is far from everything
    assert floor.admits(_hit(0.9, 0.45, 0.1))  # over the floor by its words and close enough
    assert not floor.admits(_hit(0.9, 0.07, 0.0))  # one shared word and nothing of the meaning
    assert floor.admits(_hit(0.5, 0.0, -0.1, inherited_from=7))  # a neighbour's context: the score floor only
    assert not floor.admits(_hit(0.3, 0.9, 0.9, inherited_from=7))
    assert floor.admits(_hit(0.5, None, None)) and not floor.admits(_hit(0.3, None, None))  # hits without cosines
    assert QuoteFloor().admits(_hit(-1.0, -1.0, -1.0))  # no floor: every page


def test_quote_floor_from_the_memory_params():
    from memory_core import MemoryParams

    p = MemoryParams.from_flat(
        recall_min_score=0.5, recall_keyword_min_similarity=0.1, recall_min_similarity=0.35, recall_min_standout=0.22
    )
    assert QuoteFloor.from_params(p) == QuoteFloor(0.5, 0.1, 0.35, 0.22)


def test_quote_floor_says_why_a_page_is_left_out():
    floor = QuoteFloor(min_score=0.4, keyword_min_similarity=0.2, min_similarity=0.3, min_standout=0.2)
    assert floor.refusal(_hit(0.33, 0.33, 0.25)) is None
    assert floor.refusal(_hit(0.9, 0.07, 0.0)) == (
        "scored 0.90, over the quoting floor of 0.4 (words, date or segment), "
        "but its meaning is too far from the message (cos 0.07 < 0.2)"
    )
    assert floor.refusal(_hit(0.33, 0.33, 0.15)) == (
        "scored 0.33, under the quoting floor of 0.4, and its meaning "
        "does not stand out (cos 0.33, +0.15 over the usual)"
    )
    assert floor.refusal(_hit(0.3, 0.9, 0.9, inherited_from=7)) == "scored 0.30, under the quoting floor of 0.4"


def test_quote_floor_reads_the_score_without_the_word_by_word_match():
    """Every page matches a query's words somewhat (token_match adds ~0.3 to unrelated pages), so the
    floor reads PageHit.match_score, the score it was measured on, when the ranking has one."""
    floor = QuoteFloor(min_score=0.4, keyword_min_similarity=0.2, min_similarity=0.3, min_standout=0.2)
    assert not floor.admits(_hit(0.75, 0.25, 0.05, match_score=0.3))
    assert floor.refusal(_hit(0.75, 0.25, 0.05, match_score=0.3)) == (
        "scored 0.30, under the quoting floor of 0.4, and its meaning does not stand out "
        "(cos 0.25, +0.05 over the usual)"
    )
    assert floor.admits(_hit(0.75, 0.25, 0.05, match_score=0.45))
    assert not floor.admits(_hit(0.9, 0.0, None, inherited_from=3, match_score=0.35))


def test_quote_floor_round_trips_through_a_trace():
    floor = QuoteFloor(0.4, 0.2, 0.3, 0.22)
    assert QuoteFloor.from_dict(json.loads(json.dumps(floor.to_dict()))) == floor
    assert QuoteFloor.from_dict({"min_score": 0.5}) == QuoteFloor(min_score=0.5)


def test_each_quoting_rule_can_be_switched_off_by_name(chat_model):
    import pytest

    from app.chat.prompting import QUOTING_RULES, quoted_pages

    floor = QuoteFloor(min_score=0.4, keyword_min_similarity=0.2, min_similarity=0.3, min_standout=0.2)
    assert not floor.admits(_hit(0.3, 0.25, 0.0))
    assert floor.without({"score_floor"}).admits(_hit(0.3, 0.25, 0.0))  # the closeness floor still applies
    assert not floor.without({"score_floor"}).admits(_hit(0.3, 0.1, 0.0))
    assert not floor.admits(_hit(0.9, 0.07, 0.0))
    assert floor.without({"keyword_closeness"}).admits(_hit(0.9, 0.07, 0.0))  # one shared word is enough
    assert not floor.without({"standout"}).admits(_hit(0.33, 0.33, 0.25))  # meaning alone no longer quotes
    assert floor.without(()) == floor
    neighbour = _hit(0.5, 0.0, -0.1, inherited_from=7)
    assert floor.admits(neighbour) and not floor.admits(neighbour, exempt_neighbours=False)  # judged by its own match
    with pytest.raises(ValueError, match="unknown quoting rule"):
        quoted_pages([], floor, {"no_such_rule"})

    # quotable_pages: a neighbour page that answers no question is quoted too
    def hit(pid, user, inherited_from=None):
        page = Page(id=pid, conversation_id=1, user_text=user, assistant_text="Ok.", timestamp=pid * 60, tier="mtm")
        return PageHit(page, 1.0, "dense", "mtm", inherited_from=inherited_from)

    pair = [hit(20, "My dog is Pepper."), hit(21, "I love jazz.", inherited_from=20)]
    assert [h.page.id for h in quoted_pages(pair, QuoteFloor())] == [20]
    assert [h.page.id for h in quoted_pages(pair, QuoteFloor(), {"neighbours_as_answers"})] == [20, 21]

    def compose(retrieval, history=(), **kw):
        return compose_prompt(
            "q", retrieval=retrieval, history=history, count_tokens=chat_model.count_tokens, budget_tokens=3000, **kw
        )

    # the dialogue's last exchanges are quoted again with requote_after off
    last = [Msg(101, "user", "I visited city number 1"), Msg(201, "assistant", "Nice!")]
    assert 1 not in compose(_retrieval(), last).included["pages"]
    assert 1 in compose(_retrieval(), last, off={"requote_after"}).included["pages"]
    # sides off: whole pages in their rank order; turn_budget off: every turn that fits
    assert compose(_sided(5), max_turns=6).half_pages != {}
    sided_off = compose(_sided(5), max_turns=6, off={"sides"})
    assert sided_off.included["pages"] == [1, 2, 3] and sided_off.half_pages == {}
    assert compose(_sided(5), max_turns=6, off={"turn_budget"}).included["pages"] == [1, 2, 3, 4, 5]
    assert compose(_sided(5), max_turns=6, off={"turn_budget"}).half_pages == {}
    assert len(QUOTING_RULES) == len(set(QUOTING_RULES)) == 8
