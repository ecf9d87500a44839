"""Importing a cube: checked whole first (nothing changes for a cube that fails), then staged into the
memory file (`cube_stage`, a table no part of memory reads) and written by "cube_import" jobs, a batch of
pages per job and the persona last, each batch one transaction that also writes what it did to the
import's record (`cube_import`, `cube_import_item`).

So an import never leaves a half-written item: a page comes with its vectors, words and links, or not at
all. One cut short (a crash, the app closed) resumes where it stopped: its jobs are persisted, and the
app's memory thread, or importing the same file again, runs the rest; `undo` removes what it wrote either
way. The cube's own vectors are used when it was made by the same embedding model (and its pages read in
context the same way); otherwise its pages are embedded here, batch by batch, by the same jobs.

Items already held are recognised and left: a page by its time and both sides, a trait or fact by its
words (or because an earlier import of it merged it). Every item written is listed with its import, so
`origin` can say where it came from."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..conversations import Conversations
from ..pages.component import Pages
from ..pages.embedding import Embedding
from ..persona.merge import PersonaMerge
from ..persona.versions import Versions
from ..segments.component import Segments
from ..storage.codec import from_json, to_json, unit, vec_blob
from ..storage.database import Database
from ..storage.jobs import Jobs
from . import staging
from .format import CubeError, CubeLimits, decode_bytes, decode_vector
from .persona_merge import Decision, PersonaImport, chats_of, item_kind, key_of, pages_of, stored_key
from .reader import CubeReader
from .records import ImportCounts, ImportPlan
from .staging import Progress, members_to_stage, stage


def _norm(vec: np.ndarray) -> np.ndarray:
    """A vector the cube gives, kept bit for bit when it is of unit length (the memory it came from ranks
    by it), scaled to it otherwise."""
    n = float(np.linalg.norm(vec))
    return vec if abs(n - 1.0) < 1e-3 else unit(vec)


class Importer:
    BATCH = 256  # pages per "cube_import" job; the next job takes the next batch

    def __init__(
        self,
        db: Database,
        embedding: Embedding,
        pages: Pages,
        segments: Segments,
        versions: Versions,
        merge: PersonaMerge,
        jobs: Jobs,
        conversations: Conversations,
    ):
        self.db = db
        self.embedding = embedding
        self.pages = pages
        self.segments = segments
        self.jobs = jobs
        self.conversations = conversations
        self.persona = PersonaImport(db, embedding, versions, merge)
        jobs.register("cube_import", self._job)

    # ------------------------------------------------------------------ which vectors a cube's are
    def same_model(self, manifest: dict[str, Any]) -> bool:
        emb = manifest["embedding"]
        return bool(emb["vectors"]) and emb["model_id"] == self.embedding.model_id and int(emb["dim"]) == self.db.dim

    def same_pages(self, manifest: dict[str, Any]) -> bool:
        """The cube's page vectors are what this memory would make: the same model, reading a page after the
        one before it (or not) as this memory does."""
        return self.same_model(manifest) and manifest["embedding"]["page_context"] == self.db.get_meta("page_context")

    # ------------------------------------------------------------------ dry run
    def plan(self, path: str | Path, limits: CubeLimits | None = None) -> ImportPlan:
        """What importing the cube at `path` would add, merge and skip. Reads, never writes."""
        with CubeReader(path, limits) as cube:
            cube.check()
            m = cube.manifest
            counts = ImportCounts()
            present_chats: set[int] = set()
            present_segs: set[int] = set()
            new_chats: set[int] = set()
            new_segs: set[int] = set()
            for _, p in cube.records("pages.jsonl", "page"):
                found = self._find_page(p)
                if found is not None:
                    counts.pages["present"] += 1
                    if p["chat"] is not None and p["chat"] not in new_chats:
                        present_chats.add(p["chat"])
                    if p["segment"] is not None and found[2] is not None and p["segment"] not in new_segs:
                        present_segs.add(p["segment"])
                    continue
                counts.pages["added"] += 1
                if p["chat"] is not None and p["chat"] not in present_chats:
                    new_chats.add(p["chat"])
                if p["segment"] is not None and p["segment"] not in present_segs:
                    new_segs.add(p["segment"])
            counts.chats["added"], counts.segments["added"] = len(new_chats), len(new_segs)
            vectors = self._cube_persona_vectors(cube) if self.same_model(m) else {}
            records = [("trait", r) for _, r in cube.records("traits.jsonl", "trait")]
            records += [("fact", r) for _, r in cube.records("facts.jsonl", "fact")]
            with self.db.lock:
                for (kind, _rec), d in zip(records, self._decide(records, vectors)):
                    self._count(counts, kind, d)
            earlier = [
                r[0]
                for r in self.db.rows(
                    "SELECT id FROM cube_import WHERE cube_id = ? AND status != 'undone' ORDER BY id", (m["cube_id"],)
                )
            ]
            sel = m["selection"]
            return ImportPlan(
                cube.name,
                m["cube_id"],
                m["created_at"],
                m["app_version"],
                _selection_text(sel),
                counts,
                not self.same_pages(m),
                earlier,
            )

    def _cube_persona_vectors(self, cube: CubeReader) -> dict[tuple[str, int], np.ndarray]:
        return {
            (r["kind"], r["id"]): _norm(decode_vector(r["vector"], cube.dim, "vector"))
            for _, r in cube.records("vectors/persona.jsonl", "persona_vector")
        }

    def _decide(self, records: list[tuple[str, dict]], vectors: dict[tuple[str, int], np.ndarray]) -> list[Decision]:
        """The decision for each persona record, against the persona as it is now."""
        missing = [i for i, (kind, r) in enumerate(records) if (kind, r["id"]) not in vectors]
        if missing:
            texts = [_persona_text(*records[i]) for i in missing]
            for i, v in zip(missing, self.embedding.embed(texts)):
                vectors[(records[i][0], records[i][1]["id"])] = v
        held = self.persona.held_keys()
        return [self.persona.decide(item_kind(kind), rec, vectors[(kind, rec["id"])], held) for kind, rec in records]

    @staticmethod
    def _count(counts: ImportCounts, kind: str, d: Decision) -> None:
        c = counts.traits if kind == "trait" else counts.facts
        c[{"add": "added", "merge": "merged"}.get(d.action, d.action)] += 1
        if d.conflict is not None:
            counts.conflicts.append(d.conflict)

    # ------------------------------------------------------------------ starting: check, stage, queue
    def start(
        self,
        path: str | Path,
        limits: CubeLimits | None = None,
        *,
        cancelled: Callable[[], bool] | None = None,
        on_progress: Progress | None = None,
    ) -> int:
        """Check the cube at `path`, stage it and queue its writing; returns the import's id. An import of
        the same file that was cut short is resumed instead (its id is returned)."""
        if self.db.memory_paused():
            raise CubeError("memory is paused: resume it (the Memory menu, or `mnemo memory pause off`) to import")
        with CubeReader(path, limits) as cube:
            if on_progress:
                on_progress("checking the cube", 0, 1)
            cube.check()
            m = cube.manifest
            with self.db.transaction():
                old = self.db.execute(
                    "SELECT id, status FROM cube_import WHERE file_sha256 = ? AND status IN ('staging', 'running') "
                    "ORDER BY id DESC LIMIT 1",
                    (cube.file_sha256,),
                ).fetchone()
                if old is not None and old[1] == "running":
                    if not self._pending_job(old[0]):
                        self.jobs.enqueue("cube_import", {"import_id": old[0]})
                    return int(old[0])
                if old is not None:  # staging was cut short: it starts again
                    staging.drop(self.db, old[0])
                head = {k: v for k, v in m.items() if k != "members"}
                iid = staging.begin(self.db, m["cube_id"], cube.name, cube.file_sha256, head)
            try:
                members = members_to_stage(self.same_pages(m), self.same_model(m))
                stage(self.db, self.jobs, cube, iid, members, cancelled, on_progress)
            except BaseException:
                with self.db.transaction():
                    staging.drop(self.db, iid)
                raise
        return iid

    def _pending_job(self, iid: int) -> bool:
        return bool(
            self.db.execute(
                "SELECT 1 FROM job WHERE kind = 'cube_import' AND status = 'pending' "
                "AND json_extract(payload, '$.import_id') = ?",
                (iid,),
            ).fetchone()
        )

    # ------------------------------------------------------------------ the job: a batch of pages, then the persona
    def _job(self, jid: int, payload: dict, *, allow_llm: bool = True) -> Callable[[], None] | None:
        iid = int(payload.get("import_id") or 0)
        row = self.db.one("SELECT status, file_name, manifest, summary FROM cube_import WHERE id = ?", (iid,))
        if row is None or row[0] != "running":
            return None
        manifest = from_json(row[2], {})
        counts = ImportCounts.from_json(from_json(row[3], {}))
        staged = self.db.rows(
            "SELECT record FROM cube_stage WHERE import_id = ? AND member = 'page' ORDER BY ref LIMIT ?",
            (iid, self.BATCH),
        )
        total = int(manifest.get("counts", {}).get("pages", 0))
        done = sum(counts.pages.values())
        self.jobs.report_progress("importing memory", done, total)
        if staged:
            pages = [json.loads(r[0]) for r in staged]
            vecs = self._page_vectors(iid, pages, manifest)
            return lambda: self._apply_pages(iid, row[1], pages, vecs, total)
        records = [("trait", json.loads(r[0])) for r in self._staged(iid, "trait")]
        records += [("fact", json.loads(r[0])) for r in self._staged(iid, "fact")]
        vectors: dict[tuple[str, int], np.ndarray] = {}
        dim = self.db.dim
        for kind in ("trait", "fact"):
            for r in self._staged(iid, f"{kind}_vector"):
                rec = json.loads(r[0])
                vectors[(kind, rec["id"])] = _norm(decode_vector(rec["vector"], dim, "vector"))
        missing = [(k, r) for k, r in records if (k, r["id"]) not in vectors]
        if missing:
            for (k, r), v in zip(missing, self.embedding.embed([_persona_text(k, r) for k, r in missing])):
                vectors[(k, r["id"])] = v
        return lambda: self._apply_persona(iid, row[1], records, vectors)

    def _staged(self, iid: int, member: str) -> list[Any]:
        return self.db.rows(
            "SELECT record FROM cube_stage WHERE import_id = ? AND member = ? ORDER BY ref", (iid, member)
        )

    def _page_vectors(self, iid: int, pages: list[dict], manifest: dict) -> dict[int, tuple]:
        """ref -> (vector, word rows, side vectors) of a batch: the cube's, or embedded here (each page read
        after the one before it in its chat, as the memory it came from read it)."""
        refs = [p["id"] for p in pages]
        given = {
            r[0]: json.loads(r[1])
            for r in self.db.rows(
                "SELECT ref, record FROM cube_stage WHERE import_id = ? AND member = 'page_vector' "
                "AND ref IN (SELECT value FROM json_each(?))",
                (iid, json.dumps(refs)),
            )
        }
        out: dict[int, tuple] = {}
        dim = self.db.dim
        for ref, rec in given.items():
            tokens = decode_bytes(rec["tokens"], "tokens") if rec["tokens"] is not None else None
            sides = decode_bytes(rec["sides"], "sides") if rec["sides"] is not None else None
            out[ref] = (_norm(decode_vector(rec["vector"], dim, "vector")), tokens, sides)
        todo = [p for p in pages if p["id"] not in out]
        if todo:
            contexts = [
                self.pages.read_after(tuple(p["_before"]) if p.get("_before") else None, p["timestamp"]) for p in todo
            ]
            vecs = self.embedding.embed_pages([(p["user_text"], p["assistant_text"]) for p in todo], contexts)
            for p, v in zip(todo, vecs):
                out[p["id"]] = (v, None, None)  # its word rows are in the embedder's memo for `vec_put`
        return out

    def _running(self, iid: int) -> bool:
        row = self.db.execute("SELECT status FROM cube_import WHERE id = ?", (iid,)).fetchone()
        return row is not None and row[0] == "running"

    def _apply_pages(self, iid: int, file_name: str, pages: list[dict], vecs: dict[int, tuple], total: int) -> None:
        if not self._running(iid):  # undone meanwhile
            return
        counts = self._counts(iid)
        touched: set[int] = set()
        for p in pages:
            if self.mapped(iid, "page", p["id"]) is None:
                sid = self._write_page(iid, p, vecs[p["id"]], counts)
                if sid is not None:
                    touched.add(sid)
        for sid in sorted(touched):
            self._settle_segment(iid, sid)
        staging.unstage(self.db, iid, ("page", "page_vector"), [p["id"] for p in pages])
        self._save_counts(iid, counts)
        done = sum(counts.pages.values())
        self.db.emit(
            "cube_pages_imported",
            None,
            None,
            f"{done:,} of {total:,} pages of memory cube {file_name} read in",
            {"import_id": iid, "batch": len(pages), "done": done, "total": total},
        )
        self.jobs.report_progress("importing memory", done, total)
        self.jobs.enqueue("cube_import", {"import_id": iid})

    def _write_page(self, iid: int, p: dict, vec: tuple, counts: ImportCounts) -> int | None:
        """Write one page of the cube (or note the page held that it is); returns the segment it joined."""
        found = self._find_page(p)
        if found is not None:
            self.note(iid, "page", p["id"], found[0], "present")
            counts.pages["present"] += 1
            if p["chat"] is not None and found[1] is not None and self.mapped(iid, "chat", p["chat"]) is None:
                self.note(iid, "chat", p["chat"], found[1], "present")
            if p["segment"] is not None and found[2] is not None and self.mapped(iid, "segment", p["segment"]) is None:
                self.note(iid, "segment", p["segment"], found[2], "present")
            return None
        cid = self._chat(iid, p["chat"], counts)
        sid, tier = self._segment(iid, p["segment"], p["tier"], counts)
        chain = self._chain(iid, p["chain"])
        prev = self.mapped(iid, "page", p["prev"]) if p["prev"] is not None else None
        row = {c: p[c] for c in ("user_text", "assistant_text", "timestamp", "created_at", "moved_at")}
        row |= {"conversation_id": cid, "tier": tier, "segment_id": sid, "prev_page_id": prev, "chain_id": chain}
        row |= {"keywords": to_json(p["keywords"]), "pinned": int(p["pinned"]), "meta": to_json(p["meta"])}
        pid = self.pages.insert({**row, "analyzed": int(p["analyzed"])})
        self.pages.put_imported_index(pid, *vec)
        self.note(iid, "page", p["id"], pid, "added", stamp=p["created_at"])
        counts.pages["added"] += 1
        return sid

    def _find_page(self, p: dict) -> Any:
        """(id, conversation, segment) of the page memory holds that is this one: said at the same time, in
        the same words on both sides."""
        return self.db.execute(
            "SELECT id, conversation_id, segment_id FROM page WHERE timestamp = ? AND user_text = ? "
            "AND assistant_text = ? ORDER BY id LIMIT 1",
            (p["timestamp"], p["user_text"], p["assistant_text"]),
        ).fetchone()

    def _record(self, iid: int, member: str, ref: int) -> dict:
        row = self.db.execute(
            "SELECT record FROM cube_stage WHERE import_id = ? AND member = ? AND ref = ?", (iid, member, ref)
        ).fetchone()
        if row is None:  # the checks guarantee it; a staged cube altered in the file is another matter
            raise CubeError(
                f"the staged cube of import {iid} lacks {member} {ref}; undo the import and import it again"
            )
        return json.loads(row[0])

    def _exists(self, table: str, item_id: int | None) -> bool:
        return item_id is not None and bool(
            self.db.execute(f"SELECT 1 FROM {table} WHERE id = ?", (item_id,)).fetchone()
        )

    def _chat(self, iid: int, ref: int | None, counts: ImportCounts) -> int | None:
        if ref is None:
            return None
        cid = self.mapped(iid, "chat", ref)
        if self._exists("conversation", cid):
            return cid
        rec = self._record(iid, "chat", ref)
        cid = self.conversations.insert_imported(rec["title"], rec["created_at"], rec["updated_at"], rec["source"])
        self.note(iid, "chat", ref, cid, "added", stamp=rec["created_at"])
        counts.chats["added"] += 1
        return cid

    def _segment(self, iid: int, ref: int | None, tier: str, counts: ImportCounts) -> tuple[int | None, str]:
        if ref is None:
            return None, "stm"
        sid = self.mapped(iid, "segment", ref)
        if sid is not None:
            row = self.db.execute("SELECT tier FROM segment WHERE id = ?", (sid,)).fetchone()
            if row is not None:
                return sid, row[0]
        s = self._record(iid, "segment", ref)
        row = {c: s[c] for c in ("tier", "summary", "n_visit", "l_interaction", "last_access", "created_at")}
        row |= {c: s[c] for c in ("updated_at", "promotions", "archived_at")}
        row |= {"keywords": to_json(s["keywords"]), "kw_counts": to_json(s["kw_counts"]), "page_count": 0}
        row |= {"emb_sum": vec_blob(np.zeros(self.db.dim, np.float32)), "pinned": int(s["pinned"])}
        sid = self.segments.insert(row)
        self.note(iid, "segment", ref, sid, "added", stamp=s["created_at"])
        counts.segments["added"] += 1
        return sid, s["tier"]

    def _chain(self, iid: int, ref: int | None) -> int | None:
        if ref is None:
            return None
        chain = self.mapped(iid, "chain", ref)
        if self._exists("chain", chain):
            return chain
        c = self._record(iid, "chain", ref)
        chain = self.segments.insert_chain(c["summary"], c["keywords"], c["updated_at"])
        self.note(iid, "chain", ref, chain, "added")
        return chain

    def _settle_segment(self, iid: int, sid: int) -> None:
        """A segment pages joined: its count and vector from its pages (one the import made keeps the cube's
        summary and keywords; one memory held is rebuilt from what it now holds)."""
        made = self.db.execute(
            "SELECT 1 FROM cube_import_item WHERE import_id = ? AND kind = 'segment' AND item_id = ? AND action = 'added'",
            (iid, sid),
        ).fetchone()
        if not made:
            self.segments.rebuild(sid)
            return
        self.segments.count_pages(sid)
        self.segments.refresh_vector(sid)

    # ------------------------------------------------------------------ the persona, last
    def _apply_persona(
        self, iid: int, file_name: str, records: list[tuple[str, dict]], vectors: dict[tuple[str, int], np.ndarray]
    ) -> None:
        if not self._running(iid):
            return
        counts = self._counts(iid)
        page_ids = self.mapping(iid, "page")
        chat_ids = self.mapping(iid, "chat")
        label = f"memory cube {file_name}"
        decisions = self._decide(records, vectors)
        for (kind, rec), d in zip(records, decisions):
            table = item_kind(kind)
            vec = vectors[(kind, rec["id"])]
            key = stored_key(key_of(table, rec))
            self._count(counts, kind, d)
            if d.action == "add":
                if table == "trait" and rec["status"] == "active" and self._persona_full():
                    counts.traits["added"] -= 1
                    counts.traits["skipped"] += 1
                    self.note(iid, table, rec["id"], None, "skipped", key=key, note="the persona is full")
                    continue
                new = self.persona.add(table, rec, vec, page_ids, chat_ids, iid)
                self.note(iid, table, rec["id"], new, "added", key=key, stamp=rec["created_at"])
            elif d.action == "merge":
                assert d.target is not None
                before = self.persona.snapshot(table, d.target)
                after = self.persona.apply_merge(
                    table, rec, vec, d, pages_of(rec, page_ids), chats_of(rec, chat_ids), label
                )
                self.note(
                    iid,
                    table,
                    rec["id"],
                    d.target,
                    "merged",
                    key=key,
                    before=before,
                    after_version=after,
                    stamp=before["created_at"],
                )
            else:
                note = d.conflict.why if d.conflict is not None else ""
                self.note(iid, table, rec["id"], d.target, d.action, key=key, note=note)
        self._segment_sums(iid)
        self.segments.evict_if_needed()
        self.pages.queue_token_index()
        staging.unstage(self.db, iid)
        self._save_counts(iid, counts)
        staging.finish(self.db, iid)
        self.db.emit(
            "cube_imported",
            None,
            None,
            f"memory cube {file_name} imported (import {iid}): {counts.pages['added']:,} pages, "
            f"{counts.traits['added'] + counts.facts['added']:,} persona items added, "
            f"{counts.traits['merged'] + counts.facts['merged']:,} merged",
            {"import_id": iid, "counts": {k: v for k, v in counts.to_json().items() if k != "conflicts"}},
        )

    def _persona_full(self) -> bool:
        n = self.db.execute("SELECT count(*) FROM trait WHERE status = 'active'").fetchone()[0]
        return n >= self.db.params.persona.max_traits

    def _segment_sums(self, iid: int) -> None:
        """A segment the import made whole keeps the summed vector it had (the same model's)."""
        for (rec_s,) in self.db.execute(
            "SELECT record FROM cube_stage WHERE import_id = ? AND member = 'segment_vector'", (iid,)
        ).fetchall():
            rec = json.loads(rec_s)
            sid = self.mapped(iid, "segment", rec["segment"], action="added")
            if sid is None:
                continue
            seg = self._record(iid, "segment", rec["segment"])
            row = self.db.execute("SELECT tier, page_count FROM segment WHERE id = ?", (sid,)).fetchone()
            if row is None or row[1] != seg["page_count"]:
                continue
            acc = decode_vector(rec["sum"], self.db.dim, "segment sum")
            self.segments.set_sum(sid, row[0], acc)

    # ------------------------------------------------------------------ the import's record
    def note(
        self,
        iid: int,
        kind: str,
        ref: int,
        item_id: int | None,
        action: str,
        *,
        key: str | None = None,
        before: dict | None = None,
        after_version: int | None = None,
        stamp: float | None = None,
        note: str = "",
    ) -> None:
        more = {"key": key, "before": before, "after_version": after_version, "stamp": stamp, "note": note}
        staging.note_item(self.db, iid, kind, ref, item_id, action, **more)

    def mapped(self, iid: int, kind: str, ref: int, *, action: str | None = None) -> int | None:
        """The item of this memory that the cube's `kind` `ref` became (or is), in import `iid`."""
        row = self.db.execute(
            "SELECT item_id, action FROM cube_import_item WHERE import_id = ? AND kind = ? AND ref = ?",
            (iid, kind, ref),
        ).fetchone()
        if row is None or (action is not None and row[1] != action) or row[1] not in ("added", "present", "merged"):
            return None
        return row[0]

    def mapping(self, iid: int, kind: str) -> dict[int, int]:
        return {
            r[0]: r[1]
            for r in self.db.execute(
                "SELECT ref, item_id FROM cube_import_item WHERE import_id = ? AND kind = ? AND item_id IS NOT NULL "
                "AND action IN ('added', 'present')",
                (iid, kind),
            ).fetchall()
        }

    def _counts(self, iid: int) -> ImportCounts:
        row = self.db.execute("SELECT summary FROM cube_import WHERE id = ?", (iid,)).fetchone()
        return ImportCounts.from_json(from_json(row[0] if row else None, {}))

    def _save_counts(self, iid: int, counts: ImportCounts) -> None:
        staging.save_summary(self.db, iid, counts.to_json())


def _persona_text(kind: str, rec: dict) -> str:
    """The text a trait or fact is embedded as (memory_core.persona.component)."""
    return f"{rec['dimension']}: {rec['value']}" if kind == "trait" else rec["text"]


def _selection_text(sel: dict) -> str:
    if sel.get("persona_only"):
        return "the persona"
    parts = []
    if sel.get("chat") is not None:
        parts.append(f"chat {sel['chat']}")
    if sel.get("segment") is not None:
        parts.append(f"segment {sel['segment']}")
    if sel.get("since") is not None or sel.get("until") is not None:
        parts.append("a span of time")
    return " and ".join(parts) or "a whole memory"
