"""Embedding for the memory: unit vectors of texts and pages, and, with a token embedder, the token vectors
a page's write finds in a small memo (a page is embedded before its write transaction opens)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..storage.codec import unit
from ..storage.database import Database
from ..types import EmbedFn, TokenEmbedFn, page_text
from . import token_match

# token vectors of one text as a token embedder gives them: (its token vectors, its token strings)
TokenRows = tuple[np.ndarray, list[str]]


class Embedding:
    """The embedder the memory is opened with (and its model id)."""

    TOKEN_MEMO_SIZE = 2048  # texts whose token vectors are kept until their page is written
    # a memo entry belongs to a vector this close to its own (the same text, read after the same context)
    TOKEN_MEMO_SAME = 0.9999

    def __init__(self, db: Database, embed: EmbedFn, embed_tokens: TokenEmbedFn | None, model_id: str):
        self.db = db
        self.embed_fn = embed
        self.embed_tokens_fn = embed_tokens
        self.model_id = model_id
        # text -> (its vector, its packed content-token vectors, its side vectors) of the last texts embedded
        # (token_match.pack): a page embedded before its write transaction finds them there when it is stored.
        # A few per text: the same words read after different contexts ("Thanks!") have different vectors
        self._token_memo: dict[str, list[tuple[np.ndarray, bytes, bytes]]] = {}

    @property
    def has_tokens(self) -> bool:
        """Whether the embedder gives token vectors too (word-by-word matching, pages read in context)."""
        return self.embed_tokens_fn is not None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of `texts` (facts, traits, segment summaries, statements); pages go through
        `embed_pages`, which also keeps their token vectors."""
        return self.embed_with_tokens(texts, tokens=False)[0]

    def embed_pages(self, pages: Sequence[tuple[str, str]], contexts: Sequence[str] | None = None) -> np.ndarray:
        """Unit vectors of pages given as (user text, assistant text), each read after `contexts[i]`.
        With a token embedder, each page's packed content-token vectors and side vectors are kept too
        (the memo): a page is embedded before its write transaction, and `Pages.vec_put` finds them there."""
        bodies = [page_text(u, a) or " " for u, a in pages]
        vecs, per_text = self.embed_with_tokens(bodies, tokens=True, contexts=contexts)
        if per_text is not None:
            with self.db.lock:
                for (u, a), t, v, (tv, toks) in zip(pages, bodies, vecs, per_text):
                    sides = token_match.page_sides(tv, toks, u, a)
                    kept = [e for e in self._token_memo.pop(t, []) if float(e[0] @ v) < self.TOKEN_MEMO_SAME]
                    self._token_memo[t] = kept[-3:] + [(v, token_match.pack(tv, toks), sides)]
                while len(self._token_memo) > self.TOKEN_MEMO_SIZE:
                    self._token_memo.pop(next(iter(self._token_memo)))
        return vecs

    def memo_tokens(self, body: str, vec: np.ndarray) -> tuple[bytes, bytes] | None:
        """The packed token rows and side vectors `embed_pages` kept for `body` embedded as `vec`, if any."""
        with self.db.lock:
            entries = self._token_memo.get(body if body.strip() else " ", [])
        v = np.asarray(vec, dtype=np.float32)
        return next(
            ((rows, sides) for w, rows, sides in reversed(entries) if float(w @ v) >= self.TOKEN_MEMO_SAME), None
        )

    def embed_with_tokens(
        self, texts: Sequence[str], *, tokens: bool = True, contexts: Sequence[str] | None = None
    ) -> tuple[np.ndarray, list[TokenRows] | None]:
        """Unit vectors of `texts` and, with a token embedder (and `tokens`), each text's token vectors
        and token strings from the same pass (None without). `contexts`: see TokenEmbedFn."""
        texts = [t if t.strip() else " " for t in texts]
        dim = self.db.dim
        if not texts:
            return np.zeros((0, dim), dtype=np.float32), None
        per_text = None
        if tokens and self.embed_tokens_fn is not None:
            if contexts is not None and any(contexts):
                arr, per_text = self.embed_tokens_fn(list(texts), list(contexts))
            else:
                arr, per_text = self.embed_tokens_fn(list(texts))
            if len(per_text) != len(texts):
                raise ValueError(f"token embedding function returned {len(per_text)} texts, expected {len(texts)}")
        else:
            arr = self.embed_fn(list(texts))
        arr = np.asarray(arr, dtype=np.float32)
        if arr.ndim != 2 or arr.shape != (len(texts), dim):
            raise ValueError(f"embedding function returned shape {arr.shape}, expected ({len(texts)}, {dim})")
        if not np.all(np.isfinite(arr)):
            raise ValueError("embedding function returned non-finite values")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return (arr / np.clip(norms, 1e-12, None)).astype(np.float32), per_text

    def check_vec(self, vec: Any) -> np.ndarray:
        """A vector given by the caller as a finite unit vector of the memory's dimension."""
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
        if v.shape[0] != self.db.dim or not np.all(np.isfinite(v)):
            raise ValueError(f"embedding must be a finite vector of dimension {self.db.dim}")
        return unit(v)
