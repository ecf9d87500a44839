"""`MemoryStore.spaces`: named parts of one memory (MemOS's readable and writable cubes).

A page, segment, fact and trait belongs to one space (column `space_id`, migration `_m_spaces`); a chat
writes its pages to its space and recalls from the spaces it reads (`conversation.read_spaces`: NULL
its own only, 'all', or a JSON list of ids). Recall filters by `read_set` (memory_core.recall.space_filter).

Copying makes new items in the target space with the same text, vectors and sources (a page's chat,
messages and time; a fact's source pages), each noting what it was copied from; the copies of a
segment's pages make a segment of their own there, so a segment still holds one space.

Moving keeps a segment to one space: the moved pages of a segment become a segment of their own in the
target space (same tier and heat), and both are rebuilt. A merge moves every item of one space into
another with the dedup of a cube import (memory_core.spaces.fusion): a page the target holds is dropped,
a fact or trait close to one of the target's confirms or updates it by the persona's rules, one that
would change a pinned item is left beside it and reported. Traits are kept
with the space they were learned in (a space's export and deletion take them) but the persona read
into every reply is the user's whole persona: who the user is does not change with the project.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..conversations import Conversations
from ..pages.component import Pages
from ..persona.merge import PersonaMerge
from ..persona.versions import Versions
from ..segments.component import Segments
from ..storage.codec import from_json
from ..storage.database import Database
from .fusion import SpaceFusion, SpaceMerge

List = list  # `Spaces.list` (the method) hides the builtin inside the class
DEFAULT_SPACE = 1
MAX_NAME = 80


@dataclass
class SpaceInfo:
    """One space and what it holds."""

    id: int
    name: str
    created_at: float
    pages: int
    facts: int
    traits: int
    chats: int

    @property
    def empty(self) -> bool:
        return not (self.pages or self.facts or self.traits)


class _Rehearsed(Exception):
    """Raised inside a dry run's transaction to roll it back, carrying what it found."""

    def __init__(self, result: SpaceMerge):
        super().__init__("dry run")
        self.result = result


class SpaceError(ValueError):
    """A space that does not exist, a name taken or empty, or a deletion refused (one line, for the user)."""


def clean_name(name: str) -> str:
    text = " ".join((name or "").split())
    if not text:
        raise SpaceError("a space needs a name")
    if len(text) > MAX_NAME:
        raise SpaceError(f"a space's name is at most {MAX_NAME} characters")
    return text


class Spaces:
    def __init__(
        self,
        db: Database,
        pages: Pages,
        segments: Segments,
        versions: Versions,
        conversations: Conversations,
        forget: Callable[[str, Sequence[int]], int],
        persona: PersonaMerge,
    ):
        self.db = db
        self.pages = pages
        self.segments = segments
        self.versions = versions
        self.conversations = conversations
        self._forget = forget  # Curation.forget: what forgetting a space's items does
        self.persona = persona  # the persona's rules, by which a merge joins facts and traits

    # ------------------------------------------------------------------ reading
    def list(self) -> List[SpaceInfo]:
        """Every space with its counts (active facts and traits), by id."""
        rows = self.db.rows(
            "SELECT s.id, s.name, s.created_at, "
            "(SELECT count(*) FROM page p WHERE p.space_id = s.id), "
            "(SELECT count(*) FROM knowledge k WHERE k.space_id = s.id AND k.status = 'active'), "
            "(SELECT count(*) FROM trait t WHERE t.space_id = s.id AND t.status = 'active'), "
            "(SELECT count(*) FROM conversation c WHERE c.space_id = s.id) FROM space s ORDER BY s.id"
        )
        return [SpaceInfo(*r) for r in rows]

    def get(self, space_id: int) -> SpaceInfo | None:
        return next((s for s in self.list() if s.id == space_id), None)

    def resolve(self, ref: str | int) -> int:
        """The id of the space named `ref` (case-insensitive) or of id `ref`; SpaceError when none."""
        if isinstance(ref, int) or (isinstance(ref, str) and ref.strip().isdigit()):
            sid = int(ref)
            if self.db.scalar("SELECT 1 FROM space WHERE id = ?", (sid,)):
                return sid
            raise SpaceError(f"no space {sid}")
        row = self.db.one("SELECT id FROM space WHERE lower(name) = lower(?)", (" ".join(str(ref).split()),))
        if row is None:
            raise SpaceError(f"no space named {ref!r}")
        return int(row[0])

    def names(self) -> dict[int, str]:
        """Every space's name by id (no counts: what a list that names each item's space needs)."""
        return {int(r[0]): str(r[1]) for r in self.db.rows("SELECT id, name FROM space ORDER BY id")}

    def name_of(self, space_id: int) -> str:
        return str(self.db.scalar("SELECT name FROM space WHERE id = ?", (space_id,)) or f"space {space_id}")

    def read_set(self, conversation_id: int | None) -> frozenset[int] | None:
        """The spaces chat `conversation_id` recalls from: None for every space ('all'), else a set; a
        chat that does not exist (or None) reads the default space."""
        row = None
        if conversation_id is not None:
            row = self.db.one("SELECT space_id, read_spaces FROM conversation WHERE id = ?", (conversation_id,))
        if row is None:
            return frozenset({DEFAULT_SPACE})
        own, reads = int(row[0]), row[1]
        if reads == "all":
            return None
        if reads is None:
            return frozenset({own})
        try:
            ids = {int(x) for x in json.loads(reads)}
        except (ValueError, TypeError):
            ids = set()
        return frozenset(ids | {own})

    def chat_space(self, conversation_id: int) -> tuple[int, str]:
        """(the space a chat writes to, 'own' | 'all' | 'some': what it reads)."""
        row = self.db.one("SELECT space_id, read_spaces FROM conversation WHERE id = ?", (conversation_id,))
        if row is None:
            raise SpaceError(f"no chat {conversation_id}")
        reads = "own" if row[1] is None else ("all" if row[1] == "all" else "some")
        return int(row[0]), reads

    # ------------------------------------------------------------------ changing spaces
    def create(self, name: str) -> int:
        name = clean_name(name)
        with self.db.transaction():
            if self.db.scalar("SELECT 1 FROM space WHERE lower(name) = lower(?)", (name,)):
                raise SpaceError(f"a space named {name!r} exists already")
            self.db.execute("INSERT INTO space(name, created_at) VALUES (?, ?)", (name, self.db.clock()))
            sid = self.db.last_insert_rowid()
            self.db.emit("space_created", None, None, f"space {name!r} created", {"space_id": sid})
            return sid

    def rename(self, space_id: int, name: str) -> None:
        name = clean_name(name)
        with self.db.transaction():
            self.resolve(space_id)
            other = self.db.scalar("SELECT id FROM space WHERE lower(name) = lower(?)", (name,))
            if other is not None and other != space_id:
                raise SpaceError(f"a space named {name!r} exists already")
            self.db.execute("UPDATE space SET name = ? WHERE id = ?", (name, space_id))

    def delete(self, space_id: int, *, forget: bool = False) -> int:
        """Delete a space. One that holds memory is refused unless `forget`: its pages, facts and traits
        are then forgotten (as the forget command does). Its chats move to the first space left; the
        last space cannot go. Returns the number of items forgotten."""
        with self.db.transaction():
            info = self.get(space_id)
            if info is None:
                raise SpaceError(f"no space {space_id}")
            left = self.db.scalar("SELECT min(id) FROM space WHERE id != ?", (space_id,))
            if left is None:
                raise SpaceError("the last space cannot be deleted")
            if not info.empty and not forget:
                raise SpaceError(
                    f"space {info.name!r} holds {info.pages} pages, {info.facts} facts and {info.traits} traits: "
                    "forget them with it, or move them first"
                )
            n = 0
            for kind in ("knowledge", "trait", "page"):
                ids = [r[0] for r in self.db.rows(f"SELECT id FROM {kind} WHERE space_id = ?", (space_id,))]
                n += self._forget(kind, ids) if ids else 0
            for (sid,) in self.db.rows("SELECT id FROM segment WHERE space_id = ?", (space_id,)):
                self._forget("segment", [sid])
            self.conversations.leave_space(space_id, left)
            self.db.execute("DELETE FROM space WHERE id = ?", (space_id,))
            self.db.emit("space_deleted", None, None, f"space {info.name!r} deleted", {"forgotten": n})
            return n

    def set_chat_space(self, conversation_id: int, space_id: int | None = None, *, reads: str | None = None) -> None:
        """Set the space chat `conversation_id` writes to and/or what it reads: 'own' (its space only)
        or 'all'. Its pages written before stay where they are (move them to take them along)."""
        with self.db.transaction():
            self.chat_space(conversation_id)
            if space_id is not None:
                self.resolve(space_id)
                self.conversations.set_space(conversation_id, space_id)
            if reads is not None:
                if reads not in ("own", "all"):
                    raise SpaceError("a chat reads its own space ('own') or every space ('all')")
                value = None if reads == "own" else "all"
                self.conversations.set_read_spaces(conversation_id, value)

    # ------------------------------------------------------------------ moving items
    def move_pages(self, page_ids: Sequence[int], to: int) -> int:
        """Move pages to space `to`; a segment's moved pages become a segment of their own there.
        Returns how many pages moved."""
        self.resolve(to)
        with self.db.transaction():
            ids = self._existing("page", page_ids, other_than=to)
            by_segment: dict[int | None, List[int]] = {}
            for pid, sid in self._rows_in("SELECT id, segment_id FROM page WHERE id IN ({})", ids):
                by_segment.setdefault(sid, []).append(pid)
            for sid, pids in by_segment.items():
                self.pages.move_space(pids, to)
                if sid is None:
                    continue
                whole = not self.db.scalar(
                    "SELECT count(*) FROM page WHERE segment_id = ? AND space_id != ?", (sid, to)
                )
                if whole:
                    self.segments.move_space([sid], to)
                else:
                    self._split_segment(sid, pids, to)
            if ids:
                self.db.emit("space_moved", None, None, f"{len(ids)} pages moved to space {to}", {"moved": len(ids)})
            return len(ids)

    def move_facts(self, kind: str, ids: Sequence[int], to: int) -> int:
        """Move facts ('knowledge') or traits ('trait') to space `to`; returns how many moved."""
        if kind not in ("knowledge", "trait"):
            raise SpaceError("kind must be 'knowledge' or 'trait'")
        self.resolve(to)
        with self.db.transaction():
            found = self._existing(kind, ids, other_than=to)
            self.versions.move_space(kind, found, to)
            return len(found)

    def move_chat(self, conversation_id: int, to: int) -> int:
        """Move a chat (it writes to `to` from now) and every page it wrote; returns the pages moved."""
        with self.db.transaction():
            self.set_chat_space(conversation_id, to)
            ids = [r[0] for r in self.db.rows("SELECT id FROM page WHERE conversation_id = ?", (conversation_id,))]
            return self.move_pages(ids, to)

    # ------------------------------------------------------------------ copying items
    def copy_facts(self, kind: str, ids: Sequence[int], to: int) -> List[int]:
        """Copy facts ('knowledge') or traits ('trait') into space `to`: a new item there with the same
        text, vector and source pages (its first version). Items already in `to` are not copied.
        Returns the new ids, in the order of `ids`."""
        if kind not in ("knowledge", "trait"):
            raise SpaceError("kind must be 'knowledge' or 'trait'")
        self.resolve(to)
        with self.db.transaction():
            new: List[int] = []
            for old in self._existing(kind, ids, other_than=to):
                nid = self.versions.copy(kind, old, to)
                new.append(nid)
            if new:
                what = "facts" if kind == "knowledge" else "traits"
                self.db.emit(
                    "space_copied", None, None, f"{len(new)} {what} copied to space {to}", {"copied": len(new)}
                )
            return new

    def copy_pages(self, page_ids: Sequence[int], to: int) -> List[int]:
        """Copy pages into space `to`: a new page there with the same text, time, chat, messages and
        vectors (`meta.copied_from` the original). The copies of one segment's pages make a segment of
        their own in `to` (same tier and heat), rebuilt from them. Pages already in `to` are not
        copied. Returns the new ids."""
        self.resolve(to)
        skip = {"id", "space_id", "segment_id", "dedupe_key", "prev_page_id", "chain_id", "meta"}
        with self.db.transaction():
            new: List[int] = []
            segments: dict[int, int] = {}  # the original's segment -> the copies' segment
            for old in self._existing("page", page_ids, other_than=to):
                sid, meta = self.db.one("SELECT segment_id, meta FROM page WHERE id = ?", (old,))
                seg = (
                    None
                    if sid is None
                    else segments.get(sid) or segments.setdefault(sid, self.segments.copy_empty(sid, to))
                )
                info = from_json(meta, {})
                info = {**(info if isinstance(info, dict) else {}), "copied_from": old}
                nid = self.pages.copy(old, to, seg, info, skip)
                new.append(nid)
            for seg in segments.values():
                self.segments.rebuild(seg)
            if new:
                self.db.emit("space_copied", None, None, f"{len(new)} pages copied to space {to}", {"copied": len(new)})
            return new

    def merge(self, source: int, target: int, *, dry_run: bool = False) -> SpaceMerge:
        """Fuse space `source` into `target` with the dedup of a cube import (memory_core.spaces.fusion):
        what the target holds already is dropped from the source, a fact or trait close to one of the
        target's confirms or updates it as the persona does (unless that one is pinned: both are left,
        and reported), the rest moves; the source space is deleted and its chats write to the target.
        With `dry_run` it is all worked out and rolled back: what a merge would do, for a question first."""
        if source == target:
            raise SpaceError("a space cannot be merged into itself")
        self.resolve(source), self.resolve(target)
        try:
            with self.db.transaction():
                result = self._merge(source, target)
                if dry_run:
                    raise _Rehearsed(result)
                return result
        except _Rehearsed as done:
            done.result.dry_run = True
            return done.result

    def _merge(self, source: int, target: int) -> SpaceMerge:
        out = SpaceMerge(self.name_of(source), self.name_of(target))
        fusion = SpaceFusion(self.db, self.pages, self.versions, self.persona, self._forget)
        out.pages.duplicates = fusion.drop_held_pages(source, target)
        out.pages.moved = self.move_pages(self._ids_of("page", source), target)
        for kind, counts in (("knowledge", out.facts), ("trait", out.traits)):
            fusion.fuse_persona(kind, source, target, out, out.source)
            counts.moved = self.move_facts(kind, self._ids_of(kind, source), target)
        self.segments.move_space(self._ids_of("segment", source), target)
        self.conversations.leave_space(source, target)
        self.db.execute("DELETE FROM space WHERE id = ?", (source,))
        self.db.emit(
            "space_merged", None, None, f"space {source} merged into space {target}", {"merged": out.to_json()}
        )
        return out

    def adopt_import(self, import_id: int, to: int) -> int:
        """Put what cube import `import_id` added (its chats, pages, segments, facts, traits) in space
        `to`: a cube imported as a new space. What the memory held already stays where it was."""
        with self.db.transaction():
            n = 0
            for kind, table in (
                ("chat", "conversation"),
                ("page", "page"),
                ("segment", "segment"),
                ("knowledge", "knowledge"),
                ("trait", "trait"),
            ):
                ids = [
                    r[0]
                    for r in self.db.rows(
                        "SELECT item_id FROM cube_import_item WHERE import_id = ? AND kind = ? AND action = 'added' "
                        "AND item_id IS NOT NULL",
                        (import_id, kind),
                    )
                ]
                self._mark(table, ids, to)  # each by its table's owner
                n += len(ids) if kind == "page" else 0
            return n

    # ------------------------------------------------------------------ helpers
    def _ids_of(self, table: str, space_id: int) -> List[int]:
        return [r[0] for r in self.db.rows(f"SELECT id FROM {table} WHERE space_id = ?", (space_id,))]

    def _rows_in(self, sql: str, ids: Sequence[int]) -> List[tuple]:
        out: List[tuple] = []
        ids = list(ids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            out += self.db.rows(sql.format(",".join("?" * len(chunk))), chunk)
        return out

    def _existing(self, table: str, ids: Sequence[int], *, other_than: int) -> List[int]:
        rows = self._rows_in(f"SELECT id FROM {table} WHERE id IN ({{}}) AND space_id != {int(other_than)}", ids)
        return sorted(r[0] for r in rows)

    def _mark(self, table: str, ids: Sequence[int], to: int) -> None:
        """These rows of `table` now belong to space `to`."""
        if table == "conversation":
            self.conversations.move_space(ids, to)
        elif table == "page":
            self.pages.move_space(ids, to)
        elif table == "segment":
            self.segments.move_space(ids, to)
        else:
            self.versions.move_space(table, ids, to)

    def _split_segment(self, sid: int, pids: List[int], to: int) -> None:
        """Pages `pids` of segment `sid` leave it for a new segment in space `to`, of the same tier and heat."""
        new = self.segments.copy_empty(sid, to)
        self.pages.move_segment(pids, new)
        self.segments.rebuild(new)
        self.segments.rebuild(sid)
