"""The batch scoring of ranking (base_scores, final_scores) gives what the one-page functions give."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.recall import ranking as R
from memory_core.types import MemoryParams

_score = st.floats(min_value=-0.5, max_value=3.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    scores=st.dictionaries(st.integers(1, 40), _score, max_size=40),
    prev_links=st.sets(st.integers(2, 41)),
    next_links=st.sets(st.integers(0, 39)),
    context=st.sampled_from([0.0, 0.1, 0.3]),
    off=st.sampled_from([frozenset(), frozenset({"neighbour_context"})]),
)
def test_final_scores_equal_final_score_page_by_page(scores, prev_links, next_links, context, off):
    c = R.Candidates(n=10, exclude=set(), conversation_id=None, score=dict(scores))
    c.prev_of = {i: i - 1 for i in prev_links}
    c.next_of = {i: i + 1 for i in next_links}
    params = MemoryParams()
    params.ranking.neighbor_context = context
    d = R.RankingDeps(execute=None, pages_by_ids=None, page_cache=None, params=params, dim=4, off=off)  # type: ignore[arg-type]
    one_by_one = copy.deepcopy(c)
    expected = {pid: R.final_score(pid, s, one_by_one, d) for pid, s in one_by_one.score.items()}
    assert R.final_scores(c, d) == expected
    assert c.via == one_by_one.via
