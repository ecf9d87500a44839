"""A page's two turns ranked one by one (Retrieval.sides): the side split of its tokens by hand, the side
vectors the store keeps beside its word rows (add, edit, import, an older memory's backfill), and the
ranking of sides with the real embedder."""

from __future__ import annotations

import numpy as np
import pytest

from memory_core import RetrievalBudget
from memory_core.pages import token_match as TM
from memory_core.storage import schema as D
from memory_core.types import page_text


def _tokens(embedder, user, reply):
    """The page's WordPiece strings as the embedder reads them (specials left out), and the true split."""
    enc = embedder._tokenizer.encode(page_text(user, reply))
    toks = [t for t, m in zip(enc.tokens, enc.special_tokens_mask) if not m]
    return toks, len(embedder._tokenizer.encode(user.strip(), add_special_tokens=False).ids)


@pytest.mark.parametrize(
    "user,reply",
    [
        ("I took a short trip to Rome last week.", "Rome is lovely in spring!"),
        ("Café au lait in Zürich, naïvely priced", "Über-expensive!"),  # accents stripped by the tokenizer
        ("Congrats, Gina! 🎉 So stoked for you", "Thanks!! 🙏🙏"),  # emoji: "[UNK]" in this vocabulary
        ("line one\nline two\n\n  indented", "ok"),  # newlines inside the user side
        ("東京に行きました", "いいですね"),  # CJK: one token a character
    ],
)
def test_side_split_finds_where_the_user_side_ends(embedder, user, reply):
    toks, truth = _tokens(embedder, user, reply)
    assert TM.side_split(toks, user) == truth


def test_side_split_says_none_when_the_letters_do_not_line_up():
    assert TM.side_split(["rome", "is", "nice"], "Paris") is None  # other words
    assert TM.side_split(["rome"], "Rome") is None  # no reply token (a page cut short)
    assert TM.side_split(["[UNK]", "ok"], "abc") is None  # an unknown word that is not a symbol
    assert TM.side_split(["rome", "ok"], "") is None
    assert TM.side_split(["rome", "##o", "ok"], "Romeo") == 2  # a continuation piece stays with its word


def test_pack_sides_pools_each_side_and_round_trips():
    rng = np.random.default_rng(5)
    v = rng.normal(size=(5, 384)).astype(np.float32)
    blob = TM.pack_sides(v, 2)
    assert len(blob) == 2 * 384
    back = TM.unpack_sides(blob, 384)
    for row, part in zip(back, (v[:2], v[2:])):
        mean = part.mean(axis=0)
        assert float(row @ (mean / np.linalg.norm(mean))) > 0.999
    assert TM.pack_sides(v, None) == b"" and TM.pack_sides(v, 0) == b"" and TM.pack_sides(v, 5) == b""
    assert TM.unpack_sides(b"", 384) is None and TM.unpack_sides(None, 384) is None
    assert TM.unpack_sides(blob[:-1], 384) is None  # damaged: the page ranks whole
    assert TM.page_sides(v, ["a"] * 5, "", "reply") == b""  # one side only


def test_side_cosines_of_many_pages_at_once_match_one_by_one():
    rng = np.random.default_rng(6)
    q = rng.normal(size=384).astype(np.float32)
    q /= np.linalg.norm(q)
    blobs = [TM.pack_sides(rng.normal(size=(4, 384)).astype(np.float32), 2) for _ in range(3)]
    asked = [blobs[0], None, b"", blobs[1], blobs[2][:-1], blobs[2]]  # none, empty and damaged: no sides
    got = TM.side_cosines(asked, q, 384)
    assert [g is None for g in got] == [False, True, True, False, True, False]
    for blob, pair in zip(asked, got):
        if pair is not None:
            one = TM.unpack_sides(blob, 384) @ q
            assert np.allclose(pair, one, atol=1e-6)
    assert TM.side_cosines([], q, 384) == []


def _sides(store) -> dict[int, bytes | None]:
    return dict(store.db.rows("SELECT page_id, sides FROM page_tok"))


def _expected_sides(embedder, user, reply, context=""):
    _, per = embedder.embed_with_tokens([page_text(user, reply)], [context])
    tv, toks = per[0]
    return TM.unpack_sides(TM.page_sides(tv, toks, user, reply), embedder.dim)


def test_the_store_keeps_side_vectors_from_the_page_pass(open_tok, embedder):
    s = open_tok()
    cid = s.conversations.create_conversation()
    a = s.intake.add_page(cid, "My sister Clara lives in Lisbon.", "Lisbon is lovely!")
    b = s.intake.add_page(cid, "Hi!", "")  # one side: not split
    (c,) = s.intake.add_pages(cid, [{"user_text": "I run every Sunday.", "assistant_text": "Good for you."}])
    got = _sides(s)
    assert got[b] == b""
    np.testing.assert_allclose(
        TM.unpack_sides(got[a], embedder.dim),
        _expected_sides(embedder, "My sister Clara lives in Lisbon.", "Lisbon is lovely!"),
        atol=0.02,
    )
    assert TM.unpack_sides(got[c], embedder.dim) is not None
    s.curation.edit_page(a, assistant_text="Lisbon has great custard tarts.")
    new = TM.unpack_sides(_sides(s)[a], embedder.dim)
    np.testing.assert_allclose(
        new, _expected_sides(embedder, "My sister Clara lives in Lisbon.", "Lisbon has great custard tarts."), atol=0.02
    )
    s.curation.forget("page", a)
    assert a not in _sides(s)


def test_an_older_memory_gets_its_side_vectors_in_the_background(open_tok, embedder, tmp_path):
    path = tmp_path / "v4.db"
    s = open_tok(path)
    cid = s.conversations.create_conversation()
    ids = [s.intake.add_page(cid, f"I planted {w} in the garden.", "Lovely!") for w in ("tulips", "roses", "basil")]
    rows_before = dict(s.db.rows("SELECT page_id, vecs FROM page_tok"))
    s.db.execute("UPDATE page_tok SET sides = NULL")  # rows written before schema 5
    s.close()
    s = open_tok(path)
    assert s.jobs.pending(kinds=["index_tokens"]) == 1
    r = s.retrieve("Where did I plant basil?", record_visits=False)
    assert all(u.side == "page" for u in r.sides)  # whole pages meanwhile
    s.jobs.run_pending()
    assert all(TM.unpack_sides(b, embedder.dim) is not None for b in _sides(s).values())
    assert dict(s.db.rows("SELECT page_id, vecs FROM page_tok")) == rows_before  # the word rows are the same
    assert s.db.scalar("PRAGMA user_version") == D.SCHEMA_VERSION >= 5
    assert set(_sides(s)) == set(ids)


def test_sides_rank_the_better_turn_of_each_page_first(open_tok):
    s = open_tok()
    cid = s.conversations.create_conversation()
    pages = [
        ("My weekend was busy.", "I went kayaking on the river with my brother."),
        ("I adopted a beagle puppy called Pepper.", "Aww, what a cute name!"),
        ("Any plans for the summer?", "We are driving along the coast of Portugal."),
        ("I finished reading a novel about whales.", "Was it good?"),
    ]
    ids = [s.intake.add_page(cid, u, a) for u, a in pages]
    r = s.retrieve("Who went kayaking on the river?", budget=RetrievalBudget(pages=4), record_visits=False)
    assert len(r.sides) == 8 and {u.hit.page.id for u in r.sides} == set(ids)
    first = r.sides[0]
    assert first.hit.page.id == ids[0] and first.side == "assistant" and "kayaking" in first.text
    p = s.params
    for h in r.pages:
        cu, ca = h.side_similarity
        mine = {u.side: u.score for u in r.sides if u.hit is h}
        better, other = ("user", "assistant") if cu >= ca else ("assistant", "user")
        assert mine[better] == h.score
        assert mine[other] == pytest.approx(
            h.score - p.ranking.other_side_drop - p.ranking.other_side_spread * abs(cu - ca)
        )
    scores = [u.score for u in r.sides]
    assert scores == sorted(scores, reverse=True)
    # the trace keeps them, and the per-side cosines of each page
    trace = r.to_trace()
    assert trace["sides"][0] == {"page_id": ids[0], "side": "assistant", "score": pytest.approx(first.score)}
    assert len(trace["pages"][0]["side_similarity"]) == 2
    # a page that is not split is one unit of both sides
    one = s.intake.add_page(cid, "Kayaking on the river again today!", "")
    r = s.retrieve("Who went kayaking on the river?", budget=RetrievalBudget(pages=5), record_visits=False)
    (unit,) = [u for u in r.sides if u.hit.page.id == one]
    assert unit.side == "page" and unit.hit.side_similarity is None
