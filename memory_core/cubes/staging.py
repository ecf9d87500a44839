"""Staging a checked cube for import: its records copied into `cube_stage` (a table no part of memory reads),
STAGE_BATCH to a transaction, so the "cube_import" jobs that write memory (memory_core.cubes.importer) read
them from the memory file, and an import cut short resumes without its cube. An import undone while it is
being staged stops at the next batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..storage.codec import to_json
from ..storage.database import Database
from ..storage.jobs import Jobs
from .format import CubeCancelled
from .reader import CubeReader

STAGE_BATCH = 2000  # staged records per transaction
# what is staged of each member, and under which name (persona vectors by their kind)
STAGED = {
    "chats.jsonl": "chat",
    "chains.jsonl": "chain",
    "segments.jsonl": "segment",
    "pages.jsonl": "page",
    "traits.jsonl": "trait",
    "facts.jsonl": "fact",
}
_VECTOR_SCHEMAS = {
    "vectors/pages.jsonl": "page_vector",
    "vectors/segments.jsonl": "segment_vector",
    "vectors/persona.jsonl": "persona_vector",
}
_INSERT = "INSERT INTO cube_stage(import_id, member, ref, record) VALUES (?,?,?,?)"

Progress = Callable[[str, int, int], None]


def members_to_stage(same_pages: bool, same_model: bool) -> list[str]:
    """The cube's records, and the vectors this memory takes as they are: the pages' when they were read as
    this memory reads pages (`same_pages`), the segments' and the persona's when of the same model."""
    members = list(STAGED)
    if same_pages:
        members.append("vectors/pages.jsonl")
    if same_model:
        members += ["vectors/segments.jsonl", "vectors/persona.jsonl"]
    return members


def _staged_as(name: str, rec: dict[str, Any]) -> tuple[str, int]:
    """(member, ref) a record of cube member `name` is staged under."""
    if name == "vectors/pages.jsonl":
        return "page_vector", rec["page"]
    if name == "vectors/segments.jsonl":
        return "segment_vector", rec["segment"]
    if name == "vectors/persona.jsonl":
        return f"{rec['kind']}_vector", rec["id"]
    return STAGED[name], rec["id"]


def stage(
    db: Database,
    jobs: Jobs,
    cube: CubeReader,
    iid: int,
    members: list[str],
    cancelled: Callable[[], bool] | None,
    on_progress: Progress | None,
) -> None:
    """Stage `members` of `cube` for import `iid` (status 'staging'), then set it running and queue its
    first job. Raises CubeCancelled when `cancelled()` says so or the import was undone meanwhile."""
    total = sum(cube.manifest["members"][n]["records"] for n in members)
    done = 0
    rows: list[tuple[int, str, int, str]] = []
    before: dict[int | None, list] = {}  # chat -> its last page, which the next is read after

    def flush() -> None:
        with db.transaction():
            if not db.execute("SELECT 1 FROM cube_import WHERE id = ? AND status = 'staging'", (iid,)).fetchone():
                raise CubeCancelled("the import was undone while its cube was read in")
            db.conn.executemany(_INSERT, rows)
        rows.clear()
        if cancelled is not None and cancelled():
            raise CubeCancelled("import cancelled")
        if on_progress:
            on_progress("reading the cube", done, total)

    for name in members:
        for _, rec in cube.records(name, _VECTOR_SCHEMAS.get(name) or STAGED[name]):
            member, ref = _staged_as(name, rec)
            if member == "page":
                rec["_before"] = before.get(rec["chat"])
                before[rec["chat"]] = [rec["user_text"], rec["assistant_text"], rec["timestamp"]]
            rows.append((iid, member, ref, to_json(rec)))
            done += 1
            if len(rows) >= STAGE_BATCH:
                flush()
    with db.transaction():
        if rows:
            db.conn.executemany(_INSERT, rows)
        rows.clear()
        # (an undo while it was being staged leaves it undone)
        db.execute("UPDATE cube_import SET status = 'running' WHERE id = ? AND status = 'staging'", (iid,))
        if db.changes():
            jobs.enqueue("cube_import", {"import_id": iid})


# ------------------------------------------------------------------ the import's record (this module owns
# cube_import, cube_import_item and cube_stage: memory_core.storage.tables)
def begin(db: Database, cube_id: str, file_name: str, file_sha256: str, head: dict[str, Any]) -> int:
    """A new import record, 'staging' (its manifest without the members: `head`). Returns its id."""
    db.execute(
        "INSERT INTO cube_import(cube_id, file_name, file_sha256, status, started_at, manifest, summary) "
        "VALUES (?,?,?, 'staging', ?,?, '{}')",
        (cube_id, file_name, file_sha256, db.clock(), to_json(head)),
    )
    return db.last_insert_rowid()


def drop(db: Database, iid: int) -> None:
    """Import `iid`'s record goes (its staged records and items with it: ON DELETE CASCADE)."""
    db.execute("DELETE FROM cube_import WHERE id = ?", (iid,))


def note_item(db: Database, iid: int, kind: str, ref: int, item_id: int | None, action: str, **more: Any) -> None:
    """What import `iid` did to the cube's `kind` `ref`: the item it became (`item_id`) and how (`action`);
    `more`: key, before (a merged item as it was), after_version, stamp, note."""
    before = more.get("before")
    db.execute(
        "INSERT OR REPLACE INTO cube_import_item(import_id, kind, ref, item_id, action, key, before, "
        "after_version, stamp, note) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (
            iid,
            kind,
            ref,
            item_id,
            action,
            more.get("key"),
            None if before is None else to_json(before),
            more.get("after_version"),
            more.get("stamp"),
            more.get("note", ""),
        ),
    )


def unstage(db: Database, iid: int, members: tuple[str, ...] | None = None, refs: list[int] | None = None) -> None:
    """Import `iid`'s staged records go: all of them, or those of `members` with these `refs` (written)."""
    if members is None:
        db.execute("DELETE FROM cube_stage WHERE import_id = ?", (iid,))
        return
    db.execute(
        f"DELETE FROM cube_stage WHERE import_id = ? AND member IN ({','.join('?' * len(members))}) "
        "AND ref IN (SELECT value FROM json_each(?))",
        (iid, *members, to_json(refs or [])),
    )


def save_summary(db: Database, iid: int, summary: dict[str, Any]) -> None:
    db.execute("UPDATE cube_import SET summary = ? WHERE id = ?", (to_json(summary), iid))


def finish(db: Database, iid: int) -> None:
    db.execute("UPDATE cube_import SET status = 'done', finished_at = ? WHERE id = ?", (db.clock(), iid))


def mark_undone(db: Database, iid: int) -> None:
    """Import `iid` was undone: what it staged and recorded goes, its record says so."""
    unstage(db, iid)
    db.execute("DELETE FROM cube_import_item WHERE import_id = ?", (iid,))
    db.execute("UPDATE cube_import SET status = 'undone', undone_at = ? WHERE id = ?", (db.clock(), iid))
