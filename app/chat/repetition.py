"""Notice when a streaming reply has started to loop, and where the loop began.

Small local models (the bundled 135M one above all) sometimes fall into a loop: the same sentence or
phrase again and again until the token limit. Sampling settings make that rarer, not impossible, so
the agent watches the stream and stops it once it only repeats itself; the reply keeps what came
before the loop (one round of it). Plain string work on text already received, about 60 µs per
token at the end of a 3 KB reply: cheap enough to run on every chunk.
"""

from __future__ import annotations

import re

_UNIT = re.compile(r"[^.!?\n]+(?:[.!?]+|\n)")  # complete sentences or lines only
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W\d_]{2,}")  # a word of letters: a run of digits or dashes is no loop


def _norm(unit: str) -> str:
    return _SPACE.sub(" ", unit.strip(" \t\n-*•>").lower())


class RepetitionGuard:
    """Feed it the reply as it streams; `looping` turns true once the reply goes round in circles:

    - since the last sentence or line that was new, the reply has only repeated earlier ones, and one
      of them twice ("A. A. A.", "A. B. A. B. A."); a chorus sung again after a new verse is fine; or
    - the end of the reply is one stretch of 12–300 characters said `times` times in a row (loops
      that never end a sentence: "la vida que le dara, pero la vida que le dara, pero …").

    Sentences and lines count when they hold 3+ words of letters. `kept()` is the reply up to where
    the loop began. Code blocks are left alone: code repeats lines legitimately.
    """

    def __init__(self, times: int = 3, *, min_words: int = 3, min_period: int = 12, max_period: int = 300):
        self.times = times
        self.min_words = min_words
        self.min_period = min_period
        self.max_period = max_period
        self.text = ""
        self.looping = False
        self._cut: int | None = None
        self._units_end = 0  # text[:_units_end] has been split into units
        self._seen: set[str] = set()  # normalised sentences and lines said so far
        self._run: list[tuple[str, int]] = []  # repeated units since the last new one: (unit, start)
        self._in_code = False  # inside a ``` fence (as of _units_end)

    def feed(self, chunk: str) -> bool:
        if self.looping or not chunk:
            return self.looping
        self.text += chunk
        self._scan_units()
        if not self.looping:
            self._scan_tail()
        return self.looping

    def kept(self) -> str:
        """The reply without the loop (all of it when there is none)."""
        return self.text if self._cut is None else self.text[: self._cut].rstrip()

    def _scan_units(self) -> None:
        for m in _UNIT.finditer(self.text, self._units_end):
            self._units_end = m.end()
            if m.group().count("```") % 2:
                self._in_code = not self._in_code
                continue
            unit = _norm(m.group())
            if self._in_code or len(_WORD.findall(unit)) < self.min_words:
                continue
            if unit not in self._seen:
                self._seen.add(unit)
                self._run = []
                continue
            if any(u == unit for u, _ in self._run):  # a second time since anything new: a loop
                self.looping = True
                self._cut = self._run[0][1]  # keep what came before the repeating began
                return
            self._run.append((unit, m.start()))

    def _scan_tail(self) -> None:
        text = self.text
        if self._in_code or text.count("```", self._units_end) % 2:
            return
        n, m = len(text), self.min_period
        if n < m * self.times:
            return
        # Candidate periods are where the last m characters occurred before (str.rfind, in C: a Python
        # loop over every period cost ~250 µs per token at the end of a long reply), nearest first.
        key, lo = text[n - m :], max(0, n - self.max_period - m)
        pos = text.rfind(key, lo, n - m)
        while pos != -1:
            period = n - m - pos
            tail = text[n - period :]
            if (
                period * self.times <= n
                and len(_WORD.findall(tail)) >= self.min_words
                and all(text[n - (k + 1) * period : n - k * period] == tail for k in range(1, self.times))
            ):
                cut = n - (self.times - 1) * period
                while 0 < cut < n and text[cut - 1].isalnum() and text[cut].isalnum():
                    cut -= 1  # not inside a word
                self.looping = True
                self._cut = cut
                return
            pos = text.rfind(key, lo, pos + m - 1)
