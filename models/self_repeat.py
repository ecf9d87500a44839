"""A sampling penalty that keeps a reply from reciting the model's own earlier replies.

In a long chat every reply the model wrote is in the next prompt, and a small model copies it back:
with the bundled SmolLM2-135M, about half the sentences of a 12-message chat were word-for-word
copies of its earlier replies (`python -m tests.bench.long_chat`), whole paragraphs at a time, so
replies grew with recycled text and stopped answering what was asked. llama.cpp's repeat penalty
looks at the last 64 tokens only, and its DRY sampler ("don't repeat yourself", not exposed by
llama-cpp-python's completion API) penalises repeats of anything in the context, including the
user's words and the recalled memory a reply should quote.

This applies DRY's rule to the earlier replies alone: once the reply's last `allowed` tokens or more
match a stretch of an earlier reply, the token that would continue that stretch loses
`multiplier * base ** (match - allowed)` logits, the longest match counting. Quoting the user
("your beagle Pepper") costs nothing; a sentence of its own copied again costs more with every token.
`allowed` is 5, not DRY's 2: with 3 or 4 free tokens the model, asked "And what did he count?" about
its own answer ("The old lighthouse keeper counted seventeen gulls…"), turned away from it to describe
the keeper's beard; with 5 it answers, and long copies still end (tests.bench.long_chat, docs/benchmarks.md).
Plain numpy on token ids, run as a llama-cpp-python logits processor: tens of microseconds a token.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class SelfRepeatPenalty:
    """A logits processor (`llama_cpp.LogitsProcessorList([...])`) for one reply.

    `earlier`: the token ids of each earlier reply of the conversation. The first call sees the whole
    prompt; from then on each call's new ids (the tokens sampled since) extend the match.
    """

    def __init__(
        self,
        earlier: Sequence[Sequence[int]],
        *,
        multiplier: float = 0.8,
        base: float = 1.75,
        allowed: int = 5,
        max_exponent: int = 16,
    ):
        ids: list[int] = []
        for reply in earlier:
            ids.extend(int(t) for t in reply)
            ids.append(-1)  # replies do not run into each other
        self._ids = np.asarray(ids, dtype=np.int64)
        self._next = np.append(self._ids[1:], -1) if len(ids) else self._ids
        self._match = np.zeros(len(ids), dtype=np.int32)  # match length ending at each position
        self.multiplier = multiplier
        self.base = base
        self.allowed = max(1, allowed)
        self.max_exponent = max_exponent
        self._seen: int | None = None
        self.penalised = 0  # tokens at which a penalty applied (for tests, benchmarks)

    @property
    def active(self) -> bool:
        return self.multiplier > 0 and len(self._ids) > 0

    def feed(self, token: int) -> None:
        """The reply's next token: extend (or end) every running match."""
        if not len(self._ids):
            return
        prev = np.empty_like(self._match)  # the match that ended one position before
        prev[0] = 0
        prev[1:] = self._match[:-1]
        self._match = np.where(self._ids == token, prev + 1, 0)  # int32 stays int32: no copy per token

    def penalties(self) -> dict[int, float]:
        """Logits to subtract now, by token id (the longest match decides a token's penalty)."""
        at = np.nonzero(self._match >= self.allowed)[0]
        if not len(at):
            return {}
        nxt = self._next[at]
        keep = nxt >= 0
        at, nxt = at[keep], nxt[keep]
        exponent = np.minimum(self._match[at] - self.allowed, self.max_exponent)
        out: dict[int, float] = {}
        for tok, pen in zip(nxt.tolist(), (self.multiplier * self.base**exponent).tolist()):
            if pen > out.get(tok, 0.0):
                out[tok] = pen
        return out

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        n = len(input_ids)
        if self._seen is None:  # the first call: the prompt, nothing of the reply yet
            self._seen = n
            return scores
        for tok in input_ids[self._seen : n]:
            self.feed(int(tok))
        self._seen = n
        pens = self.penalties() if self.active else {}
        if not pens:
            return scores
        self.penalised += 1
        scores = np.array(scores, copy=True)
        ids = np.fromiter(pens.keys(), dtype=np.int64, count=len(pens))
        scores[ids] -= np.fromiter(pens.values(), dtype=scores.dtype, count=len(pens))
        return scores
