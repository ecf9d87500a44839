"""In-memory float32 matrix caches of vec0 tables, synced incrementally from the `vec_log` table.

SQLite stays the single source of truth: a cache is rebuilt from the vec0 table when it is new,
when the change log was pruned past it, or after a reset, and otherwise applies the log rows
written since its last sync. `X @ q` over 100k x 384 takes ~9 ms on two cores, which a flat
vec0 scan (~60 ms) cannot match. Caches are shared by every MemoryStore of one database file in
the process (one copy of the matrix however many threads open the store).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import apsw
import numpy as np

_TABLES = {
    "page": ("page_vec", "page_id"),
}

_registry: dict[tuple[str, str, int], MatrixCache] = {}
_registry_lock = threading.Lock()


def shared_cache(db_path: str, kind: str, dim: int) -> MatrixCache:
    key = (os.path.realpath(db_path), kind, dim)
    with _registry_lock:
        cache = _registry.get(key)
        if cache is None:
            cache = _registry[key] = MatrixCache(kind, dim)
        return cache


def drop_shared(db_path: str) -> None:
    """Forget the caches of a database file (used when the file is deleted or replaced)."""
    real = os.path.realpath(db_path)
    with _registry_lock:
        for key in [k for k in _registry if k[0] == real]:
            del _registry[key]


PREFILTER_MIN_ROWS = 20_000  # below this the exact scan is already a few milliseconds
# Above it a sign sketch picks the rows to rescore exactly: one bit per dimension of each vector less the mean
# of the rows (48 bytes a 384-d page, where float32 rows take 1,536), compared with the query's bits by Hamming
# distance (XOR and popcount over six 64-bit words a row). Every row within the Hamming distance that holds
# about `cands` of them is rescored: at least PREFILTER_MIN_CANDS, PREFILTER_FACTOR per result asked for, and in
# a large memory one per SKETCH_CANDS_PER_ROWS rows. The sketch keeps as much of the exact top 20 as the
# 96-dimension PCA projection it replaced, reading an eighth of its bytes (docs/benchmarks.md).
PREFILTER_FACTOR = 20
PREFILTER_MIN_CANDS = 2000
SKETCH_CANDS_PER_ROWS = 250  # 4,000 rows rescored at a million
HAMMING_CHUNK = 65_536  # rows of the sketch compared at a time
SAMPLE_ROWS = 2048  # rows sample_scores reads to estimate a query's typical cosine
# A memory of this many rows or more, when loaded, keeps its vectors compact: int8 rows with a scale each (a
# quarter of float32's memory: 390 MB at a million 384-d pages, where float32 takes 1.5 GB). Only the few
# thousand rows a query rescores are converted, and int8 converts fast where float16 does not (2.8 against 20
# ms for 4,000 rows here); cosines differ from float32's by ~3e-3 (docs/benchmarks.md). Below it nothing
# changes: float32 throughout.
COMPACT_FROM_ROWS = 250_000
INT8_LEVELS = 127
LOAD_CHUNK = 50_000  # rows read from SQLite at a time when loading (no second copy of the whole matrix)


class RowMap:
    """Item id -> row of the matrix: an int32 array indexed by id (SQLite's rowids are dense), 4 MB at a
    million pages where a dict of them takes ~95 MB; an id far past the others goes to a dict beside it."""

    DENSE_LIMIT = 1 << 26  # ids below this are kept in the array (256 MB at the most)

    def __init__(self, ids: np.ndarray | None = None):
        self._rows = np.full(0, -1, dtype=np.int32)
        self._far: dict[int, int] = {}
        self._count = 0
        if ids is not None and len(ids):
            dense = ids[ids < self.DENSE_LIMIT]
            self._grow(int(dense.max()) if len(dense) else 0)
            rows = np.arange(len(ids), dtype=np.int32)
            self._rows[dense] = rows[ids < self.DENSE_LIMIT]
            self._far = {int(i): int(r) for i, r in zip(ids, rows) if i >= self.DENSE_LIMIT}
            self._count = len(ids)

    def _grow(self, top: int) -> None:
        if top >= len(self._rows):
            grown = np.full(max(top + 1, len(self._rows) + len(self._rows) // 4 + 1024), -1, dtype=np.int32)
            grown[: len(self._rows)] = self._rows
            self._rows = grown

    def get(self, item_id: int) -> int | None:
        if 0 <= item_id < len(self._rows):
            r = int(self._rows[item_id])
            return r if r >= 0 else None
        return self._far.get(item_id)

    def rows_of(self, item_ids: np.ndarray) -> np.ndarray:
        """The rows of these ids (int64, -1 where an id has none), looked up at once."""
        out = np.full(len(item_ids), -1, dtype=np.int64)
        inside = (item_ids >= 0) & (item_ids < len(self._rows))
        out[inside] = self._rows[item_ids[inside]]
        if self._far:
            for k in np.flatnonzero(~inside):
                out[k] = self._far.get(int(item_ids[k]), -1)
        return out

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, (int, np.integer)) and self.get(int(item_id)) is not None

    def __getitem__(self, item_id: int) -> int:
        r = self.get(item_id)
        if r is None:
            raise KeyError(item_id)
        return r

    def __setitem__(self, item_id: int, row: int) -> None:
        if self.get(item_id) is None:
            self._count += 1
        if 0 <= item_id < self.DENSE_LIMIT:
            self._grow(item_id)
            self._rows[item_id] = row
        else:
            self._far[item_id] = row

    def pop(self, item_id: int, default: int | None = None) -> int | None:
        r = self.get(item_id)
        if r is None:
            return default
        self._count -= 1
        if 0 <= item_id < len(self._rows):
            self._rows[item_id] = -1
        else:
            del self._far[item_id]
        return r

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[int]:
        yield from (int(i) for i in np.flatnonzero(self._rows >= 0))
        yield from list(self._far)

    @property
    def nbytes(self) -> int:
        return int(self._rows.nbytes) + 64 * len(self._far)


def sign_words(vecs: np.ndarray, center: np.ndarray) -> np.ndarray:
    """The sign sketch of float32 rows: (rows, words) uint64, a bit per dimension of `vecs - center`."""
    bits = np.packbits(np.atleast_2d(vecs) - center > 0, axis=1)
    pad = (-bits.shape[1]) % 8
    if pad:
        bits = np.concatenate([bits, np.zeros((len(bits), pad), dtype=np.uint8)], axis=1)
    return bits.view(np.uint64)


def nearest_by_hamming(distances: np.ndarray, cands: int) -> np.ndarray:
    """The rows whose (integer) distance is at most the one that holds `cands` of them: ties at that
    distance all come along, so the set does not depend on the rows' order."""
    counts = np.bincount(distances)
    limit = int(np.searchsorted(np.cumsum(counts), cands))
    return np.flatnonzero(distances <= limit)


class MatrixCache:
    """Exact cosine search over a float32 matrix; above PREFILTER_MIN_ROWS the rows whose sign sketch is
    nearest the query's are rescored exactly (the sketch reads 1/32 of the matrix's bytes: memory traffic
    is what bounds `X @ q`)."""

    def __init__(self, kind: str, dim: int):
        self.kind = kind
        self.table, self.id_col = _TABLES[kind]
        self.dim = dim
        self.lock = threading.RLock()
        self.seq = -1  # last vec_log seq applied; -1 = never loaded
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.scale: np.ndarray | None = None  # a compact matrix's row scales (its rows are int8), else None
        self.ids = np.zeros(0, dtype=np.int64)  # -1 marks a free row
        self.row_of = RowMap()
        self.free: list[int] = []
        self.n = 0  # rows in use (high-water mark)
        self.center: np.ndarray | None = None  # the sketch's origin (a sample's mean), None: no sketch yet
        self.words = (dim + 63) // 64
        self.signs = np.zeros((self.words, 0), dtype=np.uint64)  # the sketch, one row of words per column
        # sample_scores' rows (limit, ids, their vectors), kept until a row changes: gathering 2,048
        # rows spread over the matrix costs more than their product with the query
        self._sample: tuple[int, np.ndarray, np.ndarray] | None = None

    # --- sync -----------------------------------------------------------------------------------
    def sync(self, conn: apsw.Connection) -> None:
        with self.lock:
            if self.seq < 0:
                self._full_load(conn)
                return
            # two subqueries: SQLite answers a lone min() or max() from the index, not both at once
            row = conn.execute("SELECT (SELECT min(seq) FROM vec_log), (SELECT max(seq) FROM vec_log)").fetchone()
            lo, hi = row if row else (None, None)
            if hi is None:
                # log empty: nothing changed since a load that saw seq=0, or the log was cleared
                if self.seq > 0:
                    self._full_load(conn)
                return
            if hi == self.seq:
                return
            if hi < self.seq or (lo is not None and lo > self.seq + 1):
                self._full_load(conn)  # log was pruned or reset past us
                return
            changes: list[Any] = conn.execute(  # rows of (seq, item id, op)
                "SELECT seq, item_id, op FROM vec_log WHERE seq > ? AND kind IN (?, '*') ORDER BY seq",
                (self.seq, self.kind),
            ).fetchall()
            if any(op == "reset" for _, _, op in changes) or len(changes) > 20000:
                self._full_load(conn)
                return
            final: dict[int, str] = {}
            for _, item_id, op in changes:
                final[item_id] = op
            upserts = [i for i, op in final.items() if op == "put"]
            for i, op in final.items():
                if op == "del":
                    self._remove(i)
            for start in range(0, len(upserts), 500):
                chunk = upserts[start : start + 500]
                marks = ",".join("?" * len(chunk))
                got = set()
                for item_id, blob in conn.execute(
                    f"SELECT {self.id_col}, embedding FROM {self.table} WHERE {self.id_col} IN ({marks})", chunk
                ):
                    self._put(item_id, np.frombuffer(blob, dtype=np.float32))
                    got.add(item_id)
                for i in chunk:
                    if i not in got:
                        self._remove(i)
            self.seq = hi

    def _full_load(self, conn: apsw.Connection) -> None:
        self._sample = None
        row = conn.execute("SELECT coalesce(max(seq), 0) FROM vec_log").fetchone()
        hi = row[0] if row else 0
        counted = conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()
        n = int(counted[0]) if counted else 0
        compact = n >= COMPACT_FROM_ROWS
        cap = n + max(1024, n // (64 if compact else 16))  # room to grow before a copy (a large one grows less)
        self.matrix = np.zeros((cap, self.dim), dtype=np.int8 if compact else np.float32)
        self.scale = np.zeros(cap, dtype=np.float32) if compact else None
        self.ids = np.full(cap, -1, dtype=np.int64)
        ids: list[int] = []
        chunk_ids: list[int] = []
        blobs: list[bytes] = []

        def flush() -> None:
            at = len(ids)
            if at + len(chunk_ids) > len(self.matrix):  # rows added since the count
                self._grow(at + len(chunk_ids) + 1024, at)
            self._write(
                slice(at, at + len(chunk_ids)),
                np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(chunk_ids), self.dim),
            )
            ids.extend(chunk_ids)
            chunk_ids.clear()
            blobs.clear()

        for item_id, blob in conn.execute(f"SELECT {self.id_col}, embedding FROM {self.table}"):
            chunk_ids.append(item_id)
            blobs.append(blob)
            if len(chunk_ids) >= LOAD_CHUNK:
                flush()
        flush()
        n = len(ids)
        if len(self.ids) < len(self.matrix):
            self.ids = np.full(len(self.matrix), -1, dtype=np.int64)
        self.ids[:n] = ids
        self.row_of = RowMap(np.asarray(ids, dtype=np.int64))
        self.free = []
        self.n = n
        self.seq = hi
        self.center = None
        self.signs = np.zeros((self.words, 0), dtype=np.uint64)
        self._fit_sketch()

    def _fit_sketch(self) -> None:
        """The sign sketch of every row, centred on the mean of a sample of them (once past PREFILTER_MIN_ROWS)."""
        n = self.n
        if n < PREFILTER_MIN_ROWS:
            return
        rng = np.random.default_rng(0)
        live = np.flatnonzero(self.ids[:n] >= 0)
        sample = self._vectors(rng.choice(live, size=min(4096, len(live)), replace=False))
        self.center = sample.astype(np.float64).mean(axis=0).astype(np.float32)
        self.signs = np.zeros((self.words, len(self.ids)), dtype=np.uint64)
        for start in range(0, n, LOAD_CHUNK):  # no float32 copy of the whole matrix at once
            end = min(n, start + LOAD_CHUNK)
            self.signs[:, start:end] = sign_words(self._vectors(slice(start, end)), self.center).T

    def _put(self, item_id: int, vec: np.ndarray) -> None:
        self._sample = None
        r = self.row_of.get(item_id)
        if r is None:
            if self.free:
                r = self.free.pop()
            else:
                if self.n >= len(self.ids):
                    self._grow(max(1024, len(self.ids) + len(self.ids) // 2), self.n)
                r = self.n
                self.n += 1
            self.row_of[item_id] = r
            self.ids[r] = item_id
        self._write(r, vec)
        if self.center is not None:
            self.signs[:, r] = sign_words(vec, self.center)[0]

    def _grow(self, cap: int, keep: int) -> None:
        """Room for `cap` rows, the first `keep` (matrix, scales, ids, sketch) kept."""
        m = np.zeros((cap, self.dim), dtype=self.matrix.dtype)
        m[:keep] = self.matrix[:keep]
        self.matrix = m
        if self.scale is not None:
            sc = np.zeros(cap, dtype=np.float32)
            sc[:keep] = self.scale[:keep]
            self.scale = sc
        ids = np.full(cap, -1, dtype=np.int64)
        ids[: min(keep, len(self.ids))] = self.ids[: min(keep, len(self.ids))]
        self.ids = ids
        if self.center is not None:
            signs = np.zeros((self.words, cap), dtype=np.uint64)
            signs[:, :keep] = self.signs[:, :keep]
            self.signs = signs

    def _write(self, rows: int | slice, vecs: np.ndarray) -> None:
        """Store float32 vectors at `rows`: as they are, or compact (int8 times a scale per row)."""
        if self.scale is None:
            self.matrix[rows] = vecs
            return
        v = np.atleast_2d(np.asarray(vecs, dtype=np.float32))
        scale = np.abs(v).max(axis=1) / INT8_LEVELS
        safe = np.where(scale > 0, scale, 1.0)
        self.matrix[rows] = np.rint(v / safe[:, None]).astype(np.int8).reshape(self.matrix[rows].shape)
        self.scale[rows] = scale.reshape(np.shape(self.scale[rows]))

    def _vectors(self, rows: int | slice | np.ndarray) -> np.ndarray:
        """The float32 vectors at `rows` (an index, a slice or an array of rows)."""
        m = self.matrix[rows].astype(np.float32, copy=False)
        if self.scale is None:
            return m
        return m * (self.scale[rows][:, None] if m.ndim == 2 else self.scale[rows])

    def _dots(self, rows: int | slice | np.ndarray, q: np.ndarray) -> np.ndarray:
        """`q`'s dot product with the vectors at `rows` (the product first, then a compact row's scale)."""
        d = self.matrix[rows].astype(np.float32, copy=False) @ q
        return d if self.scale is None else d * self.scale[rows]

    def _remove(self, item_id: int) -> None:
        self._sample = None
        r = self.row_of.pop(item_id, None)
        if r is None:
            return
        self.ids[r] = -1
        self.matrix[r] = 0
        if self.scale is not None:
            self.scale[r] = 0.0
        self.free.append(r)

    def invalidate(self) -> None:
        with self.lock:
            self.seq = -1

    # --- queries --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.row_of)

    @property
    def compact(self) -> bool:
        """The vectors are kept as int8 rows with a scale (a memory of COMPACT_FROM_ROWS rows or more when loaded)."""
        return self.scale is not None

    def nbytes(self) -> int:
        """What the vectors take in memory: the matrix (and its row scales), the sketch, the ids and the id ->
        row map."""
        scales = 0 if self.scale is None else self.scale.nbytes
        return int(self.matrix.nbytes + scales + self.signs.nbytes + self.ids.nbytes + self.row_of.nbytes)

    def search(
        self,
        q: np.ndarray,
        k: int,
        exclude: set[int] | None = None,
        mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (ids, cosines) by dot product, best first; `mask` (one bool per row in use): only
        the rows it marks (the pages of the memory spaces a chat reads, memory_core.recall.space_filter)."""
        with self.lock:
            n = self.n
            if n == 0 or k <= 0:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            q = q.astype(np.float32, copy=False)
            if self.center is None and n >= PREFILTER_MIN_ROWS:
                self._fit_sketch()  # grew past the threshold by incremental puts
            cands = max(PREFILTER_MIN_CANDS, PREFILTER_FACTOR * k, n // SKETCH_CANDS_PER_ROWS)
            if self.center is not None and cands < n // 4:
                return self._search_sketched(q, k, cands, exclude, mask)
            scores = self._masked(self.exact_scores(q), exclude, mask, -np.inf)
            rows = np.flatnonzero(np.isfinite(scores))
            return self._best(rows, scores[rows], k)

    def exact_scores(self, q: np.ndarray) -> np.ndarray:
        """The cosine of `q` to every row in use (free rows: 0), a compact matrix read in chunks."""
        with self.lock:
            n, q = self.n, q.astype(np.float32, copy=False)
            if not self.compact:
                return self.matrix[:n] @ q
            out = np.empty(n, dtype=np.float32)
            for start in range(0, n, LOAD_CHUNK):
                end = min(n, start + LOAD_CHUNK)
                out[start:end] = self._dots(slice(start, end), q)
            return out

    def _masked(
        self, values: np.ndarray, exclude: set[int] | None, mask: np.ndarray | None, fill: float | np.uint16
    ) -> np.ndarray:
        """`values` (one per row in use) with free rows, excluded ids and rows `mask` leaves out set to `fill`
        (a score of -inf, a distance past any)."""
        if self.free:  # the rows in use without an id are the free ones (a pass over the ids saved when none)
            values[self.ids[: len(values)] < 0] = fill
        if mask is not None:
            values[~mask[: len(values)]] = fill
        for i in exclude or ():
            r = self.row_of.get(i)
            if r is not None:
                values[r] = fill
        return values

    def _best(self, rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores) of the `k` best of these rows (`scores` one per row), best first."""
        kk = min(k, len(rows))
        if kk == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        top = np.argpartition(-scores, kk - 1)[:kk] if kk < len(rows) else np.arange(len(rows))
        top = top[np.argsort(-scores[top], kind="stable")]
        return self.ids[rows[top]].copy(), scores[top].astype(np.float32)

    def _search_sketched(
        self, q: np.ndarray, k: int, cands: int, exclude: set[int] | None, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by the exact cosine of the rows whose sketch is nearest the query's (see PREFILTER_MIN_ROWS)."""
        assert self.center is not None  # sketched once past PREFILTER_MIN_ROWS
        far = np.uint16(self.words * 64 + 1)  # more than any two sketches differ by: never a candidate
        distance = self._masked(self.hamming(q), exclude, mask, far)
        rows = nearest_by_hamming(distance, cands)
        rows = rows[distance[rows] < far]
        return self._best(rows, self._dots(rows, q), k)

    def hamming(self, q: np.ndarray) -> np.ndarray:
        """Each row in use's Hamming distance from `q`'s sketch (uint16): three numpy calls over the sketch,
        each letting the GIL go (a thread beside this one runs Python meanwhile: a retrieval's other half)."""
        assert self.center is not None
        n = self.n
        qs = sign_words(q.astype(np.float32, copy=False), self.center)[0][:, None]
        out = np.empty(n, dtype=np.uint16)
        for start in range(0, n, HAMMING_CHUNK):  # temporaries that stay in the cache: twice as fast at 1M rows
            end = min(n, start + HAMMING_CHUNK)
            differ = np.bitwise_xor(self.signs[:, start:end], qs)
            out[start:end] = np.bitwise_count(differ).sum(axis=0, dtype=np.uint16)
        return out

    def sample(self, limit: int = SAMPLE_ROWS) -> tuple[np.ndarray, np.ndarray]:
        """(ids, float32 vectors) of every row in use, or of `limit` of them spread evenly over the matrix:
        what pages typically score against a query, so recall can tell a page that stands out. Kept until a
        row changes (gathering 2,048 rows spread over the matrix costs more than their product with a query);
        while kept it is read without the lock, so a search holding it does not hold this up."""
        kept = self._sample
        if kept is not None and kept[0] == limit:
            return kept[1], kept[2]
        with self.lock:
            if self._sample is None or self._sample[0] != limit:
                live = np.flatnonzero(self.ids[: self.n] >= 0)
                if len(live) > limit:
                    live = live[np.linspace(0, len(live) - 1, limit).astype(np.int64)]
                self._sample = (limit, self.ids[live].copy(), self._vectors(live))
            return self._sample[1], self._sample[2]

    def sample_scores(self, q: np.ndarray, limit: int = SAMPLE_ROWS) -> tuple[np.ndarray, np.ndarray]:
        """(ids, cosines) of `q` to the `sample` rows (one product of at most `limit` rows: ~0.1 ms at 2,048)."""
        ids, rows = self.sample(limit)
        return ids.copy(), rows @ q.astype(np.float32, copy=False)

    def scores_for(self, q: np.ndarray, item_ids: Iterable[int]) -> dict[int, float]:
        """{id: cosine of `q`} for these ids (those without a vector left out), in their order."""
        ids = np.fromiter(item_ids, dtype=np.int64)
        with self.lock:
            rows = self.row_of.rows_of(ids)
            have = rows >= 0
            if not have.any():
                return {}
            s = self._dots(rows[have], q.astype(np.float32, copy=False))
            return dict(zip(ids[have].tolist(), s.tolist()))

    def vector(self, item_id: int) -> np.ndarray | None:
        with self.lock:
            r = self.row_of.get(item_id)
            return None if r is None else self._vectors(r).copy()
