"""The table registry (memory_core.storage.tables) against the schema and the code: every table a store
has is registered, every registered table exists, and each table is written by its owner alone.

Writes are found in the source text: an `INSERT [OR x] INTO`, `REPLACE INTO`, `UPDATE [OR x]` or
`DELETE FROM` followed by a table's name (the FTS 'delete-all' and 'optimize' commands are INSERTs,
so they count), and the table names given to the full-text helpers (storage.fts.fts_put / fts_del).
A statement whose table is a placeholder (`{kind}`) must be declared in DYNAMIC with the tables it can
stand for. The migrations (storage/schema.py) make the tables and are not checked.
"""

from __future__ import annotations

import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

from memory_core.cubes.format import RECORD_MEMBERS, VECTOR_MEMBERS
from memory_core.storage import tables

ROOT = Path(__file__).resolve().parents[2] / "memory_core"

WRITE = re.compile(
    r"\b(?:INSERT(?:\s+OR\s+[A-Z]+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+[A-Z]+)?|DELETE\s+FROM)\s+"
    r"([a-z_][a-z0-9_]*|\{[^}]*\})"
)
FTS_HELPER = re.compile(r"\bfts_(?:put|del)\(\s*[\w.]+,\s*\"(\w+)\",\s*\"(\w+)\"")

# statements whose table is a placeholder: module -> placeholder -> the tables it stands for
DYNAMIC: dict[str, dict[str, tuple[str, ...]]] = {
    # the whole-table commands wipe and purge run over the registry itself
    "storage.tables": {"{t.name}": tuple(t.name for t in tables.TABLES), "{name}": tables.fts_tables()},
    # the full-text helpers write the tables their callers name (checked at the call: FTS_HELPER)
    "storage.fts": {"{table}": tables.fts_tables("memory"), "{tri}": tables.fts_tables("memory")},
    # the persona's owner writes a trait or a fact by its kind
    "persona.versions": {"{table}": ("knowledge", "trait")},
}

# writes outside an owner, each with its reason (none today)
ELSEWHERE: set[tuple[str, str]] = set()


def _file(module: str) -> str:
    return f"memory_core/{module.replace('.', '/')}.py"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def writes() -> dict[tuple[str, str], list[int]]:
    """(module, table or placeholder) -> the lines where that module writes it."""
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        module = _module(path)
        if module == "storage.schema":
            continue
        source = path.read_text(encoding="utf-8")
        for pattern in (WRITE, FTS_HELPER):
            for m in pattern.finditer(source):
                line = source.count("\n", 0, m.start()) + 1
                for name in m.groups():
                    found[(module, name)].append(line)
    return found


def _resolved() -> list[tuple[str, str, list[int]]]:
    """(module, table, lines) with placeholders resolved through DYNAMIC; words that are no table and no
    placeholder ("UPDATE the ...", in prose) are left out."""
    out = []
    for (module, name), lines in writes().items():
        if name.startswith("{"):
            # an undeclared placeholder is reported as a write of the table named by it
            out += [(module, t, lines) for t in DYNAMIC.get(module, {}).get(name, (name,))]
        elif name in tables.BY_NAME:
            out.append((module, name, lines))
    return out


def test_every_table_is_registered(open_store):
    store = open_store()
    names = {
        r[0] for r in store.db.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    }
    virtual = {r[0] for r in store.db.rows("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")}
    # the shadow tables a virtual table keeps its data in (page_vec_chunks, page_fts_data...)
    shadows = {n for n in names for v in virtual if n.startswith(v + "_") and n not in virtual}
    schema = names - shadows
    assert schema - set(tables.BY_NAME) == set(), "tables the registry misses"
    assert set(tables.BY_NAME) - schema == set(), "registered tables the schema does not make"
    for t in tables.TABLES:
        assert (t.name in virtual) == (t.kind != "table"), t.name


def test_the_registry_is_consistent():
    assert len(tables.BY_NAME) == len(tables.TABLES)
    for t in tables.TABLES:
        importlib.import_module(f"memory_core.{t.owner}")  # the owner is a module
        if t.cls == "memory" and t.kind != "fts5vocab":
            assert t.wiped, f"a wipe must clear {t.name}"
        if t.cls == "chats":
            assert not t.wiped, f"a wipe keeps {t.name}"
        if t.mirrors is not None:
            assert t.mirrors[0] in tables.BY_NAME and tables.BY_NAME[t.mirrors[0]].owner == t.owner, t.name


def test_every_memory_table_travels_in_a_cube():
    """A memory cube (memory_core.cubes) carries every table of memory but the full-text indexes, which an
    import rebuilds from the text: a new table of memory must say which member holds its rows."""
    members = {name for name, _ in (*RECORD_MEMBERS, *VECTOR_MEMBERS)}
    for t in tables.TABLES:
        assert set(t.cube) <= members, t.name
        if t.cls == "memory" and t.kind not in ("fts5", "fts5vocab"):
            assert t.cube, f"{t.name} travels in no member of a memory cube"


def test_each_table_is_written_by_its_owner_alone():
    stray = []
    for module, table, lines in _resolved():
        if module == "storage.tables" or (module, table) in ELSEWHERE:
            continue
        if table in tables.fts_tables("memory") and module == "storage.fts":
            continue
        if table not in tables.BY_NAME:
            stray.append(f"{_file(module)}:{lines} writes {table}: declare it in DYNAMIC")
            continue
        owner = tables.BY_NAME[table].owner
        if module != owner:
            stray.append(f"{_file(module)}:{lines} writes {table}, owned by {owner}")
    assert not stray, "\n".join(stray)


def test_every_placeholder_declared_is_used():
    found = set(writes())
    unused = [(m, p) for m, names in DYNAMIC.items() for p in names if (m, p) not in found]
    assert not unused, f"take them off DYNAMIC: {unused}"


def test_the_census_sees_writes():
    """The checker itself: it finds the owners' own writes (a regex that found nothing would pass)."""
    found = {(m, t) for m, t, _ in _resolved()}
    assert ("pages.component", "page_vec") in found
    assert ("storage.database", "meta") in found
    assert ("storage.jobs", "job") in found
    assert any(t == "page_fts" and m != "storage.fts" for m, t in found)  # a call of fts_put


@pytest.mark.parametrize("t", [t for t in tables.TABLES if t.wiped], ids=lambda t: t.name)
def test_wipe_clears_every_wiped_table(open_store, t):
    store = open_store()
    store.intake.add_page(None, "I like green tea with jasmine", "Noted, green tea.")
    store.curation.wipe_memory()
    left = store.db.scalar(f"SELECT count(*) FROM {t.name}")
    if t.name == "event":
        assert left == 1  # the wipe's own
    elif t.name == "vec_log":
        assert store.db.rows("SELECT kind, item_id, op FROM vec_log") == [("*", 0, "reset")]
    else:
        assert left == 0
