"""A small progress bar on stderr (no tqdm): redrawn in place on a terminal, a line every
10% otherwise (logs and CI), silent when disabled."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(
        self,
        total: int,
        *,
        label: str = "",
        unit: str = "items",
        stream: TextIO | None = None,
        enabled: bool = True,
        width: int = 30,
    ):
        self.total = max(0, int(total))
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.width = width
        self.done = 0
        self.note = ""
        self.start = time.monotonic()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_decile = -1

    def update(self, n: int = 1, note: str | None = None) -> None:
        self.done = min(self.total, self.done + n) if self.total else self.done + n
        if note is not None:
            self.note = note
        self._draw()

    def _line(self) -> str:
        elapsed = time.monotonic() - self.start
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "█" * filled + "░" * (self.width - filled)
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 and self.total else 0.0
        note = f"  {self.note}" if self.note else ""
        return (
            f"{self.label} |{bar}| {self.done}/{self.total} {self.unit} {frac * 100:5.1f}% "
            f"{elapsed:6.1f}s eta {eta:5.1f}s{note}"
        )

    def _draw(self, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self._tty:
            if final or now - self._last_draw > 0.1 or self.done == self.total:
                self.stream.write("\r\x1b[K" + self._line()[:200])
                self.stream.flush()
                self._last_draw = now
        else:
            decile = int(10 * self.done / self.total) if self.total else 10
            if decile != self._last_decile or final:
                self._last_decile = decile
                self.stream.write(self._line() + "\n")
                self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._tty:
            self._draw(final=True)
            self.stream.write("\n")
            self.stream.flush()
        elif self._last_decile != 10:
            self._draw(final=True)
