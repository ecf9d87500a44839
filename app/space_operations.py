"""Memory spaces as the app offers them (the window's space picker and `mnemo memory spaces`): small
operations over `store.spaces` (memory_core.spaces), one place for both to call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_core.spaces import SpaceError, SpaceInfo

__all__ = [
    "SpaceError",
    "chat_space",
    "create_space",
    "import_as_space",
    "new_chat_space",
    "set_chat_space",
    "spaces",
]


def spaces(store) -> list[SpaceInfo]:
    """Every space with its counts."""
    return store.spaces.list()


def create_space(store, name: str) -> int:
    return store.spaces.create(name)


def chat_space(store, cid: int) -> tuple[int, str, bool]:
    """(the space chat `cid` writes to, its name, whether it reads every space)."""
    sid, reads = store.spaces.chat_space(cid)
    return sid, store.spaces.name_of(sid), reads == "all"


def set_chat_space(store, cid: int, space: str | int | None = None, *, read_all: bool | None = None) -> int:
    """Point chat `cid` at a space (by name or id) and/or set it to read every space; returns its space.
    New pages of the chat go there; what it wrote before stays (`move_chat` takes it along)."""
    sid = store.spaces.resolve(space) if space is not None else None
    store.spaces.set_chat_space(cid, sid, reads=None if read_all is None else ("all" if read_all else "own"))
    return store.spaces.chat_space(cid)[0]


def new_chat_space(store, current_cid: int | None) -> int:
    """The space a new chat takes: the one of the chat open now (the user's current space), else the first."""
    if current_cid is not None:
        try:
            return store.spaces.chat_space(current_cid)[0]
        except SpaceError:
            pass
    return min(s.id for s in store.spaces.list())


def import_as_space(
    store, path: str | Path, name: str, *, on_progress: Callable[[str, int, int], None] | None = None
) -> tuple[Any, int]:
    """Import the cube at `path` as a new space `name`: what it adds goes there (what the memory already
    holds is recognised and stays where it is, as any import). Returns (the import's record, space id).
    The space is made first, so a name taken fails before anything is imported."""
    sid = store.spaces.create(name)
    try:
        record = store.import_cube(path, on_progress=on_progress)
    except BaseException:
        if store.spaces.get(sid) is not None and store.spaces.get(sid).empty:
            store.spaces.delete(sid)
        raise
    if record.status == "done":
        store.spaces.adopt_import(record.id, sid)
    return record, sid
