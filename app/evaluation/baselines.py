"""Turn-level retrieval baselines for LoCoMo, built over exactly the turn texts the importer
writes (speaker name + text + photo caption), with the same embedder as the memory:

- `FlatDense`: every turn embedded; cosine top-k by a numpy matrix product.
- `BM25Turns`: an FTS5 table (tokenizer `porter unicode61`, i.e. stemmed) in an apsw
  in-memory database, ranked by FTS5's `bm25()`; the query is the OR of its word tokens.
- `rrf_fuse`: reciprocal-rank fusion (k = 60) of the two rankings ("hybrid").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


class FlatDense:
    name = "flat-dense"

    def __init__(self, ids: Sequence[str], texts: Sequence[str], embed: Callable[[Sequence[str]], np.ndarray]):
        self.ids = list(ids)
        self.matrix = np.asarray(embed(list(texts)), dtype=np.float32) if texts else np.zeros((0, 1), np.float32)

    def rank(self, query_vec: np.ndarray, n: int | None = None) -> list[str]:
        if not self.ids:
            return []
        scores = self.matrix @ np.asarray(query_vec, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")
        if n is not None:
            order = order[:n]
        return [self.ids[i] for i in order]


class BM25Turns:
    name = "bm25"

    def __init__(self, ids: Sequence[str], texts: Sequence[str]):
        import apsw

        self.conn = apsw.Connection(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE turns USING fts5(dia UNINDEXED, body, tokenize='porter unicode61')")
        with self.conn:
            self.conn.executemany("INSERT INTO turns(dia, body) VALUES (?, ?)", list(zip(ids, texts)))

    @staticmethod
    def match_query(query: str) -> str:
        tokens = []
        for tok in _WORD.findall(query.lower()):
            if tok not in tokens:
                tokens.append(tok)
        return " OR ".join(f'"{t}"' for t in tokens)

    def rank(self, query: str, n: int = 100) -> list[str]:
        q = self.match_query(query)
        if not q:
            return []
        rows = self.conn.execute(
            "SELECT dia FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?", (q, n)
        ).fetchall()
        return [str(r[0]) for r in rows]  # dia is a TEXT column

    def close(self) -> None:
        self.conn.close()


def rrf_fuse(rankings: Sequence[Sequence[str]], k: float = 60.0, n: int | None = None) -> list[str]:
    """Reciprocal-rank fusion: score(d) = Σ 1 / (k + rank_d), rank from 1; ties keep first-seen order."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for r, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + r)
    fused = sorted(scores, key=lambda d: -scores[d])
    return fused[:n] if n is not None else fused
