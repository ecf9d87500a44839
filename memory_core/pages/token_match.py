"""Word-by-word matching of a query against pages (late interaction, ColBERT's MaxSim).

A page is embedded as one pooled vector, which blurs a passing mention ("Took a short trip last week
to Rome") into the rest of what was said. The embedder's own token vectors keep it: each content word
of the query takes its best cosine among the page's content words, and the page's token score is the
mean over the query's words. The token vectors come from the same encoder pass that makes the pooled
vector (`TokenEmbedFn`), so ingest costs no extra model time; they are stored as 4-bit rows (about
24 content tokens, 4.6 KB, per LoCoMo page). Why: docs/decisions/0001-pages-keep-their-word-vectors.md.

Plain functions and small blobs: no state here, the store keeps the rows in `page_tok`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

from .. import text as T

# WordPiece markers of a word's continuation ("##ing") and the specials an encoder adds
_CONT = "##"
_UNKNOWN = "[UNK]"


def content_positions(tokens: Sequence[str], drop: Iterable[str] = ()) -> list[int]:
    """Indices of the tokens that carry topic: the pieces of words that are not stop words, not one
    or two latin letters and not in `drop` (lower-case words: the query's common words); punctuation
    goes. A continuation piece ("##ing") goes with the word it continues. CJK characters are kept."""
    dropped = {w.lower() for w in drop}
    keep: list[int] = []
    for i, tok in enumerate(tokens):
        if tok.startswith(_CONT):
            if keep and keep[-1] == i - 1:
                keep.append(i)
            continue
        if T.has_cjk(tok):
            keep.append(i)
            continue
        if not any(c.isalnum() for c in tok):
            continue
        if tok in T.STOPWORDS or (len(tok) < 3 and not tok.isdigit()) or tok in dropped:
            continue
        keep.append(i)
    return keep


# Each value of a row is stored in 4 bits: -7..7 (as 1..15) times the row's largest value / 7, two values a
# byte: recall as with 8 bits for half the bytes (docs/decisions/0001-pages-keep-their-word-vectors.md).
LEVELS = 7


def row_bytes(dim: int) -> int:
    """Bytes of one packed row (two values a byte)."""
    return (dim + 1) // 2


def pack(vectors: np.ndarray, tokens: Sequence[str]) -> bytes:
    """A page's content-token vectors as 4-bit rows (row-major, `row_bytes` each); each row scaled by its
    own largest value, which `unpack` divides out again by renormalising."""
    keep = content_positions(tokens)
    if not keep:
        return b""
    v = np.asarray(vectors, dtype=np.float32)[keep]
    scale = np.abs(v).max(axis=1, keepdims=True)
    q = (np.round(v / np.clip(scale, 1e-12, None) * LEVELS) + LEVELS + 1).astype(np.uint8)  # 1..15
    if q.shape[1] % 2:
        q = np.concatenate([q, np.full((len(q), 1), LEVELS + 1, np.uint8)], axis=1)  # a zero pads
    return ((q[:, 0::2] << 4) | q[:, 1::2]).tobytes()


def _rows(blob: bytes, dim: int) -> np.ndarray:
    """The whole rows of a packed blob as (m, dim) float32, not yet normalised (a blob cut short loses its
    partial row)."""
    rb = row_bytes(dim)
    b = np.frombuffer(blob[: len(blob) // rb * rb], dtype=np.uint8).reshape(-1, rb)
    v = np.empty((len(b), 2 * rb), dtype=np.float32)
    v[:, 0::2] = b >> 4
    v[:, 1::2] = b & 15
    return v[:, :dim] - (LEVELS + 1)


def unpack(blob: bytes, dim: int) -> np.ndarray:
    """The (m, dim) float32 unit rows of a `pack` blob (m = 0 for a page without content words)."""
    v = _rows(blob, dim)
    return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def query_matrix(vectors: np.ndarray, tokens: Sequence[str], drop: Iterable[str] = ()) -> np.ndarray | None:
    """The query's content-token rows (None when it has no content word: "Hi!", "How are you?")."""
    keep = content_positions(tokens, drop)
    if not keep:
        return None
    return np.asarray(vectors, dtype=np.float32)[keep]


def maxsim_packed(query: np.ndarray, blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """`maxsim` over `pack` blobs, unpacked in one piece (a query's candidate pool is a few hundred
    pages: one conversion, one product and one segmented max instead of a few hundred small ones).
    The high nibbles (even dimensions) and low nibbles (odd ones) are unpacked as two contiguous halves,
    the query's columns put in the same order; the rows are not normalised, their products are divided
    by their norms (a pass over the rows fewer)."""
    rb = row_bytes(dim)
    # whole rows only: a damaged blob (cut short) loses its partial row instead of failing the query
    kept = [b if len(b) % rb == 0 else b[: len(b) // rb * rb] for b in blobs]
    sizes = np.array([len(b) // rb for b in kept], dtype=np.int64)
    out = np.zeros(len(sizes), dtype=np.float32)
    if not len(sizes) or sizes.sum() == 0:
        return out
    raw = np.frombuffer(b"".join(kept), dtype=np.uint8).reshape(-1, rb)
    v = np.empty((len(raw), 2 * rb), dtype=np.float32)
    np.right_shift(raw, 4, out=v[:, :rb], casting="unsafe")
    np.bitwise_and(raw, 15, out=v[:, rb:], casting="unsafe")
    v -= LEVELS + 1  # the padding of an odd dim is 0 and meets a 0 column of the query
    q = np.zeros((len(query), 2 * rb), dtype=np.float32)
    q[:, : (dim + 1) // 2] = query[:, 0::2]
    q[:, rb : rb + dim // 2] = query[:, 1::2]
    sims = v @ q.T  # (rows, query words)
    sims /= np.clip(np.sqrt(np.einsum("ij,ij->i", v, v)), 1e-12, None)[:, None]
    has = sizes > 0
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[has]
    out[has] = np.maximum.reduceat(sims, starts, axis=0).mean(axis=1)
    return out


def maxsim(query: np.ndarray, pages: Sequence[np.ndarray]) -> np.ndarray:
    """For each page: the mean over the query's rows of their best cosine among the page's rows
    (0 for a page without rows). One matrix product over all pages' rows."""
    sizes = np.array([len(p) for p in pages], dtype=np.int64)
    rows = np.concatenate([p for p in pages if len(p)], axis=0) if sizes.sum() else None
    return _segment_maxsim(query, rows, sizes)


def _segment_maxsim(query: np.ndarray, rows: np.ndarray | None, sizes: np.ndarray) -> np.ndarray:
    """maxsim of pages whose rows lie one after another in `rows`, `sizes[i]` rows for page i."""
    out = np.zeros(len(sizes), dtype=np.float32)
    if rows is None or not len(sizes) or sizes.sum() == 0:
        return out
    sims = query @ rows.T  # (q, total rows)
    has = sizes > 0
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[has]
    out[has] = np.maximum.reduceat(sims, starts, axis=1).mean(axis=0)
    return out


# ---------------------------------------------------------------------------------------------- sides
# A page holds two turns (what the user said and the reply), and often only one of them answers a
# question. Each side's token vectors, from the page's own encoder pass (so each side is read beside
# the other and after the page's context), are pooled into a side vector; retrieval ranks a page's
# better side at the page's place and its other side lower, so the prompt's room for recalled turns
# goes to more pages (docs/decisions/0007-turns-ranked-one-by-one.md).


def _normalised_letters(text: str) -> str:
    """What an uncased WordPiece tokenizer keeps of `text`, as letters: accents stripped (NFD, marks
    dropped), lower case, no whitespace or control characters."""
    decomposed = unicodedata.normalize("NFD", text)
    kept = "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()
    return "".join(c for c in kept if not c.isspace() and unicodedata.category(c)[0] != "C")


def side_split(tokens: Sequence[str], user_text: str) -> int | None:
    """How many of a page's `tokens` (the WordPiece strings of `page_text(user, assistant)`, specials
    left out) spell its user side: the tokens' letters are matched against the user text's own. None
    when they do not line up exactly (an unknown word other than symbols such as emoji; a normaliser this
    does not know) or when either side has no token (a page cut at the encoder's length): the page then
    ranks whole."""
    target = _normalised_letters(user_text)
    if not target:
        return None
    spelt = 0
    for i, tok in enumerate(tokens):
        if spelt == len(target):
            return i
        if tok == _UNKNOWN and spelt < len(target) and unicodedata.category(target[spelt])[0] == "S":
            while spelt < len(target) and unicodedata.category(target[spelt])[0] == "S":
                spelt += 1  # an emoji (or a run of them) the vocabulary lacks
            continue
        piece = tok[len(_CONT) :] if tok.startswith(_CONT) else tok
        if not piece or target[spelt : spelt + len(piece)] != piece:
            return None
        spelt += len(piece)
    return None


def pack_sides(vectors: np.ndarray, split: int | None) -> bytes:
    """The page's two side vectors (the mean of each side's token vectors, unit length) as int8 values
    × 127, user side first: 2 × dim bytes. b"" for a page that is not split (`side_split` None)."""
    v = np.asarray(vectors, dtype=np.float32)
    if split is None or not 0 < split < len(v):
        return b""
    sides = np.stack([v[:split].mean(axis=0), v[split:].mean(axis=0)])
    sides /= np.clip(np.linalg.norm(sides, axis=1, keepdims=True), 1e-12, None)
    return np.round(sides * 127).astype(np.int8).tobytes()


def page_sides(vectors: np.ndarray, tokens: Sequence[str], user_text: str, assistant_text: str) -> bytes:
    """`pack_sides` of a page from its encoder pass: b"" for a page with one side only."""
    both = bool((user_text or "").strip() and (assistant_text or "").strip())
    return pack_sides(vectors, side_split(tokens, user_text) if both else None)


def unpack_sides(blob: bytes | None, dim: int) -> np.ndarray | None:
    """The (2, dim) float32 unit side vectors of a `pack_sides` blob; None for b"", None or a damaged blob."""
    if not blob or len(blob) != 2 * dim:
        return None
    v = np.frombuffer(blob, dtype=np.int8).reshape(2, dim).astype(np.float32)
    return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def side_cosines(blobs: Sequence[bytes | None], q: np.ndarray, dim: int) -> list[tuple[float, float] | None]:
    """For each `pack_sides` blob, the cosines of `q` with its user and assistant side vectors (`unpack_sides`),
    None where it has none: the blobs of a recall converted and multiplied at once, not one by one."""
    whole = [i for i, b in enumerate(blobs) if b and len(b) == 2 * dim]
    out: list[tuple[float, float] | None] = [None] * len(blobs)
    if whole:
        raw = b"".join(blobs[i] or b"" for i in whole)
        v = np.frombuffer(raw, dtype=np.int8).reshape(len(whole), 2, dim).astype(np.float32)
        v /= np.clip(np.linalg.norm(v, axis=2, keepdims=True), 1e-12, None)
        for i, (cu, ca) in zip(whole, (v @ q).tolist()):
            out[i] = (cu, ca)
    return out
