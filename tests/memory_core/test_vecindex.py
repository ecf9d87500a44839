"""The in-memory matrix cache: incremental sync from vec_log, and the prefiltered search at scale."""

from __future__ import annotations

import numpy as np

from memory_core.storage import vecindex


def _embedding_like(n, dim, seed=0):
    """Unit vectors with a decaying spectrum, like sentence embeddings (most variance in a few
    dozen directions), plus isotropic noise."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((dim, 96)) / np.sqrt(dim)  # nearly orthonormal columns
    scales = 1.0 / np.sqrt(np.arange(1, 97))
    x = (rng.standard_normal((n, 96)) * scales) @ basis.T + 0.03 * rng.standard_normal((n, dim))
    x = x.astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_prefiltered_search_matches_exact_top_results(monkeypatch):
    dim, n = 384, 30_000
    x = _embedding_like(n, dim)
    cache = vecindex.MatrixCache("page", dim)
    for i, v in enumerate(x):
        cache._put(i + 1, v)
    cache._remove(5)
    assert cache.center is None  # sketched lazily once past the threshold
    rng = np.random.default_rng(1)
    recalls = []
    for _ in range(20):
        q = x[rng.integers(0, n)] + 0.05 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        ids, scores = cache.search(q, 20, exclude={7})
        assert cache.center is not None
        exact = np.argsort(-(x @ q))
        truth = [int(i) + 1 for i in exact if int(i) + 1 not in (5, 7)][:20]
        recalls.append(len(set(ids.tolist()) & set(truth)) / 20)
        assert 5 not in ids and 7 not in ids
        assert np.all(np.diff(scores) <= 1e-6)
        assert np.allclose(scores, x[ids - 1] @ q, atol=1e-5)  # rescored exactly
    assert np.mean(recalls) >= 0.97


def test_sample_scores_reads_live_rows_or_an_even_sample():
    dim = 16
    x = _embedding_like(50, dim, seed=3)
    cache = vecindex.MatrixCache("page", dim)
    ids, cos = cache.sample_scores(x[0])
    assert len(ids) == 0 and len(cos) == 0
    for i, v in enumerate(x):
        cache._put(i + 1, v)
    cache._remove(10)
    cache._put(3, x[40])  # an update: the new vector is scored
    q = x[7]
    ids, cos = cache.sample_scores(q)
    assert sorted(ids.tolist()) == [i for i in range(1, 51) if i != 10]
    expect = {i: float((x[40] if i == 3 else x[i - 1]) @ q) for i in ids.tolist()}
    assert all(abs(c - expect[i]) < 1e-5 for i, c in zip(ids.tolist(), cos.tolist()))
    ids, cos = cache.sample_scores(q, limit=7)  # a large memory: rows spread over the matrix
    assert len(ids) == 7 and 10 not in ids.tolist() and ids[0] == 1 and ids[-1] == 50


def _loaded(x, monkeypatch, compact_from):
    """A cache loaded from a page_vec-like table of `x` (ids 1..n), as a memory is when opened."""
    import apsw

    monkeypatch.setattr(vecindex, "COMPACT_FROM_ROWS", compact_from)
    monkeypatch.setattr(vecindex, "LOAD_CHUNK", 7_000)  # several chunks
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE page_vec(page_id INTEGER PRIMARY KEY, embedding BLOB)")
    conn.execute("CREATE TABLE vec_log(seq INTEGER PRIMARY KEY, kind TEXT, item_id INTEGER, op TEXT)")
    with conn:
        conn.executemany("INSERT INTO page_vec VALUES (?, ?)", ((i + 1, v.tobytes()) for i, v in enumerate(x)))
    cache = vecindex.MatrixCache("page", x.shape[1])
    cache.sync(conn)
    return cache


def test_a_large_memory_keeps_its_vectors_compact_and_finds_the_same_pages(monkeypatch):
    dim, n = 384, 30_000
    x = _embedding_like(n, dim, seed=5)
    full = _loaded(x, monkeypatch, compact_from=10**9)
    compact = _loaded(x, monkeypatch, compact_from=n)
    assert not full.compact and compact.compact
    assert compact.matrix.dtype == np.int8 and compact.signs.shape == (6, len(compact.ids))
    assert compact.nbytes() < 0.5 * full.nbytes()
    rng = np.random.default_rng(2)
    kept = []
    for _ in range(20):
        q = x[rng.integers(0, n)] + 0.05 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        truth = (np.argsort(-(x @ q))[:20] + 1).tolist()
        ids, scores = compact.search(q, 20)
        kept.append(len(set(ids.tolist()) & set(truth)) / 20)
        assert np.allclose(scores, x[ids - 1] @ q, atol=5e-3)  # int8 rows: cosines to a few thousandths
    assert np.mean(kept) >= 0.95
    # what ranking reads besides the search, in float32
    q = x[0]
    assert compact.vector(1).dtype == np.float32 and abs(float(compact.vector(1) @ q) - 1.0) < 5e-3
    assert abs(compact.scores_for(q, [1, 2])[2] - float(x[1] @ q)) < 5e-3
    assert np.allclose(compact.exact_scores(q), x @ q, atol=5e-3)
    sample_ids, sample_cos = compact.sample_scores(q, limit=50)
    assert np.allclose(sample_cos, x[sample_ids - 1] @ q, atol=5e-3)
    # rows added and removed after the load keep working
    compact._put(n + 1, x[3])
    compact._remove(4)
    ids, _ = compact.search(x[3], 5)
    assert ids[0] == n + 1 and 4 not in ids.tolist()  # the new row has page 4's vector; page 4 is gone
    for extra in range(n + 2, n + 2 + len(compact.ids)):  # past the room left at the load: the matrix grows
        compact._put(extra, x[extra % n])
    assert compact.compact and abs(float(compact.vector(n + 5) @ x[(n + 5) % n]) - 1.0) < 5e-3


def test_the_row_map_keeps_ids_near_and_far():
    far = vecindex.RowMap.DENSE_LIMIT + 5
    m = vecindex.RowMap(np.array([3, 7, far], dtype=np.int64))
    assert (m.get(3), m.get(7), m.get(far), m.get(4)) == (0, 1, 2, None)
    assert len(m) == 3 and sorted(m) == [3, 7, far] and far in m and 4 not in m
    m[100_000] = 3
    m[far + 1] = 4
    assert m[100_000] == 3 and len(m) == 5
    assert m.pop(7) == 1 and m.pop(far) == 2 and m.pop(7) is None
    assert sorted(m) == [3, 100_000, far + 1] and len(m) == 3
    m[3] = 9  # a row moved: no new id
    assert len(m) == 3 and m[3] == 9


def test_rows_of_looks_up_near_far_and_missing_ids_at_once():
    far = vecindex.RowMap.DENSE_LIMIT + 5
    m = vecindex.RowMap(np.array([3, 7, far], dtype=np.int64))
    m.pop(7)
    asked = np.array([3, 7, far, 4, far + 1, 10**9], dtype=np.int64)
    assert m.rows_of(asked).tolist() == [0, -1, 2, -1, -1, -1]


def _small_cache(n: int, seed: int) -> tuple[np.ndarray, vecindex.MatrixCache]:
    """n 16-d rows (ids 1..n) in a cache small enough for the exact scan."""
    x = _embedding_like(n, 16, seed=seed)
    cache = vecindex.MatrixCache("page", 16)
    for i, v in enumerate(x):
        cache._put(i + 1, v)
    return x, cache


def test_scores_for_gives_each_known_id_its_cosine_in_the_order_asked():
    x, cache = _small_cache(50, seed=3)
    cache._remove(9)
    q = x[0]
    got = cache.scores_for(q, iter([30, 9, 2, 999, 1]))  # any iterable; 9 removed, 999 never there
    assert list(got) == [30, 2, 1]
    for pid, cos in got.items():
        assert abs(cos - float(x[pid - 1] @ q)) < 1e-6
    assert cache.scores_for(q, []) == {} and cache.scores_for(q, [999]) == {}


def test_a_removed_row_is_never_found_and_its_reuse_is():
    x, cache = _small_cache(40, seed=4)
    ids, _ = cache.search(x[10], 5)
    assert ids[0] == 11
    cache._remove(11)  # its row is free now: searches skip it
    ids, _ = cache.search(x[10], 40)
    assert 11 not in ids and len(ids) == 39
    cache._put(41, x[10])  # the free row taken again
    assert not cache.free
    ids, _ = cache.search(x[10], 1)
    assert ids.tolist() == [41]
