"""Retrieval on a real store with the real embedder: hybrid ranking, reasons, traces, caches."""

from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import numpy as np

from memory_core import MemoryParams, RetrievalBudget
from memory_core.recall import ranking
from memory_core.recall.query import keyword_query, parse_text, set_vectors, texts_to_embed
from memory_core.recall.retriever import UNRELATED_COSINE, UNRELATED_PRIOR_PAGES

CHAT = [
    ("I adopted a golden retriever puppy named Biscuit.", "Congratulations! Golden retrievers are sweet."),
    ("My sister Laura is getting married in Lisbon next spring.", "How exciting, Lisbon is beautiful."),
    ("I started learning the cello, it's hard on my fingers.", "Calluses will come with practice."),
    ("The quarterly report at work is due Friday.", "Good luck finishing it on time."),
    ("I made a sourdough starter and named it Clint Yeastwood.", "Ha, great name for a starter!"),
    ("We planted tomatoes and zucchini in the backyard garden.", "Homegrown vegetables taste best."),
    ("My favourite band is Radiohead, I saw them live in 2017.", "That must have been a great concert."),
    ("I'm allergic to shellfish so I avoid shrimp.", "Good to know, I'll keep that in mind."),
]


def fill(s, cid, clock):
    ids = []
    for u, a in CHAT:
        clock.advance(3600)
        ids.append(s.intake.add_page(cid, u, a))
    return ids


def test_finds_relevant_pages_with_reasons(open_store, clock):
    s = open_store(stm_capacity=2)
    cid = s.conversations.create_conversation()
    ids = fill(s, cid, clock)
    other = s.conversations.create_conversation()
    for q, expect in [
        ("What is the name of my dog?", ids[0]),
        ("Where is Laura's wedding?", ids[1]),
        ("Which instrument am I learning?", ids[2]),
        ("What food allergy do I have?", ids[7]),
    ]:
        r = s.retrieve(q, other, RetrievalBudget(pages=3))
        assert r.pages[0].page.id == expect, (q, [h.page.user_text for h in r.pages])
        assert r.pages[0].reason and r.pages[0].score > 0
    # each hit says its own cosine and how far that stands above the other pages' mean cosine
    r = s.retrieve("What is the name of my dog?", other, RetrievalBudget(pages=len(CHAT)))
    top, rest = r.pages[0], [h for h in r.pages[1:] if h.inherited_from is None]
    assert top.similarity > 0.3 and top.standout > 0.2
    assert all(h.similarity < top.similarity and h.standout < top.standout for h in rest)
    # the usual cosine: the median of the other pages' cosines beside a prior of unrelated pages
    q = s.embedding.embed([r.query])[0]
    others = [
        float(s.retrieval._page_cache.vector(pid) @ q) for pid in s.retrieval._page_cache.row_of if pid != top.page.id
    ]
    usual = float(np.median(others + [UNRELATED_COSINE] * UNRELATED_PRIOR_PAGES))
    assert abs(top.standout - (top.similarity - usual)) < 1e-4
    assert f"cos {top.similarity:.2f} ({top.standout:+.2f} over the usual)" in top.reason
    # a rare exact word is found by the keyword side
    r = s.retrieve("Clint Yeastwood", other, RetrievalBudget(pages=3))
    assert r.pages[0].page.id == ids[4] and "keyword match" in r.pages[0].reason
    trace = json.loads(json.dumps(r.to_trace()))
    assert trace["pages"][0]["page_id"] == ids[4] and "total" in trace["timings_ms"]
    assert {"embed", "dense", "keyword", "total"} <= set(r.timings_ms)


def test_small_talk_recalls_nothing_strongly(open_store, clock):
    # "Hi" is all stop words; porter stems "his" to "hi", so a keyword search would rank "His band…"
    # as a perfect keyword match. Such a query is left to the embedding, and nothing clears the floor.
    s = open_store(stm_capacity=2)
    cid = s.conversations.create_conversation()
    fill(s, cid, clock)
    clock.advance(3600)
    s.intake.add_page(cid, "His band played all night.", "Sounds like fun.")
    other = s.conversations.create_conversation()
    for q in ("Hi!", "Thanks, that's helpful.", "How are you?"):
        r = s.retrieve(q, other, RetrievalBudget(pages=5))
        assert r.pages and all("keyword" not in h.reason for h in r.pages), q
        assert max(h.score for h in r.pages) < s.params.quoting.recall_min_score, (
            q,
            [(h.score, h.reason) for h in r.pages],
        )
    r = s.retrieve("Who is getting married in Lisbon?", other, RetrievalBudget(pages=5))
    assert r.pages[0].score >= s.params.quoting.recall_min_score and "keyword" in r.pages[0].reason


def test_stm_budget_and_scope(open_store, clock):
    s = open_store(stm_capacity=3)
    cid = s.conversations.create_conversation()
    ids = fill(s, cid, clock)
    r = s.retrieve("garden vegetables", cid, RetrievalBudget(pages=5, stm=2))
    assert [h.page.id for h in r.stm] == ids[-2:]
    # the conversation's last two exchanges (recall_own_after) are the dialogue above the message; its
    # older pages, STM or not, are recalled like any other ("garden vegetables": page 6 is the third newest)
    ranked = {h.page.id for h in r.pages}
    assert not ranked & set(ids[-2:]) and ids[-3] in ranked
    assert r.pages and all("said earlier in this conversation" in h.reason for h in r.pages)  # one chat only
    s.params.quoting.recall_own_after = 3
    assert not {h.page.id for h in s.retrieve("garden vegetables", cid, RetrievalBudget(pages=5)).pages} & set(ids[-3:])
    # without a conversation, STM pages of every conversation are searchable memory
    r = s.retrieve("shellfish allergy", None)
    assert r.stm == [] and r.pages[0].page.id == ids[7]
    assert not any("this conversation" in h.reason for h in r.pages)


def test_cjk_pages_found_by_trigram(open_store, clock):
    s = open_store(stm_capacity=0)
    cid = s.conversations.create_conversation()
    a = s.intake.add_page(cid, "我最喜欢的食物是北京烤鸭", "听起来很好吃")
    s.intake.add_page(cid, "今天天气很好，我们去公园散步", "好主意")
    s.intake.add_page(cid, "The weather is nice today", "Let's go for a walk")
    r = s.retrieve("北京烤鸭", None, RetrievalBudget(pages=2))
    assert r.pages[0].page.id == a and "keyword match" in r.pages[0].reason


def test_date_in_question_and_dialogue_neighbours(open_store):
    s = open_store(stm_capacity=0)
    cid = s.conversations.create_conversation()
    day1 = datetime(2023, 5, 8, 14).timestamp()
    day2 = datetime(2023, 6, 20, 14).timestamp()
    p1 = s.intake.add_page(cid, "I went hiking in the hills", "Sounds fun", timestamp=day1)
    p2 = s.intake.add_page(cid, "I went hiking in the hills again", "Nice", timestamp=day2)
    r = s.retrieve("Where did I go hiking on 20 June, 2023?", None, RetrievalBudget(pages=2))
    assert r.pages[0].page.id == p2 and "date named in the question" in r.pages[0].reason
    r = s.retrieve("Where did I go hiking on May 8, 2023?", None, RetrievalBudget(pages=2))
    assert r.pages[0].page.id == p1
    # the answer often sits in the page after the one that matches the question
    t = datetime(2023, 7, 1, 10).timestamp()
    q = s.intake.add_page(
        cid, "Guess which team I signed with this week!", "Which team did you sign with?", timestamp=t
    )
    ans = s.intake.add_page(cid, "The Minnesota Wolves! Can't wait to play.", "Congrats!", timestamp=t + 60)
    for k in range(6):
        s.intake.add_page(cid, f"Unrelated chat about cooking pasta number {k}", "Yum", timestamp=t + 120 + 60 * k)
    r = s.retrieve("Which team did John sign with?", None, RetrievalBudget(pages=3))
    got = [h.page.id for h in r.pages]
    assert q in got and ans in got
    assert any("follows page" in h.reason for h in r.pages if h.page.id == ans)
    assert [h.inherited_from for h in r.pages if h.page.id == ans] == [q]
    assert next(h for h in r.pages if h.page.id == q).inherited_from is None


def test_knowledge_and_traits(open_store, clock):
    s = open_store(stm_capacity=0)
    k1 = s.persona.add_knowledge("user", "The user is allergic to shellfish")
    s.persona.add_knowledge("user", "The user plays the cello")
    s.persona.add_knowledge("assistant", "The assistant promised to suggest cello teachers")
    t_b = s.persona.add_trait("occupation", "accountant")
    t_a = s.persona.add_trait("hobby", "cello")
    s.curation.pin("trait", t_b)
    r = s.retrieve("Can I eat shrimp?", None, RetrievalBudget(knowledge=1))
    assert [h.item.id for h in r.knowledge] == [k1]
    assert [h.item.id for h in r.traits] == [t_a, t_b]  # stable order: by dimension
    r2 = s.retrieve("completely different question", None)
    assert [h.item.id for h in r2.traits] == [t_a, t_b]
    r3 = s.retrieve("x", None, RetrievalBudget(traits=1))
    assert [h.item.id for h in r3.traits] == [t_b]  # pinned first when the budget is short


def test_cache_sees_writes_of_another_connection(open_store, clock):
    s1 = open_store(stm_capacity=0)
    cid = s1.conversations.create_conversation()
    s1.intake.add_page(cid, "I collect vintage postcards", "Fun hobby")
    assert s1.retrieve("postcards", None).pages
    s2 = open_store(stm_capacity=0)
    p = s2.intake.add_page(cid, "My car is a red Volvo estate", "Solid car")
    assert s1.retrieve("What car do I drive?", None).pages[0].page.id == p
    s2.curation.forget("page", p)
    assert p not in [h.page.id for h in s1.retrieve("What car do I drive?", None).pages]


def test_visits_raise_heat_and_trigger_promotion(open_store, clock):
    s = open_store(stm_capacity=0, tau=4.0)
    cid = s.conversations.create_conversation()
    p = s.intake.add_page(cid, "I live in Reykjavik and work as a geologist.", "Iceland has amazing geology.")
    sid = s.pages.get(p).segment_id
    assert s.jobs.pending() == 0
    for _ in range(2):
        r = s.retrieve("Where do I live?", None, RetrievalBudget(pages=1))
        s.segments.record_quoted_pages([h.page.id for h in r.pages])  # two replies quoted the page
    seg = s.segments.get(sid)
    assert seg.n_visit == 2 and seg.heat >= 4.0
    assert [j.kind for j in s.jobs.list_jobs("pending")] == ["promote_segment"]
    s.jobs.run_pending(allow_llm=False)
    assert ("location", "Reykjavik") in {(t.dimension, t.value) for t in s.persona.list_traits()}
    seg = s.segments.get(sid)
    assert (seg.n_visit, seg.l_interaction) == (0, 0)  # both counts start again after promotion (MemoryOS)


def test_management_listing_filters_sorting_paging(open_store, clock):
    s = open_store(stm_capacity=2)
    cid = s.conversations.create_conversation()
    ids = fill(s, cid, clock)
    assert s.pages.count_pages() == 8 and s.pages.count_pages(tier="stm") == 2
    newest = s.pages.list_pages(limit=3)
    assert [p.id for p in newest] == ids[::-1][:3]
    page2 = s.pages.list_pages(order_by="id", descending=False, limit=3, offset=3)
    assert [p.id for p in page2] == ids[3:6]
    assert [p.id for p in s.pages.list_pages(text="Lisbon")] == [ids[1]]
    assert s.pages.count_pages(text="lisbon") == 1
    segs = s.segments.list_segments(order_by="heat")
    assert segs and all(segs[i].heat >= segs[i + 1].heat for i in range(len(segs) - 1))
    assert s.segments.count_segments(tier="mtm") == len(s.segments.list_segments(tier="mtm"))
    sid = segs[0].id
    assert {p.segment_id for p in s.pages.list_pages(segment_id=sid)} == {sid}
    st = s.stats()
    assert st["pages"] == {"stm": 2, "mtm": 6, "archive": 0} and st["db_size_bytes"] > 0
    assert s.pages.get(10_000) is None and s.segments.get(10_000) is None


def test_neighbour_context_prefers_on_topic_passage(open_store):
    """Two identical pages: the one inside a passage about the topic (its neighbour is on the topic
    too) ranks above the one between unrelated small talk, by neighbor_context * neighbour score."""

    def build(s):
        t = datetime(2023, 7, 1, 10).timestamp()
        c1, c2 = s.conversations.create_conversation(), s.conversations.create_conversation()
        s.intake.add_page(c1, "The weather was grey all week.", "Hope it clears up.", timestamp=t)
        lone = s.intake.add_page(c1, "I keep two beehives in the garden now.", "Nice!", timestamp=t + 60)
        s.intake.add_page(c1, "The traffic was awful this morning.", "Ugh, sorry.", timestamp=t + 120)
        s.intake.add_page(c2, "The weather was grey all week.", "Hope it clears up.", timestamp=t + 86400)
        ctx = s.intake.add_page(c2, "I keep two beehives in the garden now.", "Nice!", timestamp=t + 86460)
        s.intake.add_page(
            c2, "The bees made their first honey, the hives are thriving.", "Fresh honey, lovely!", timestamp=t + 86520
        )
        return lone, ctx

    for value in (0.0, 0.1):
        s = open_store(stm_capacity=0, neighbor_context=value)  # the same file both times
        if value == 0.0:
            lone, ctx = build(s)
        r = s.retrieve("How many beehives do I keep in the garden?", None, RetrievalBudget(pages=6))
        score = {h.page.id: h.score for h in r.pages}
        if value == 0.0:
            base_gap = score[ctx] - score[lone]
        else:
            assert score[ctx] > score[lone]
            assert score[ctx] - score[lone] > base_gap
        s.close()


def test_an_earlier_asking_of_the_same_question_is_not_recalled(open_store, clock):
    """Asked again, a question used to recall its earlier asking first, with the model's answer then
    ("I don't know", or a wrong guess) and the model repeated it. In Mnemo's own chats that page is
    passed over (and listed as skipped); in an imported dialogue the reply is the record and stays."""
    s = open_store(stm_capacity=1)
    facts = s.conversations.create_conversation()
    fill(s, facts, clock)
    asked = s.conversations.create_conversation()
    clock.advance(60)
    earlier = s.intake.add_page(asked, "What is my sister's name?", "I'm not sure, I don't have that information.")
    other = s.conversations.create_conversation()
    r = s.retrieve("what's the name of my sister?", other, RetrievalBudget(pages=3))
    assert earlier not in [h.page.id for h in r.pages]
    assert [h.page.id for h in r.skipped] == [earlier] and "asked before" in r.skipped[0].reason
    assert "Laura" in r.pages[0].page.user_text
    assert r.to_trace()["skipped"][0]["page_id"] == earlier
    # another question about the same person is not the same question: that page may be recalled
    # (below what the user said: it only asks, see the next test)
    r = s.retrieve("Is my sister's name hard to spell?", other, RetrievalBudget(pages=12))
    assert not r.skipped and earlier in [h.page.id for h in r.pages]
    # an imported dialogue: the answer there is what the other side said
    imported = s.conversations.create_conversation("Ana & Ben", source="locomo", external_id="x")
    clock.advance(60)
    answer = s.intake.add_page(imported, "Ana: What is your dog's name?", "Ben: His name is Pepper.")
    r = s.retrieve("What is the name of Ben's dog?", other, RetrievalBudget(pages=3))
    assert answer in [h.page.id for h in r.pages] and not r.skipped


ASKINGS = [
    ("Where is my sister getting married?", "I'm not sure, I don't have that information."),
    ("When is Laura's wedding?", "I don't know, you haven't told me."),
    ("Who is my sister marrying?", "I'm sorry, I don't have that information."),
]


def test_earlier_questions_on_a_topic_do_not_crowd_out_what_the_user_said(open_store, clock, tmp_path):
    """A page of Mnemo's own chats that only asks a short question holds the model's reply, not
    something the user told. Several askings about the sister's wedding outranked the page where
    the user said where it is; `asked_weight` scales them down, and the trace says why. A question
    that tells something (a long one: "…now that my sister Laura is moving to Porto with…?") and
    imported dialogues are exempt."""
    ranks, scores, matched = {}, {}, set()
    for weight in (1.0, 0.5):
        s = open_store(tmp_path / f"weight-{weight}.db", stm_capacity=1, asked_weight=weight)
        told = fill(s, s.conversations.create_conversation(), clock)[1]
        asked = []
        for q, a in ASKINGS:
            clock.advance(60)
            asked.append(s.intake.add_page(s.conversations.create_conversation(), q, a))
        r = s.retrieve(
            "Where is my sister Laura's wedding going to be?",
            s.conversations.create_conversation(),
            RetrievalBudget(pages=4),
        )
        order = [h.page.id for h in r.pages]
        ranks[weight] = order.index(told)
        scores[weight] = {h.page.id: h.score for h in r.pages + r.skipped}
        matched |= {h.page.id for h in r.pages if h.page.id in asked and "keyword match" in h.reason}
        if weight == 0.5:
            reasons = {h.page.id: h.reason for h in r.pages}
            assert all(
                "a question asked in a chat (its keyword match not counted, × 0.5)" in reasons[a]
                for a in asked
                if a in reasons
            ), reasons
            assert "question asked" not in reasons[told]
            # an asking is like the question because it asks the same: no standout to be quoted by
            standout = {h.page.id: h.standout for h in r.pages}
            assert all(standout[a] is None for a in asked if a in standout) and standout[told] is not None
        s.close()
    assert ranks[1.0] > 0 and ranks[0.5] == 0
    # an asking's keyword match is the new question's words echoed: it goes before the scaling
    w_kw = MemoryParams().ranking.w_keyword
    both = [a for a in matched if a in scores[0.5]]
    assert both, (matched, scores)
    for a in both:
        assert 0.5 * (scores[1.0][a] - w_kw) - 1e-6 <= scores[0.5][a] < 0.5 * scores[1.0][a] - 0.01, a
    # a page the user pinned keeps its score
    s = open_store(tmp_path / "pinned.db", stm_capacity=1)
    pinned = s.intake.add_page(
        s.conversations.create_conversation(), "When is Laura's wedding?", "On 12 May, in Lisbon."
    )
    s.curation.pin("page", pinned)
    r = s.retrieve("Is Laura's wedding in spring?", s.conversations.create_conversation(), RetrievalBudget(pages=2))
    assert "question asked" not in next(h.reason for h in r.pages if h.page.id == pinned)
    s.close()

    s = open_store(stm_capacity=1)
    telling = s.intake.add_page(
        s.conversations.create_conversation(),
        "Should I visit her more often now that my sister Laura is moving to "
        "Porto with her husband and the kids in May?",
        "Yes.",
    )
    imported = s.conversations.create_conversation("Ana & Ben", source="locomo", external_id="x")
    clock.advance(60)
    record = s.intake.add_page(imported, "Ana: Where is Laura moving to?", "Ben: To Porto, in May.")
    r = s.retrieve("Where is Laura moving?", s.conversations.create_conversation(), RetrievalBudget(pages=3))
    assert {telling, record} <= {h.page.id for h in r.pages}
    assert not any("question asked" in h.reason for h in r.pages)


DIALOGUE = [  # an imported dialogue between two named people: both names are on every page
    ("Ana: I baked a lemon tart for the school fair.", "Ben: Ana, that sounds delicious!"),
    ("Ana: My brother moved to Oslo for a job at the harbour.", "Ben: Oslo is lovely in summer."),
    ("Ana: We adopted a grey cat called Smoke.", "Ben: Cats are great company, Ana."),
    ("Ana: I've started running before work, five kilometres.", "Ben: Impressive, keep it up!"),
    ("Ana: The roof leaked again during the storm.", "Ben: Oh no, hope it's fixed soon."),
    ("Ana: I finished reading a novel about lighthouse keepers.", "Ben: I love stories by the sea."),
]


def test_words_on_most_pages_weigh_half_in_the_query_vector(open_store, clock):
    """Both speakers' names are on every page of an imported dialogue: in the query vector the name a
    question asks about matches every page alike. The vector is the mean of the question's and the
    question's without such words; the retrieval says which words they were."""
    s = open_store()
    cid = s.conversations.create_conversation("imported")
    s.intake.add_pages(
        cid,
        [
            {"user_text": u, "assistant_text": a, "timestamp": 1_700_000_000 + i * 60}
            for i, (u, a) in enumerate(DIALOGUE * 4)
        ],
    )  # 24 pages, "ana" and "ben" on each
    q = "What did Ana bake for the school fair?"
    r = s.retrieve(q, None, RetrievalBudget(pages=3), record_visits=False)
    assert r.common_words == ["ana"] and json.loads(json.dumps(r.to_trace()))["common_words"] == ["ana"]
    plain, stripped = s.embedding.embed([q, "What did bake for the school fair?"])
    expect = np.asarray(plain) + np.asarray(stripped)
    expect /= np.linalg.norm(expect)
    top = r.pages[0]
    assert "lemon tart" in top.page.user_text
    assert abs(top.similarity - float(s.retrieval._page_cache.vector(top.page.id) @ expect)) < 1e-4
    assert abs(top.similarity - float(s.retrieval._page_cache.vector(top.page.id) @ np.asarray(plain))) > 1e-3
    # a query about nothing else keeps it whole
    assert s.retrieve("Tell me about Ana", None, RetrievalBudget(pages=3), record_visits=False).common_words == []
    # a word on fewer pages, or no such word, leaves the vector as it was
    r = s.retrieve("Where did her brother move for work?", None, RetrievalBudget(pages=3), record_visits=False)
    assert r.common_words == []
    top = r.pages[0]
    q_plain = np.asarray(s.embedding.embed(["Where did her brother move for work?"])[0])
    assert abs(top.similarity - float(s.retrieval._page_cache.vector(top.page.id) @ q_plain)) < 1e-4


def test_a_small_memory_or_a_mix_of_0_has_no_common_words(open_store, clock):
    s = open_store()
    cid = s.conversations.create_conversation("imported")
    s.intake.add_pages(cid, [{"user_text": u, "assistant_text": a} for u, a in DIALOGUE * 3])  # 18 pages: too few
    assert s.retrieve("What did Ana bake?", None, RetrievalBudget(pages=3), record_visits=False).common_words == []
    s.intake.add_pages(cid, [{"user_text": u, "assistant_text": a} for u, a in DIALOGUE])
    assert s.retrieve("What did Ana bake?", None, RetrievalBudget(pages=3), record_visits=False).common_words == ["ana"]
    s.params.ranking.common_word_mix = 0.0
    assert s.retrieve("What did Ana bake?", None, RetrievalBudget(pages=3), record_visits=False).common_words == []


def test_no_keyword_match_from_words_on_every_page_alone(open_store, clock, tmp_path):
    """When every word of a question that a page holds is on half the pages or more (the speakers' names of an
    imported dialogue), FTS5 clamps their IDF to 1e-6 and BM25 can only say which pages hold them; when more do
    than the search returns (`RankingParams.keyword_limit`: here 16 for 8 pages), no page gets a keyword match for
    them (scaled by that IDF, the arbitrary ones returned used to get a full one)."""
    s = open_store(keyword_candidates=10)
    cid = s.conversations.create_conversation("imported")
    s.intake.add_pages(
        cid,
        [
            {"user_text": u, "assistant_text": a, "timestamp": 1_700_000_000 + i * 60}
            for i, (u, a) in enumerate(DIALOGUE * 4)
        ],
    )  # 24 pages, "ana" and "ben" on each
    r = s.retrieve("What did Ana tell Ben on 25 May 2022?", None, RetrievalBudget(pages=8), record_visits=False)
    assert r.pages and not any("keyword match" in h.reason for h in r.pages)
    # one word that tells pages apart brings the keyword search back, for the pages that hold it
    r = s.retrieve("What did Ana tell Ben about Oslo?", None, RetrievalBudget(pages=24), record_visits=False)
    matched = [h for h in r.pages if "keyword match" in h.reason]  # and only those: not the names' pages
    assert len(matched) == 4 and all("Oslo" in h.page.user_text + h.page.assistant_text for h in matched)
    assert all("'oslo'" in h.reason and "'ana'" not in h.reason for h in matched)  # the word searched for
    assert "Oslo" in r.pages[0].page.user_text
    # all of them returned: each keeps its match (the word says which pages hold it)
    s.params.ranking.keyword_candidates = 100
    r = s.retrieve("What did Ana tell Ben on 25 May 2022?", None, RetrievalBudget(pages=8), record_visits=False)
    assert all("keyword match" in h.reason for h in r.pages)
    # so does a small memory, where a word on one page of two is already on half the pages
    s2 = open_store(tmp_path / "small.db")
    c2 = s2.conversations.create_conversation()
    s2.intake.add_page(c2, "We adopted a grey cat called Smoke.", "Cats are great company.")
    s2.intake.add_page(c2, "The roof leaked again during the storm.", "Oh no!")
    top = s2.retrieve("Smoke", None, RetrievalBudget(pages=2), record_visits=False).pages[0]
    assert "Smoke" in top.page.user_text and "keyword match" in top.reason


def test_work_handed_to_a_busy_thread_is_taken_back():
    with ThreadPoolExecutor(max_workers=1) as other:
        started, gate = threading.Event(), threading.Event()
        busy = other.submit(lambda: (started.set(), gate.wait(30)))
        assert started.wait(30)
        handed = other.submit(lambda: "there")
        assert ranking.taken_back(handed, lambda: "here") == "here"  # not begun there: done here, not twice
        assert handed.cancelled()
        gate.set()
        busy.result()
        begun = threading.Event()
        handed = other.submit(lambda: (begun.set(), "there")[1])
        assert begun.wait(30)
        assert ranking.taken_back(handed, lambda: "here") == "there"  # begun there: its result


def test_two_threads_rank_as_every_stage_in_turn_on_one(open_tok, clock, monkeypatch):
    """The retriever spreads the stages over two threads (the dense search queued behind the embedding, the
    usual cosine and word-by-word halves taken by whichever thread is free): the pages, scores and reasons
    are those of ranking.rank_pages running every stage in turn on one thread."""
    monkeypatch.setattr(ranking, "SPLIT_MATCH_PAGES", 2)  # the word-by-word match split even for a few pages
    s = open_tok()
    cid = s.conversations.create_conversation()
    fill(s, cid, clock)
    other = s.conversations.create_conversation()
    rt = s.retrieval
    for q in ["What is the name of my dog?", "Where is Laura's wedding?", "my sourdough starter", "cello"]:
        got = s.retrieve(q, other, RetrievalBudget(pages=5))
        pq = parse_text(q, clock())
        rt._common_words(pq, {}, frozenset())
        vecs, per_text = rt.embedding.embed_with_tokens(texts_to_embed(pq))
        set_vectors(pq, vecs, per_text, s.db.params)
        pq.keyword = keyword_query(pq, rt._term_stats(pq.term_counts), s.db.params, 5)
        one = dataclasses.replace(rt._ranking_deps(), beside=None)
        hits, *_ = ranking.rank_pages(pq, set(), 5, one, {}, other)
        assert [(h.page.id, round(h.score, 6), h.reason) for h in got.pages] == [
            (h.page.id, round(h.score, 6), h.reason) for h in hits
        ], q
