"""Writing a memory cube: the whole memory, or what one chat, one segment or a span of time left in it, or
the persona alone (`CubeSelection`).

Read in one read transaction, so the members agree with each other (a page's segment is in the cube) while
other connections go on writing. Written to a temporary file beside the target and renamed into place once
complete: a failure or a cancel leaves nothing, and any earlier file of that name as it was."""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..readable_export import atomic_file
from ..storage.codec import from_json, to_json
from ..storage.database import Database
from .format import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    OPTIONAL_PREFIXES,
    RECORD_MEMBERS,
    VECTOR_MEMBERS,
    CubeCancelled,
    CubeError,
    encode_vector,
)

BATCH = 1000
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class CubeSelection:
    """What goes into a cube. With no filter: the whole memory. `chat_id`, `segment_id` and the span
    [`since`, `until`) narrow the pages (all that are given must hold); the persona then comes with
    the traits and facts drawn from those pages (and, for a span alone, the ones written without
    pages during it). `persona_only`: traits and facts with every version, no pages."""

    chat_id: int | None = None
    segment_id: int | None = None
    since: float | None = None
    until: float | None = None
    persona_only: bool = False
    # one memory space (memory_core.spaces.component): its pages, and the traits and facts kept in it
    space_id: int | None = None

    @property
    def whole(self) -> bool:
        return (
            not self.persona_only
            and self.chat_id is None
            and self.segment_id is None
            and not self._span
            and self.space_id is None
        )

    @property
    def _span(self) -> bool:
        return self.since is not None or self.until is not None

    def describe(self) -> str:
        if self.persona_only:
            return "the persona"
        parts = []
        if self.chat_id is not None:
            parts.append(f"chat {self.chat_id}")
        if self.segment_id is not None:
            parts.append(f"segment {self.segment_id}")
        if self._span:
            parts.append("a span of time")
        if self.space_id is not None:
            parts.append(f"space {self.space_id}")
        return " and ".join(parts) or "the whole memory"

    def to_manifest(self) -> dict[str, Any]:
        return {
            "chat": self.chat_id,
            "segment": self.segment_id,
            "since": self.since,
            "until": self.until,
            "persona_only": self.persona_only,
        }


@dataclass
class CubeExport:
    path: Path
    cube_id: str
    counts: dict[str, int]
    bytes: int
    vectors: bool

    def describe(self) -> str:
        c = self.counts
        return (
            f"{c['pages']:,} pages, {c['segments']:,} segments, {c['traits']:,} traits and {c['facts']:,} facts "
            f"from {c['chats']:,} chats"
        )


class _Member:
    """One JSON Lines member being written: its lines, bytes and SHA-256."""

    def __init__(self, zf: zipfile.ZipFile, name: str):
        self.name = name
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        self._fh: IO[bytes] = zf.open(info, "w", force_zip64=True)
        self.digest = hashlib.sha256()
        self.bytes = 0
        self.records = 0

    def write(self, record: dict[str, Any]) -> None:
        line = (to_json(record) + "\n").encode("utf-8")
        self._fh.write(line)
        self.digest.update(line)
        self.bytes += len(line)
        self.records += 1

    def close(self) -> dict[str, Any]:
        self._fh.close()
        return {"sha256": self.digest.hexdigest(), "bytes": self.bytes, "records": self.records}


_EXTRA_NAME = re.compile(r"^[a-z0-9_-]+(/[a-z0-9_-]+)*\.[a-z0-9]+$")


def _check_extras(extras: Sequence[tuple[str, bytes | Path]]) -> None:
    names = [name for name, _ in extras]
    for name in names:
        if not name.startswith(OPTIONAL_PREFIXES) or not _EXTRA_NAME.match(name) or len(name) > 200:
            raise CubeError(f"{name!r}: an optional member is named parametric/… or activation/…, lower case")
    if len(set(names)) != len(names):
        raise CubeError("an optional member is named twice")


def _write_extra(zf: zipfile.ZipFile, name: str, source: bytes | Path) -> dict[str, Any]:
    """An optional member, a file stored as it is (a GGUF's weights barely compress), with its SHA-256."""
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED if isinstance(source, bytes) else zipfile.ZIP_STORED
    digest, size = hashlib.sha256(), 0
    with zf.open(info, "w", force_zip64=True) as out:
        for chunk in _chunks_of(source):
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "bytes": size, "records": 0, "optional": True}


def _chunks_of(source: bytes | Path) -> Iterator[bytes]:
    if isinstance(source, bytes):
        yield source
        return
    with open(source, "rb") as fh:
        while chunk := fh.read(1 << 20):
            yield chunk


class _Snapshot:
    """What the selection takes, read inside one read transaction."""

    def __init__(self, db: Database, sel: CubeSelection):
        self.db = db
        self.sel = sel
        self.pages = self._page_ids()
        self.page_set = set(self.pages)
        rows = self.named_of("SELECT conversation_id, segment_id, chain_id FROM page WHERE id IN ({})", self.pages)
        self.chats = sorted({r["conversation_id"] for r in rows if r["conversation_id"] is not None})
        self.segment_pages = Counter(r["segment_id"] for r in rows if r["segment_id"] is not None)
        self.chains = sorted({r["chain_id"] for r in rows if r["chain_id"] is not None})
        self.traits = self._persona_ids("trait")
        self.facts = self._persona_ids("knowledge")

    def _page_ids(self) -> list[int]:
        sel = self.sel
        if sel.persona_only:
            return []
        where, args = [], []
        for sql, value in (
            ("conversation_id = ?", sel.chat_id),
            ("segment_id = ?", sel.segment_id),
            ("timestamp >= ?", sel.since),
            ("timestamp < ?", sel.until),
            ("space_id = ?", sel.space_id),
        ):
            if value is not None:
                where.append(sql)
                args.append(value)
        cond = (" WHERE " + " AND ".join(where)) if where else ""
        return [r[0] for r in self.db.execute(f"SELECT id FROM page{cond} ORDER BY id", args).fetchall()]

    def _rows_of(self, sql: str, ids: list[int]) -> list[Any]:
        out: list[Any] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            out += self.db.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()
        return out

    def named_of(self, sql: str, ids: list[int], size: int = 500) -> list[dict[str, Any]]:
        """`_rows_of` with each row a dict by column name (Database.named): for the records of many columns."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(ids), size):
            chunk = ids[start : start + size]
            out += self.db.named(sql.format(",".join("?" * len(chunk))), chunk)
        return out

    def _persona_ids(self, kind: str) -> list[int]:
        sel = self.sel
        if sel.space_id is not None:  # a space's persona is what is kept in it
            where, args = " WHERE space_id = ?", [sel.space_id]
        else:
            where, args = "", []
        every = [r[0] for r in self.db.execute(f"SELECT id FROM {kind}{where} ORDER BY id", args).fetchall()]
        if (
            sel.whole
            or sel.persona_only
            or (sel.space_id is not None and sel.chat_id is None and sel.segment_id is None and not sel._span)
        ):
            return every
        drawn = {
            r[0]
            for r in self._rows_of(
                f"SELECT DISTINCT item_id FROM derivation WHERE item_kind = '{kind}' AND page_id IN ({{}})",
                self.pages,
            )
        }
        if sel.chat_id is None and sel.segment_id is None:  # a span alone: what was written then without pages
            lo = -1e300 if sel.since is None else sel.since
            hi = 1e300 if sel.until is None else sel.until
            drawn |= {
                r[0]
                for r in self.db.execute(
                    f"SELECT id FROM {kind} k WHERE created_at >= ? AND created_at < ? AND NOT EXISTS "
                    f"(SELECT 1 FROM derivation d WHERE d.item_kind = '{kind}' AND d.item_id = k.id)",
                    (lo, hi),
                ).fetchall()
            }
        return [i for i in every if i in drawn]

    def vectors_complete(self) -> bool:
        """Whether every page of the selection has its vector of the current model: not while a changed
        model's re-embedding runs (some are still the old model's), nor in a memory missing some."""
        if self.db.execute("SELECT 1 FROM meta WHERE key = 'reembed_end'").fetchone():
            return False
        held = sum(r[0] for r in self._rows_of("SELECT count(*) FROM page_vec WHERE page_id IN ({})", self.pages))
        return held == len(self.pages)

    def total(self) -> int:
        return len(self.pages) * 2 + len(self.traits) + len(self.facts) + len(self.segment_pages)


def export_cube(
    db: Database,
    path: str | Path,
    selection: CubeSelection | None = None,
    *,
    embed_model_id: str,
    app_version: str = "unknown",
    chat_model_id: str | None = None,
    vectors: bool = True,
    on_progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
    extras: Sequence[tuple[str, bytes | Path]] = (),
) -> CubeExport:
    """Write the selection as a cube at `path` (atomically). Raises CubeError for a selection that
    names a chat or segment memory does not hold, CubeCancelled when `cancelled()` says so. `extras`:
    optional members of the other memory types, (name under parametric/ or activation/, its bytes or
    a file), written as they are with their checksums (docs/memcube.md)."""
    sel = selection or CubeSelection()
    _check_extras(extras)
    path = Path(path)
    memory_id = _memory_id(db)
    with db.lock:
        db.check()
        db.execute("BEGIN")
        try:
            snap = _Snapshot(db, sel)
            _check_selection(db, sel)
            vectors = vectors and snap.vectors_complete()
            with atomic_file(path, binary=True) as fh:
                args = (memory_id, embed_model_id, app_version, chat_model_id, vectors, on_progress, cancelled)
                result = _write(db, fh, snap, *args, extras)
        finally:
            db.execute("COMMIT")
    size = path.stat().st_size
    return CubeExport(path, result["cube_id"], result["counts"], size, vectors)


def _memory_id(db: Database) -> str:
    """The memory's own id, made at its first export (a cube names the memory it came from)."""
    found = db.get_meta("memory_id")
    if found:
        return found
    with db.transaction():
        found = db.get_meta("memory_id")
        if not found:
            found = uuid.uuid4().hex
            db.set_meta("memory_id", found)
    return found


def _check_selection(db: Database, sel: CubeSelection) -> None:
    if sel.chat_id is not None and not db.execute("SELECT 1 FROM conversation WHERE id = ?", (sel.chat_id,)).fetchone():
        raise CubeError(f"no chat {sel.chat_id}")
    if (
        sel.segment_id is not None
        and not db.execute("SELECT 1 FROM segment WHERE id = ?", (sel.segment_id,)).fetchone()
    ):
        raise CubeError(f"no segment {sel.segment_id}")
    if sel.since is not None and sel.until is not None and sel.until <= sel.since:
        raise CubeError("the span of time ends before it begins")


def _write(
    db: Database,
    fh: IO[bytes],
    snap: _Snapshot,
    memory_id: str,
    embed_model_id: str,
    app_version: str,
    chat_model_id: str | None,
    vectors: bool,
    on_progress: Progress | None,
    cancelled: Callable[[], bool] | None,
    extras: Sequence[tuple[str, bytes | Path]] = (),
) -> dict[str, Any]:
    total, done = snap.total(), 0

    def tick(n: int = 1) -> None:
        nonlocal done
        done += n
        if cancelled is not None and done % 200 == 0 and cancelled():
            raise CubeCancelled("export cancelled")
        if on_progress is not None and (done % 500 == 0 or done == total):
            on_progress(done, total)

    members: dict[str, dict[str, Any]] = {}
    writers = {
        "chats.jsonl": _chats,
        "chains.jsonl": _chains,
        "segments.jsonl": _segments,
        "pages.jsonl": _pages,
        "traits.jsonl": _traits,
        "facts.jsonl": _facts,
        "events.jsonl": _events,
        "vectors/pages.jsonl": _page_vectors,
        "vectors/segments.jsonl": _segment_vectors,
        "vectors/persona.jsonl": _persona_vectors,
    }
    names = [n for n, _ in RECORD_MEMBERS] + ([n for n, _ in VECTOR_MEMBERS] if vectors else [])
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for name in names:
            member = _Member(zf, name)
            for record in writers[name](db, snap):
                member.write(record)
                tick()
            members[name] = member.close()
        for name, source in extras:
            members[name] = _write_extra(zf, name, source)
        cube_id = uuid.uuid4().hex
        manifest = _manifest(db, snap, cube_id, memory_id, embed_model_id, app_version, chat_model_id, vectors, members)
        zf.writestr(zipfile.ZipInfo(MANIFEST, date_time=(2020, 1, 1, 0, 0, 0)), to_json(manifest), zipfile.ZIP_DEFLATED)
    if on_progress is not None:
        on_progress(total, total)
    return {"cube_id": cube_id, "counts": manifest["counts"]}


def _manifest(
    db: Database,
    snap: _Snapshot,
    cube_id: str,
    memory_id: str,
    embed_model_id: str,
    app_version: str,
    chat_model_id: str | None,
    vectors: bool,
    members: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The cube's manifest: what it is, where it came from, which vectors it holds and how to read them,
    what was chosen, how many of each record, and each member's checksum (docs/memcube.md)."""
    counts = {
        "chats": members["chats.jsonl"]["records"],
        "chains": members["chains.jsonl"]["records"],
        "segments": members["segments.jsonl"]["records"],
        "pages": members["pages.jsonl"]["records"],
        "traits": members["traits.jsonl"]["records"],
        "facts": members["facts.jsonl"]["records"],
        "events": members["events.jsonl"]["records"],
    }
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "cube_id": cube_id,
        "created_at": db.clock(),
        "app_version": app_version[:100],
        "source_memory_id": memory_id,
        "chat_model_id": chat_model_id[:500] if chat_model_id else None,
        "space": _space_name(db, snap.sel.space_id),
        "embedding": {
            "model_id": embed_model_id,
            "dim": db.dim,
            "page_context": db.get_meta("page_context"),
            "vectors": vectors,
        },
        "selection": snap.sel.to_manifest(),
        "counts": counts,
        "members": members,
    }


def _space_name(db: Database, space_id: int | None) -> str | None:
    """The name of the space a cube of one space is exported from (the manifest's "space")."""
    if space_id is None:
        return None
    row = db.execute("SELECT name FROM space WHERE id = ?", (space_id,)).fetchone()
    return str(row[0])[:200] if row else None


def _chats(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    for r in snap.named_of(
        "SELECT id, title, source, created_at, updated_at FROM conversation WHERE id IN ({}) ORDER BY id", snap.chats
    ):
        yield {**r, "title": r["title"][:1000], "source": r["source"][:200] if r["source"] else None}


def _chains(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    for r in snap.named_of(
        "SELECT id, summary, keywords, updated_at FROM chain WHERE id IN ({}) ORDER BY id", snap.chains
    ):
        yield {**r, "keywords": from_json(r["keywords"], [])}


_SEG_COLS = (
    "id, tier, summary, keywords, kw_counts, n_visit, l_interaction, last_access, created_at, updated_at, "
    "page_count, pinned, promotions, archived_at"
)


def _segments(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    ids = sorted(snap.segment_pages)
    for r in snap.named_of(f"SELECT {_SEG_COLS} FROM segment WHERE id IN ({{}}) ORDER BY id", ids):
        held = snap.segment_pages[r["id"]]
        yield {
            **r,
            "keywords": from_json(r["keywords"], []),
            "kw_counts": from_json(r["kw_counts"], {}),
            "page_count": held,
            "pinned": bool(r["pinned"]),
            "complete": held == r["page_count"],
        }


# a page's columns, named as its cube record names them
_PAGE_COLS = (
    "id, conversation_id AS chat, user_text, assistant_text, timestamp, tier, segment_id AS segment, "
    "chain_id AS chain, prev_page_id AS prev, keywords, pinned, meta, created_at, moved_at, analyzed"
)


def _batches(snap: _Snapshot, sql: str) -> Iterator[dict[str, Any]]:
    yield from snap.named_of(sql, snap.pages, BATCH)


def _pages(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    for r in _batches(snap, f"SELECT {_PAGE_COLS} FROM page WHERE id IN ({{}}) ORDER BY id"):
        yield {
            **r,
            "prev": r["prev"] if r["prev"] in snap.page_set else None,
            "keywords": from_json(r["keywords"], []),
            "pinned": bool(r["pinned"]),
            "meta": from_json(r["meta"], {}),
            "analyzed": bool(r["analyzed"]),
        }


def _sources(db: Database, snap: _Snapshot, kind: str, iid: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for version, page in db.execute(
        "SELECT version, page_id FROM derivation WHERE item_kind = ? AND item_id = ? ORDER BY version, page_id",
        (kind, iid),
    ).fetchall():
        if page in snap.page_set:
            out.setdefault(version, []).append(page)
    return out


def _versions(db: Database, snap: _Snapshot, kind: str, iid: int, sources: dict[int, list[int]]) -> list[dict]:
    out = []
    for version, text, created, archived, reason, detail_s in db.execute(
        "SELECT version, text, created_at, archived_at, reason, detail FROM item_version "
        "WHERE item_kind = ? AND item_id = ? ORDER BY version",
        (kind, iid),
    ).fetchall():
        detail = from_json(detail_s, {})
        if isinstance(detail.get("source_page_ids"), list):
            detail["source_page_ids"] = [p for p in detail["source_page_ids"] if p in snap.page_set]
        out.append(
            {
                "version": version,
                "text": text,
                "created_at": created,
                "archived_at": archived,
                "reason": reason,
                "detail": detail,
                "sources": sources.get(version, []),
            }
        )
    return out


def _chat_ids(snap: _Snapshot, cids_s: str) -> list[int]:
    held = set(snap.chats)
    return [c for c in from_json(cids_s, []) if c in held]


# the columns of a persona item a cube record holds as they are, by table (then the common ones)
_OWN_COLS = {"trait": ("dimension", "value", "evidence"), "knowledge": ("owner", "text", "subject")}
_ITEM_COLS = ("confidence", "status", "version", "pinned", "created_at", "updated_at", "model", "reason")


def _persona(db: Database, snap: _Snapshot, kind: str, ids: list[int]) -> Iterator[dict[str, Any]]:
    cols = ("id", *_OWN_COLS[kind], *_ITEM_COLS, "conversation_ids")
    for iid in ids:
        (rec,) = db.named(f"SELECT {', '.join(cols)} FROM {kind} WHERE id = ?", (iid,))
        sources = _sources(db, snap, kind, iid)
        rec["pinned"] = bool(rec["pinned"])
        rec["chats"] = _chat_ids(snap, rec.pop("conversation_ids"))
        rec["sources"] = sources.get(rec["version"], [])
        rec["versions"] = _versions(db, snap, kind, iid, sources)
        yield rec


def _traits(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    return _persona(db, snap, "trait", snap.traits)


def _facts(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    return _persona(db, snap, "knowledge", snap.facts)


def _events(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    held = {
        "page": snap.page_set,
        "segment": set(snap.segment_pages),
        "trait": set(snap.traits),
        "knowledge": set(snap.facts),
    }
    for r in db.named("SELECT id, at, kind, item_kind, item_id, summary, detail FROM event ORDER BY id"):
        if r["item_kind"] in held and r["item_id"] in held[r["item_kind"]]:
            yield {
                **r,
                "kind": r["kind"][:100],
                "summary": r["summary"][:2000],
                "detail": from_json(r["detail"], {}),
            }


def _page_vectors(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    sql = (
        "SELECT v.page_id, v.embedding, t.vecs, t.sides FROM page_vec v LEFT JOIN page_tok t ON t.page_id = v.page_id "
        "WHERE v.page_id IN ({}) ORDER BY v.page_id"
    )
    for r in _batches(snap, sql):
        vecs, sides = r["vecs"], r["sides"]
        yield {
            "page": r["page_id"],
            "vector": encode_vector(np.frombuffer(r["embedding"], dtype=np.float32)),
            "tokens": None if vecs is None else base64.b64encode(vecs).decode("ascii"),
            "sides": None if sides is None else base64.b64encode(sides).decode("ascii"),
        }


def _segment_vectors(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    ids = sorted(snap.segment_pages)
    for sid, emb, count in snap._rows_of(
        "SELECT id, emb_sum, page_count FROM segment WHERE id IN ({}) ORDER BY id", ids
    ):
        if count == snap.segment_pages[sid]:  # the sum of a part of a segment is not the cube's to give
            yield {"segment": sid, "sum": encode_vector(np.frombuffer(emb, dtype=np.float32))}


def _persona_vectors(db: Database, snap: _Snapshot) -> Iterator[dict[str, Any]]:
    for tid in snap.traits:
        (emb,) = db.execute("SELECT embedding FROM trait WHERE id = ?", (tid,)).fetchone()
        yield {"kind": "trait", "id": tid, "vector": encode_vector(np.frombuffer(emb, dtype=np.float32))}
    for kid in snap.facts:
        row = db.execute("SELECT embedding FROM knowledge_vec WHERE knowledge_id = ?", (kid,)).fetchone()
        if row is None:
            raise CubeError(f"fact {kid} has no vector; run `mnemo doctor` (the memory is inconsistent)")
        yield {"kind": "fact", "id": kid, "vector": encode_vector(np.frombuffer(row[0], dtype=np.float32))}
