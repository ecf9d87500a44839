"""The dense search alone at a million pages: `python -m tests.bench.vector_scale [--rows 1000000]`.

The page matrix (memory_core.storage.vecindex.MatrixCache) loaded from a vector table of `--rows` synthetic unit
vectors (clustered like the retrieval benchmark's pages: 3,000 topics and noise), as a memory that size
is when opened: int8 rows from COMPACT_FROM_ROWS rows, and a sign sketch. Prints the search's
p50/p95 for queries like new pages on those topics, what the vectors take in memory,
and the share of the exact top-20 (every row scanned) that the search returns.
Targets (issue "MemoryOS organisation that means something"): p95 of a whole retrieval <= 100 ms at a
million pages, the page vectors <= 1 GB, >= 95 % of the exact top-20 kept. This measures the vector part;
the whole retrieval at a million pages needs a store that size (`python -m tests.bench.retrieval --sizes
1000000 --db FILE`: about an hour to fill on two cores).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as tests.bench.retrieval, for the same reason

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import apsw
import numpy as np

from memory_core.storage import vecindex


def _topics(dim: int, seed: int = 7) -> np.ndarray:
    centers = np.random.default_rng(seed).standard_normal((3000, dim)).astype(np.float32)
    return centers / np.linalg.norm(centers, axis=1, keepdims=True)


def _like_pages(rng: np.random.Generator, centers: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Unit vectors around these topics, with the retrieval benchmark's noise."""
    dim = centers.shape[1]
    v = centers[idx] + 0.9 * rng.standard_normal((len(idx), dim)).astype(np.float32) / np.sqrt(dim)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _fill(conn: apsw.Connection, rows: int, centers: np.ndarray, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    conn.execute("CREATE TABLE page_vec(page_id INTEGER PRIMARY KEY, embedding BLOB)")
    conn.execute("CREATE TABLE vec_log(seq INTEGER PRIMARY KEY, kind TEXT, item_id INTEGER, op TEXT)")
    for start in range(0, rows, 50_000):
        n = min(50_000, rows - start)
        v = _like_pages(rng, centers, np.arange(start, start + n) % len(centers))
        with conn:
            conn.executemany("INSERT INTO page_vec VALUES (?, ?)", ((start + i + 1, v[i].tobytes()) for i in range(n)))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=100, help="results asked for (the ranking asks dense_candidates)")
    ap.add_argument("--queries", type=int, default=60)
    args = ap.parse_args(argv)
    dim = 384  # the bundled embedder's
    centers = _topics(dim)
    # a query is like a new page on one of the topics (real questions would match nothing here: the
    # synthetic pages are no sentences; tests.bench.retrieval embeds its first 1,000 pages for real)
    rng = np.random.default_rng(11)
    queries = _like_pages(rng, centers, rng.integers(0, len(centers), args.queries))
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-vectors-") as tmp:
        conn = apsw.Connection(str(Path(tmp) / "vectors.db"))
        t0 = time.perf_counter()
        _fill(conn, args.rows, centers)
        fill_s = time.perf_counter() - t0
        cache = vecindex.MatrixCache("page", dim)
        t0 = time.perf_counter()
        cache.sync(conn)
        load_s = time.perf_counter() - t0
        lat, kept = [], []
        for _ in range(3):
            for q in queries:
                t = time.perf_counter()
                cache.search(q, args.k)
                lat.append((time.perf_counter() - t) * 1000)
        for q in queries:
            got, _ = cache.search(q, 20)
            exact = cache.ids[: cache.n][np.argsort(-cache.exact_scores(q))[:20]]
            kept.append(len(set(got.tolist()) & set(exact.tolist())) / 20)
    result = {
        "rows": args.rows,
        "dtype": str(cache.matrix.dtype),
        "sketch_bytes_per_row": int(cache.signs.shape[0] * 8),
        "vector_memory_mb": round(cache.nbytes() / 2**20, 1),
        "search_ms_p50": round(statistics.median(lat), 2),
        "search_ms_p95": round(float(np.percentile(lat, 95)), 2),
        "exact_top20_kept_mean": round(float(np.mean(kept)), 3),
        "exact_top20_kept_min": round(float(np.min(kept)), 3),
        "fill_s": round(fill_s, 1),
        "load_s": round(load_s, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
