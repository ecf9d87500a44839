"""The table registry: every table of the memory file, what it holds and which module writes it.

Why: a table with many writers is a table a forget or a wipe can miss. Each table here has one owner,
the one module whose SQL inserts, updates and deletes its rows; others call the owner's named
operations (`Pages.delete(ids)`, `Pages.move_space(ids, space)`, `Segments.delete(sid)`...).
tests/memory_core/test_tables.py fails when a table of the schema is missing here, when the registry
names a table the schema does not make, or when a module other than the owner writes a table.

Classes:
- memory: what Mnemo learned (pages, segments, chains, traits, facts, their versions, vectors and
  full-text rows); a wipe deletes it all.
- chats: the conversations and their messages, the user's own record; a wipe keeps them.
- bookkeeping: what the engine keeps to run (meta, jobs, events, the vector change log, cube imports,
  the spaces' names); `wiped` says which of it goes with a wipe (jobs, events, imports and the vector
  log hold or point at memory; meta and the spaces do not).

Data flows one way (an owner never imports the modules that call it), which decides the owners that
are not obvious: `meta`, `event` and `vec_log` belong to storage/database.py, the one object every
component holds (a vector owner logs its puts and deletes through `Database.log_vec`, and the matrix
caches of storage/vecindex.py only read the log); `job` belongs to storage/jobs.py; the persona's
tables to persona/versions.py, the lowest of the persona modules (merge and the persona component
take it in their constructors). Whole-table commands (`clear`, `optimize`), which wipe and purge run
over the registry, are the one write outside the owners: they touch no row by its content. Replies' traces
lose the text of forgotten memory through the message table's owner too: conversations.py rewrites them in
the forgetting transaction (`Purge.at_seal`), traces.py only the JSON.

The order of TABLES is the order a wipe clears them in: a table before the tables its rows point at.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

TableClass = Literal["memory", "chats", "bookkeeping"]
TableKind = Literal["table", "vec0", "fts5", "fts5vocab"]


class _Executes(Protocol):
    def execute(self, sql: str, params: Any = ()) -> Any: ...


@dataclass(frozen=True)
class Table:
    """One table of the schema.

    `owner` is the module (under memory_core) whose SQL writes it. `mirrors` names the base table and
    the column holding its id when every row of this one stands for a row of it (a vector, a
    full-text row): the integrity check compares the two. `wiped`: a wipe clears it. `cube`: the members of
    a memory cube (memory_core.cubes.format) its rows travel in; none for an index rebuilt from the text
    on import (full-text rows) and for what a cube does not carry."""

    name: str
    cls: TableClass
    owner: str
    kind: TableKind = "table"
    wiped: bool = False
    mirrors: tuple[str, str] | None = None
    cube: tuple[str, ...] = ()

    @property
    def fts(self) -> bool:
        return self.kind == "fts5"


def _memory(
    name: str, owner: str, cube: tuple[str, ...], kind: TableKind = "table", mirrors: tuple[str, str] | None = None
) -> Table:
    return Table(name, "memory", owner, kind, wiped=True, mirrors=mirrors, cube=cube)


PERSONA_RECORDS = ("traits.jsonl", "facts.jsonl")  # an item's history and sources travel in its record
PAGES = "pages.component"
SEGMENTS = "segments.component"
PERSONA = "persona.versions"
DATABASE = "storage.database"
CUBES = "cubes.staging"

TABLES: tuple[Table, ...] = (
    # the persona: traits, facts, their old versions and the pages each version came from
    _memory("derivation", PERSONA, PERSONA_RECORDS),
    _memory("item_version", PERSONA, PERSONA_RECORDS),
    _memory("trait", PERSONA, ("traits.jsonl", "vectors/persona.jsonl")),
    _memory("knowledge", PERSONA, ("facts.jsonl",)),
    _memory("knowledge_vec", PERSONA, ("vectors/persona.jsonl",), "vec0", mirrors=("knowledge", "knowledge_id")),
    _memory("knowledge_fts", PERSONA, (), "fts5", mirrors=("knowledge", "rowid")),
    _memory("knowledge_tri", PERSONA, (), "fts5"),  # CJK facts only
    # pages, then the segments and chains they point at
    _memory("page", PAGES, ("pages.jsonl",)),
    _memory("page_vec", PAGES, ("vectors/pages.jsonl",), "vec0", mirrors=("page", "page_id")),
    _memory("page_tok", PAGES, ("vectors/pages.jsonl",)),
    _memory("page_fts", PAGES, (), "fts5", mirrors=("page", "rowid")),
    _memory("page_tri", PAGES, (), "fts5"),  # CJK pages only
    Table("page_fts_vocab", "memory", PAGES, "fts5vocab"),  # a read-only view of page_fts
    _memory("chain", SEGMENTS, ("chains.jsonl",)),
    _memory("segment", SEGMENTS, ("segments.jsonl", "vectors/segments.jsonl")),
    _memory("segment_vec", SEGMENTS, ("vectors/segments.jsonl",), "vec0", mirrors=("segment", "segment_id")),
    # chats: the user's record, never wiped (a cube carries a page's chat, not its messages)
    Table("conversation", "chats", "conversations", cube=("chats.jsonl",)),
    Table("message", "chats", "conversations"),
    Table("message_fts", "chats", "conversations", "fts5"),  # kept by the message table's triggers
    # bookkeeping
    Table("job", "bookkeeping", "storage.jobs", wiped=True),
    Table("event", "bookkeeping", DATABASE, wiped=True, cube=("events.jsonl",)),
    Table("cube_stage", "bookkeeping", CUBES, wiped=True),
    Table("cube_import_item", "bookkeeping", CUBES, wiped=True),
    Table("cube_import", "bookkeeping", CUBES, wiped=True),
    Table("vec_log", "bookkeeping", DATABASE, wiped=True),
    Table("meta", "bookkeeping", DATABASE),
    Table("space", "bookkeeping", "spaces.component"),
)

BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}


def fts_tables(cls: TableClass | None = None) -> tuple[str, ...]:
    """The FTS5 tables (of one class), in registry order."""
    return tuple(t.name for t in TABLES if t.fts and (cls is None or t.cls == cls))


def wiped() -> Iterator[Table]:
    """The tables a wipe clears, in an order the foreign keys allow."""
    return (t for t in TABLES if t.wiped)


def clear(db: _Executes, t: Table) -> None:
    """Delete every row of `t`: a full-text table with its 'delete-all' command (the contentless ones
    refuse a DELETE without a rowid), any other with DELETE."""
    if t.kind == "fts5vocab":
        return
    if t.fts:
        db.execute(f"INSERT INTO {t.name}({t.name}) VALUES ('delete-all')")
    else:
        db.execute(f"DELETE FROM {t.name}")


def optimize(db: _Executes, name: str) -> None:
    """Merge every segment of the full-text table `name` into one, dropping its deleted entries."""
    if not BY_NAME[name].fts:
        raise ValueError(f"{name} is not a full-text table")
    db.execute(f"INSERT INTO {name}({name}) VALUES ('optimize')")
