"""Pin, unpin and forget: the memory verbs a person uses on one item or a few, one function each.

The window, the CLI and MCP call these alike, and each returns a record that says what it did in the same words
everywhere ("Fact 3 pinned.", "Forgot 2 pages."), where each front end used to call the store raw and word the
outcome its own way. Remembering is `app.operations.remember`; forgetting what one chat taught is
`app.operations.chat_memory`; everything at once is `mnemo memory wipe` (`store.curation.wipe_memory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.wording import count, item_name

if TYPE_CHECKING:
    from memory_core import MemoryStore


@dataclass(frozen=True)
class Pinned:
    """What `pin` did: `found` is False when memory holds no such item."""

    kind: str
    item_id: int
    pinned: bool
    found: bool

    def describe(self) -> str:
        name = item_name(self.kind, self.item_id)
        name = name[:1].upper() + name[1:]
        if not self.found:
            return f"{name} is not in memory."
        return f"{name} {'pinned' if self.pinned else 'unpinned'}."


@dataclass(frozen=True)
class Forgotten:
    """What `forget` did: the items asked for, and how many of them memory held and removed."""

    kind: str
    ids: tuple[int, ...]
    removed: int

    def describe(self) -> str:
        if not self.removed:
            return f"Nothing forgotten: memory holds no {item_name(self.kind, None)} {_ids(self.ids)}."
        if len(self.ids) == 1:
            name = item_name(self.kind, self.ids[0])
            return f"{name[:1].upper() + name[1:]} forgotten."
        return f"Forgot {count(self.removed, item_name(self.kind, None))}."


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


def pin(store: MemoryStore, kind: str, item_id: int, pinned: bool = True) -> Pinned:
    """Pin an item (kept from eviction and automatic updates) or unpin it; `kind` is page, segment, knowledge or
    trait (ValueError otherwise)."""
    found = store.curation.pin(kind, int(item_id), pinned)
    return Pinned(kind, int(item_id), pinned, found)


def forget(store: MemoryStore, kind: str, ids: int | Sequence[int]) -> Forgotten:
    """Forget items for good, with what was drawn only from them (`Curation.forget`)."""
    id_list = (int(ids),) if isinstance(ids, int) else tuple(int(i) for i in ids)
    return Forgotten(kind, id_list, store.curation.forget(kind, id_list))
