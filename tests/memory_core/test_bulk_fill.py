"""The benchmark's bulk fill (tests.bench.million_pages) makes a valid store that ranks as one filled through
`add_pages` with the same pages: the integrity check, the rows retrieval reads, and retrieve() itself compared,
on the real store and the real embedder."""

from __future__ import annotations

import pytest

from memory_core import MemoryParams, MemoryStore, RetrievalBudget
from tests.bench.million_pages import PAGES_PER_CHAT, Synthetic, bulk_fill, fill_with_add_pages
from tests.bench.retrieval import QUERIES

PAGES = 2000
REAL = 100  # the first two chats embedded for real


def _open(path, embedder) -> MemoryStore:
    return MemoryStore.open(
        path,
        embedder.embed,
        embed_model_id=embedder.model_id,
        dim=embedder.dim,
        params=MemoryParams(),
        embed_tokens=embedder.embed_with_tokens,
    )


@pytest.fixture(scope="module")
def stores(embedder, tmp_path_factory):
    """The same 2,000 pages through add_pages and through the bulk fill, each store opened again afterwards
    (as the benchmark measures it)."""
    tmp = tmp_path_factory.mktemp("bulk")
    synth = Synthetic(embedder.dim, real=REAL)
    ref = _open(tmp / "add_pages.db", embedder)
    fill_with_add_pages(ref, synth, PAGES)
    ref.close()
    bulk = _open(tmp / "bulk.db", embedder)
    stats = bulk_fill(bulk, synth, PAGES, log=lambda m: None)
    bulk.close()
    ref, bulk = _open(tmp / "add_pages.db", embedder), _open(tmp / "bulk.db", embedder)
    yield ref, bulk, stats
    ref.close()
    bulk.close()


def test_a_bulk_filled_store_is_consistent(stores):
    ref, bulk, stats = stores
    assert stats["pages"] == PAGES and stats["segments"] > 0
    assert bulk.check_integrity() == [] and ref.check_integrity() == []
    s = bulk.stats()
    assert s["pages_total"] == PAGES and s["pages_word_indexed"] == PAGES
    assert s["pages"]["stm"] == PAGES // PAGES_PER_CHAT * MemoryParams().tiers.stm_capacity
    assert s["segments"]["mtm"] == MemoryParams().tiers.mtm_capacity and s["segments"]["archive"] > 0
    assert s["pending_jobs"] == 0  # opened again, it has nothing to redo (reading in context, word rows, segments)
    # mid-term memory keeps the segments of most pages, as eviction leaves them when nothing was visited
    smallest_kept = bulk.db.scalar("SELECT min(page_count) FROM segment WHERE tier = 'mtm'")
    assert smallest_kept >= bulk.db.scalar("SELECT max(page_count) FROM segment WHERE tier = 'archive'")
    seg = bulk.segments.list_segments(limit=1)[0]
    assert seg.keywords and seg.summary and seg.title


def test_the_rows_retrieval_reads_are_those_add_pages_writes(stores):
    ref, bulk, _ = stores
    cols = "id, conversation_id, user_text, assistant_text, timestamp, keywords, prev_page_id, meta, space_id"
    assert bulk.db.rows(f"SELECT {cols} FROM page ORDER BY id") == ref.db.rows(f"SELECT {cols} FROM page ORDER BY id")
    assert bulk.db.rows("SELECT id, tier = 'stm' FROM page ORDER BY id") == ref.db.rows(
        "SELECT id, tier = 'stm' FROM page ORDER BY id"
    )
    for table, key in (("page_vec", "page_id"), ("page_tok", "page_id")):
        a = bulk.db.rows(f"SELECT * FROM {table} ORDER BY {key}")
        assert a == ref.db.rows(f"SELECT * FROM {table} ORDER BY {key}"), table
    # dialogue chains: the same links (chain ids may be numbered otherwise)
    chained = "SELECT id FROM page WHERE chain_id IS NOT NULL ORDER BY id"
    assert bulk.db.rows(chained) == ref.db.rows(chained)


def test_retrieve_ranks_a_bulk_filled_store_as_one_filled_through_add_pages(stores):
    ref, bulk, _ = stores
    last_chat = PAGES // PAGES_PER_CHAT
    budget = RetrievalBudget(pages=10, knowledge=5, traits=20)
    for q in QUERIES:
        a, b = (s.retrieve(q, last_chat, budget) for s in (ref, bulk))
        assert [h.page.id for h in b.stm] == [h.page.id for h in a.stm]
        assert [h.page.id for h in b.pages] == [h.page.id for h in a.pages], q
        assert [h.score for h in b.pages] == pytest.approx([h.score for h in a.pages], abs=1e-6)
        assert [h.inherited_from for h in b.pages] == [h.inherited_from for h in a.pages]
        # the reasons but the tier (segments are made otherwise, so which is archived differs)
        reasons = [[h.reason.replace(" + from the archive", "") for h in r.pages] for r in (a, b)]
        assert reasons[1] == reasons[0]
        assert [(u.hit.page.id, u.side) for u in b.sides] == [(u.hit.page.id, u.side) for u in a.sides]
    assert any(h.page.id <= REAL for q in QUERIES for h in bulk.retrieve(q, None, budget).pages)


def test_a_bulk_fill_goes_on_from_where_it_stopped_and_refuses_other_stores(embedder, tmp_path):
    synth = Synthetic(embedder.dim, real=0)
    store = _open(tmp_path / "grow.db", embedder)
    try:
        bulk_fill(store, synth, 300, log=lambda m: None)
        bulk_fill(store, synth, 600, log=lambda m: None)
        assert store.pages.count_pages() == 600 and store.check_integrity() == []
        with pytest.raises(ValueError, match="multiple of 50"):
            bulk_fill(store, synth, 625, log=lambda m: None)
        store.intake.add_page(store.conversations.create_conversation("mine"), "my own page", "noted")
        with pytest.raises(ValueError, match="not written by a bulk fill"):
            bulk_fill(store, synth, 700, log=lambda m: None)
    finally:
        store.close()
