"""Whole-file operations: an online backup copy and the consistency check across base, vector and FTS
tables (tests, `mnemo doctor`); which table mirrors which comes from the registry (storage.tables)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import apsw

from .. import text as T
from ..types import page_text
from . import tables
from .database import Database


def backup(
    db: Database,
    path: str | Path,
    *,
    pages_per_step: int = 2048,
    on_progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Path:
    """Copy the whole database to `path` with SQLite's online backup, a few thousand pages at a
    time (this connection's lock is held per step only, so other work goes on in between; other
    connections keep writing, WAL). Written to a temp file and renamed: `path` is either the old
    file or a complete new copy. `cancelled()` true between steps stops it (InterruptedError,
    nothing left behind). Returns `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.unlink(missing_ok=True)
    os.close(os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))  # the user's alone, like the memory
    dest = apsw.Connection(str(tmp))
    try:
        with dest.backup("main", db.conn, "main") as b:
            while not b.done:
                if cancelled is not None and cancelled():
                    raise InterruptedError("backup cancelled")
                with db.lock:
                    db.check()
                    b.step(pages_per_step)
                if on_progress is not None:
                    on_progress(b.page_count - b.remaining, b.page_count)
        dest.close()
        os.replace(tmp, path)
    except BaseException:
        dest.close()
        tmp.unlink(missing_ok=True)
        raise
    return path


def check_integrity(db: Database) -> list[str]:
    """Problems found across base, vector and FTS tables (empty list = consistent)."""
    with db.lock:
        return _page_problems(db) + _segment_problems(db) + _persona_problems(db)


def _mirror_problems(db: Database, base: str) -> list[str]:
    """Each table the registry says mirrors `base` (a vector, a full-text row per row) holds its ids, no more."""
    problems: list[str] = []
    ids = {r[0] for r in db.rows(f"SELECT id FROM {base}")}
    for t in tables.TABLES:
        if t.mirrors is not None and t.mirrors[0] == base:
            got = {r[0] for r in db.rows(f"SELECT {t.mirrors[1]} FROM {t.name}")}
            if got != ids:
                problems.append(f"{base} vs {t.name} differ: {sorted(ids ^ got)[:10]}")
    return problems


def _page_problems(db: Database) -> list[str]:
    problems = _mirror_problems(db, "page")
    tri = {r[0] for r in db.rows("SELECT rowid FROM page_tri")}
    cjk = {r[0] for r in db.rows("SELECT id, user_text, assistant_text FROM page") if T.has_cjk(page_text(r[1], r[2]))}
    if tri != cjk:
        problems.append(f"page_tri vs CJK pages differ: {sorted(tri ^ cjk)[:10]}")
    bad_tier = db.rows(
        "SELECT p.id FROM page p LEFT JOIN segment s ON s.id = p.segment_id "
        "WHERE (p.tier = 'stm') != (p.segment_id IS NULL) OR "
        "(p.tier != 'stm' AND (s.id IS NULL OR s.tier != p.tier))"
    )
    if bad_tier:
        problems.append(f"pages with inconsistent tier/segment: {[r[0] for r in bad_tier[:10]]}")
    return problems


def _segment_problems(db: Database) -> list[str]:
    problems = _mirror_problems(db, "segment")
    segs = {r[0]: r for r in db.rows("SELECT id, tier, page_count FROM segment")}
    svec = {r[0]: r[1] for r in db.rows("SELECT segment_id, tier FROM segment_vec")}
    for sid, (_, tier, _) in segs.items():
        if sid in svec and svec[sid] != tier:
            problems.append(f"segment {sid} tier {tier} but segment_vec partition {svec[sid]}")
    counts = dict(db.rows("SELECT segment_id, count(*) FROM page WHERE segment_id IS NOT NULL GROUP BY segment_id"))
    for sid, (_, _, pc) in segs.items():
        if counts.get(sid, 0) != pc or pc == 0:
            problems.append(f"segment {sid} page_count {pc} but has {counts.get(sid, 0)} pages")
    return problems


def _persona_problems(db: Database) -> list[str]:
    problems = _mirror_problems(db, "knowledge")
    orphan_chain = db.rows("SELECT id FROM chain c WHERE NOT EXISTS (SELECT 1 FROM page p WHERE p.chain_id = c.id)")
    if orphan_chain:
        problems.append(f"chains without pages: {[r[0] for r in orphan_chain[:10]]}")
    orphan_der = db.rows(
        "SELECT d.item_kind, d.item_id, d.page_id FROM derivation d WHERE NOT EXISTS "
        "(SELECT 1 FROM page p WHERE p.id = d.page_id) OR (d.item_kind = 'trait' AND NOT EXISTS "
        "(SELECT 1 FROM trait t WHERE t.id = d.item_id)) OR (d.item_kind = 'knowledge' AND NOT EXISTS "
        "(SELECT 1 FROM knowledge k WHERE k.id = d.item_id))"
    )
    if orphan_der:
        problems.append(f"orphan derivation rows: {orphan_der[:10]}")
    orphan_ver = db.rows(
        "SELECT v.item_kind, v.item_id FROM item_version v WHERE (v.item_kind = 'trait' AND NOT EXISTS "
        "(SELECT 1 FROM trait t WHERE t.id = v.item_id)) OR (v.item_kind = 'knowledge' AND NOT EXISTS "
        "(SELECT 1 FROM knowledge k WHERE k.id = v.item_id))"
    )
    if orphan_ver:
        problems.append(f"orphan version rows: {orphan_ver[:10]}")
    fk = db.rows("PRAGMA foreign_key_check")
    if fk:
        problems.append(f"foreign key violations: {fk[:10]}")
    return problems
