"""A keyword query whose terms match more pages than KEYWORD_POSTINGS searches its most frequent terms among the
newest pages only; the scores of the pages it reaches are the one search's (BM25 adds up over terms)."""

from __future__ import annotations

import pytest

from memory_core.recall import query as Q
from memory_core.recall import ranking as R


def _keyword_scores(store, text: str, clock) -> tuple[Q.KeywordQuery, dict[int, float]]:
    r = store.retrieval
    pq = Q.parse_text(text, clock())
    pq.keyword = Q.keyword_query(pq, r._term_stats(pq.term_counts), store.db.params, 30)
    c = R.Candidates(n=30, exclude=set(), conversation_id=None)  # keyword_limit(30): 60 matches, all of them
    with store.db.lock:
        R.keyword(c, pq, r._ranking_deps())
    return pq.keyword, c.kw_of


def test_frequent_terms_are_searched_among_the_newest_pages(open_store, clock, monkeypatch):
    s = open_store(stm_capacity=0)
    cid = s.conversations.create_conversation()
    old_rare = s.intake.add_page(cid, "My garden finally grew a zucchini the size of my arm", "Impressive!")
    garden = []
    for i in range(40):  # on fewer than half the pages: a term that tells (query.keyword_query)
        garden.append(s.intake.add_page(cid, f"The garden needs water again, day {i}", "Keep it up"))
        s.intake.add_page(cid, f"Work was long today, meeting number {i}", "Rest well")
        s.intake.add_page(cid, f"I read a chapter of my novel, chapter {i}", "Enjoy it")
    _, whole = _keyword_scores(s, "garden zucchini", clock)  # 41 matches: within the default bound
    monkeypatch.setattr(Q, "KEYWORD_POSTINGS", 6)
    kq, windowed = _keyword_scores(s, "garden zucchini", clock)
    assert kq.fts == '"zucchini"' and kq.recent == '"garden"'
    assert garden[0] < kq.since <= garden[-1]
    # the rare word is searched in every page: the old page holding it is still a keyword match
    assert old_rare in windowed
    # the frequent word only among the newest pages, each scored as the one search scores it
    reached = [p for p in garden if p in windowed]
    assert reached and min(reached) >= kq.since and len(reached) < len(garden)
    for p in reached:
        assert windowed[p] == pytest.approx(whole[p], abs=1e-9)
    # a page outside the window keeps the rare word's part only
    assert windowed[old_rare] < whole[old_rare]


def test_a_query_within_the_bound_is_one_search(open_store, clock):
    s = open_store(stm_capacity=0)
    cid = s.conversations.create_conversation()
    for i in range(5):
        s.intake.add_page(cid, f"I walked the dog in the park, walk {i}", "Nice")
    kq, scores = _keyword_scores(s, "dog park", clock)
    assert kq.recent is None and kq.fts and len(scores) == 5
