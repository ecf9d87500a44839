"""Which pages one retrieval may recall, when a chat reads only some of the memory's spaces.

Spaces (memory_core.spaces.component) split one memory into named parts; a chat recalls from the spaces it
reads. Ranking itself stays one list over every page it may see: the dense search masks the rows of
other spaces in the page matrix, the keyword searches and dialogue neighbours drop their pages. So the
scores of a page do not depend on how the memory is split (a memory of three spaces read together ranks
as one memory of the same pages).

`SpaceMap` keeps page id → space id in memory (one int16 per page id), in step with the page table:
new pages are read by id; a move between spaces or a deletion bumps `meta.space_epoch` (triggers of
the spaces migration), and the map is read again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..storage.vecindex import MatrixCache

Execute = Callable[..., Any]


@dataclass
class SpaceScope:
    """The spaces one retrieval reads, and the page → space map it judges pages by."""

    spaces: frozenset[int]
    space_of: np.ndarray  # page id -> space id; -1: no such page (yet)

    def allows(self, page_id: int) -> bool:
        return 0 <= page_id < len(self.space_of) and int(self.space_of[page_id]) in self.spaces

    def keep(self, page_ids: Iterable[int]) -> list[int]:
        return [i for i in page_ids if self.allows(i)]

    def allowed(self, page_ids: np.ndarray) -> np.ndarray:
        """One bool per id of `page_ids` (-1 for a free row): the page is in a space read."""
        known = (page_ids >= 0) & (page_ids < len(self.space_of))
        spaces = np.full(len(page_ids), -1, dtype=np.int32)
        spaces[known] = self.space_of[page_ids[known]]
        return np.isin(spaces, np.fromiter(self.spaces, dtype=np.int32))

    def row_mask(self, cache: MatrixCache) -> np.ndarray:
        """One bool per row in use of the page matrix: the row's page is in a space read."""
        return self.allowed(cache.ids[: cache.n])


class SpaceMap:
    """page id → space id, read from the page table once and then kept in step (see the module)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.space_of = np.full(0, -1, dtype=np.int16)
        self.last_id = 0  # the highest page id read
        self.epoch: str | None = None  # meta.space_epoch when last read in full
        self.loaded = False

    def scope(self, execute: Execute, spaces: frozenset[int] | None) -> SpaceScope | None:
        """What a retrieval reading `spaces` (None: every space) may recall; None when nothing is
        left out (every space read, or the memory has one space only): ranking then filters nothing."""
        if spaces is None:
            return None
        all_spaces = {r[0] for r in execute("SELECT id FROM space").fetchall()}
        if all_spaces <= set(spaces):
            return None
        self.sync(execute)
        return SpaceScope(frozenset(spaces), self.space_of)

    def sync(self, execute: Execute) -> None:
        with self.lock:
            row = execute("SELECT value FROM meta WHERE key = 'space_epoch'").fetchone()
            epoch = row[0] if row else "0"
            if not self.loaded or epoch != self.epoch:
                self._read(execute, 0)
                self.epoch, self.loaded = epoch, True
                return
            self._read(execute, self.last_id)

    def _read(self, execute: Execute, after: int) -> None:
        rows = execute("SELECT id, space_id FROM page WHERE id > ? ORDER BY id", (after,)).fetchall()
        if after == 0:
            self.space_of = np.full(0, -1, dtype=np.int16)
            self.last_id = 0
        if not rows:
            return
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        top = int(ids[-1])
        if top >= len(self.space_of):
            grown = np.full(max(top + 1, len(self.space_of) + len(self.space_of) // 4 + 1024), -1, dtype=np.int16)
            grown[: len(self.space_of)] = self.space_of
            self.space_of = grown
        self.space_of[ids] = np.fromiter((r[1] for r in rows), dtype=np.int16, count=len(rows))
        self.last_id = max(self.last_id, top)
