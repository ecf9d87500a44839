"""Memory spaces as the app offers them (the window's space picker and `mnemo memory spaces`): small
operations over `store.spaces` (memory_core.spaces.component), one place for both to call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.wording import count
from memory_core.spaces.component import SpaceError, SpaceInfo
from memory_core.spaces.fusion import SpaceMerge
from memory_core.text import one_line

if TYPE_CHECKING:
    from memory_core import MemoryStore

__all__ = [
    "SpaceError",
    "chat_space",
    "copy_items",
    "create_space",
    "delete_space",
    "describe_merge",
    "describe_space",
    "merge_lines",
    "import_as_space",
    "merge_spaces",
    "move_items",
    "SpaceInfo",
    "SpaceMerge",
    "new_chat_space",
    "rename_space",
    "set_chat_space",
    "spaces",
]

KINDS = ("page", "knowledge", "trait")


def spaces(store: MemoryStore) -> list[SpaceInfo]:
    """Every space with its counts."""
    return store.spaces.list()


def create_space(store: MemoryStore, name: str) -> int:
    return store.spaces.create(name)


def describe_space(info: SpaceInfo) -> str:
    """What a space holds, in a few plain words ("12 pages, 3 facts, 2 chats"; "empty")."""
    parts = [
        count(info.pages, "page"),
        count(info.facts, "fact"),
        count(info.traits, "trait"),
        count(info.chats, "chat"),
    ]
    held = [p for p, n in zip(parts, (info.pages, info.facts, info.traits, info.chats)) if n]
    return ", ".join(held) if held else "empty"


def rename_space(store: MemoryStore, space: str | int, name: str) -> str:
    """Rename a space (by name or id); returns its new name."""
    sid = store.spaces.resolve(space)
    store.spaces.rename(sid, name)
    return store.spaces.name_of(sid)


def delete_space(store: MemoryStore, space: str | int, *, forget: bool = False) -> str:
    """Delete a space; one holding memory only with `forget` (its memory is forgotten with it; SpaceError
    otherwise). Its chats then remember in the first space left. Returns a sentence for the user."""
    sid = store.spaces.resolve(space)
    name = store.spaces.name_of(sid)
    n = store.spaces.delete(sid, forget=forget)
    return f"Space “{name}” deleted" + (f"; {count(n, 'item')} forgotten with it." if n else ".")


def merge_spaces(store: MemoryStore, source: str | int, target: str | int, *, dry_run: bool = False) -> SpaceMerge:
    """Merge space `source` into `target` (by name or id; memory_core.spaces.component.Spaces.merge), or with
    `dry_run` work out what that would do and change nothing. `merge_lines` says it in words."""
    src, dst = store.spaces.resolve(source), store.spaces.resolve(target)
    return store.spaces.merge(src, dst, dry_run=dry_run)


def _things(pairs: list[tuple[int, str]]) -> str:
    """ "2 pages, 1 fact and 3 traits" of the non-zero counts (or '' when all are zero)."""
    said = [count(n, noun) for n, noun in pairs if n]
    return ", ".join(said[:-1]) + f" and {said[-1]}" if len(said) > 1 else "".join(said)


def _short(text: str, n: int = 80) -> str:
    """A memory item quoted in a sentence: one line, at most `n` characters, without its closing full stop."""
    return one_line(" ".join(text.split()).rstrip("."), n)


def merge_lines(m: SpaceMerge) -> list[str]:
    """What a merge did (or, for a dry run, would do), a sentence a line: what moves, what the target held
    already, which of its facts and traits were confirmed or updated, what was older, and what was left
    beside a pinned item (quoted, a few)."""
    would, dst = m.dry_run, m.target
    moved = _things([(m.pages.moved, "page"), (m.facts.moved, "fact"), (m.traits.moved, "trait")]) or "nothing"
    out = [
        f"Merging “{m.source}” into “{dst}” would move {moved}."
        if would
        else f"“{m.source}” merged into “{dst}”: {moved} moved."
    ]

    def say(pairs: list[tuple[int, str]], will: str, did: str) -> None:
        what = _things(pairs)
        if what:
            out.append(f"{will if would else did}: {what}.")

    say(
        [(m.pages.duplicates, "page"), (m.facts.duplicates, "fact"), (m.traits.duplicates, "trait")],
        f"Already in “{dst}”, kept once",
        f"Already in “{dst}”, kept once",
    )
    confirmed = [(m.facts.confirmed, "fact"), (m.traits.confirmed, "trait")]
    say(confirmed, f"Said again, would confirm what “{dst}” holds", f"Said again, confirmed what “{dst}” holds")
    updated = [(m.facts.updated, "fact"), (m.traits.updated, "trait")]
    why = "the older text stays a version"
    say(updated, f"Newer, would update what “{dst}” holds ({why})", f"Newer, updated what “{dst}” holds ({why})")
    older = [(m.facts.older, "fact"), (m.traits.older, "trait")]
    say(
        older, f"Older than what “{dst}” holds, would be kept archived", f"Older than what “{dst}” holds, kept archived"
    )
    if m.conflicts:
        quoted = "; ".join(f"“{_short(c.offered)}” (pinned: “{_short(c.held)}”)" for c in m.conflicts[:3])
        more = f" and {len(m.conflicts) - 3} more" if len(m.conflicts) > 3 else ""
        left = "would be left" if would else "left"
        out.append(f"Against a pinned item, {left} beside it: {quoted}{more}.")
    return out


def describe_merge(m: SpaceMerge) -> str:
    """`merge_lines` as one paragraph (the command line's answer)."""
    return " ".join(merge_lines(m))


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise SpaceError("kind must be 'page', 'knowledge' or 'trait'")
    return kind


def move_items(store: MemoryStore, kind: str, ids: list[int], to: str | int) -> int:
    """Move pages, facts or traits to space `to` (by name or id); returns how many moved."""
    sid = store.spaces.resolve(to)
    if _kind(kind) == "page":
        return store.spaces.move_pages(ids, sid)
    return store.spaces.move_facts(kind, ids, sid)


def copy_items(store: MemoryStore, kind: str, ids: list[int], to: str | int) -> list[int]:
    """Copy pages, facts or traits to space `to`: new items there with the same text, vectors and
    sources; returns the new ids (items already in `to` are not copied)."""
    sid = store.spaces.resolve(to)
    if _kind(kind) == "page":
        return store.spaces.copy_pages(ids, sid)
    return store.spaces.copy_facts(kind, ids, sid)


def chat_space(store: MemoryStore, cid: int) -> tuple[int, str, bool]:
    """(the space chat `cid` writes to, its name, whether it reads every space)."""
    sid, reads = store.spaces.chat_space(cid)
    return sid, store.spaces.name_of(sid), reads == "all"


def set_chat_space(
    store: MemoryStore, cid: int, space: str | int | None = None, *, read_all: bool | None = None
) -> int:
    """Point chat `cid` at a space (by name or id) and/or set it to read every space; returns its space.
    New pages of the chat go there; what it wrote before stays (`move_chat` takes it along)."""
    sid = store.spaces.resolve(space) if space is not None else None
    store.spaces.set_chat_space(cid, sid, reads=None if read_all is None else ("all" if read_all else "own"))
    return store.spaces.chat_space(cid)[0]


def new_chat_space(store: MemoryStore, current_cid: int | None) -> int:
    """The space a new chat takes: the one of the chat open now (the user's current space), else the first."""
    if current_cid is not None:
        try:
            return store.spaces.chat_space(current_cid)[0]
        except SpaceError:
            pass
    return min(s.id for s in store.spaces.list())


def import_as_space(
    store: MemoryStore,
    path: str | Path,
    name: str,
    *,
    on_progress: Callable[[str, int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[Any, int]:
    """Import the cube at `path` as a new space `name`: what it adds goes there (what the memory already
    holds is recognised and stays where it is, as any import). Returns (the import's record, space id).
    The space is made first, so a name taken fails before anything is imported."""
    sid = store.spaces.create(name)
    try:
        record = store.cubes.import_cube(path, on_progress=on_progress, cancelled=cancelled)
    except BaseException:
        if (space := store.spaces.get(sid)) is not None and space.empty:
            store.spaces.delete(sid)
        raise
    if record.status == "done":
        store.spaces.adopt_import(record.id, sid)
    return record, sid
