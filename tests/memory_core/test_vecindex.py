"""The in-memory matrix cache: incremental sync from vec_log, and the prefiltered search at scale."""
from __future__ import annotations

import numpy as np

from memory_core import vecindex


def _embedding_like(n, dim, seed=0):
    """Unit vectors with a decaying spectrum, like sentence embeddings (most variance in a few
    dozen directions), plus isotropic noise."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((dim, 96)) / np.sqrt(dim)       # nearly orthonormal columns
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
    assert cache.basis is None                      # fitted lazily once past the threshold
    rng = np.random.default_rng(1)
    recalls = []
    for _ in range(20):
        q = x[rng.integers(0, n)] + 0.05 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        ids, scores = cache.search(q, 20, exclude={7})
        assert cache.basis is not None
        exact = np.argsort(-(x @ q))
        truth = [int(i) + 1 for i in exact if int(i) + 1 not in (5, 7)][:20]
        recalls.append(len(set(ids.tolist()) & set(truth)) / 20)
        assert 5 not in ids and 7 not in ids
        assert np.all(np.diff(scores) <= 1e-6)
        assert np.allclose(scores, x[ids - 1] @ q, atol=1e-5)     # rescored exactly
    assert np.mean(recalls) >= 0.97


def test_mean_score_follows_puts_updates_and_removals():
    dim = 16
    x = _embedding_like(50, dim, seed=3)
    cache = vecindex.MatrixCache("page", dim)
    assert cache.mean_score(x[0]) == (0.0, 0)
    for i, v in enumerate(x):
        cache._put(i + 1, v)
    cache._put(3, x[40])            # an update replaces the old vector in the sum
    cache._remove(10)
    cache._put(60, x[10])           # reuses the freed row
    live = {i + 1: x[i] for i in range(50)}
    live[3] = x[40]
    del live[10]
    live[60] = x[10]
    q = x[7]
    mean, count = cache.mean_score(q)
    assert count == len(live) == 50
    assert abs(mean - float(np.mean([v @ q for v in live.values()]))) < 1e-5
