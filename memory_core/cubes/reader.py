"""Reading an untrusted cube: the zip is read in place, never extracted (a member's name is never a path),
and everything is checked before a reader gets a record. `check()` reads the whole cube once: the zip's
members and their sizes, the manifest, every record against the schema and against the records before it,
and each member's SHA-256. An import changes nothing until it has passed; a cube that fails says why in
one line (CubeError)."""

from __future__ import annotations

import hashlib
import json
import re
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..pages import token_match
from . import safezip
from .format import (
    COUNT_OF,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    OPTIONAL_PREFIXES,
    RECORD_MEMBERS,
    VECTOR_MEMBERS,
    CubeError,
    CubeLimits,
    decode_bytes,
    decode_vector,
    schema_problem,
)

# what a damaged zip raises from zipfile and zlib as it is opened or read
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, struct.error, NotImplementedError, OverflowError)
_DRIVE = re.compile(r"^[A-Za-z]:")
_S_IFMT, _S_IFLNK, _S_IFREG, _S_IFDIR = 0o170000, 0o120000, 0o100000, 0o040000


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


@dataclass
class CubeIndex:
    """What `check()` learned of the cube: its ids, which the importer and the plan use."""

    chats: set[int] = field(default_factory=set)
    chains: set[int] = field(default_factory=set)
    segments: dict[int, str] = field(default_factory=dict)  # id -> tier
    pages: set[int] = field(default_factory=set)
    traits: set[int] = field(default_factory=set)
    facts: set[int] = field(default_factory=set)
    records: Counter = field(default_factory=Counter)  # member -> records


class CubeReader:
    """An open cube file. Use as a context manager: `with CubeReader(path) as cube: cube.check()`."""

    def __init__(self, path: str | Path, limits: CubeLimits | None = None):
        self.path = Path(path)
        self.name = self.path.name
        self.limits = limits or CubeLimits()
        self._zip: zipfile.ZipFile | None = None
        self._fh: Any = None
        self.infos: dict[str, zipfile.ZipInfo] = {}
        self.manifest: dict[str, Any] = {}
        self.file_sha256 = ""
        self.index: CubeIndex | None = None

    # ------------------------------------------------------------------ opening
    def __enter__(self) -> CubeReader:
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for thing in (self._zip, self._fh):
            try:
                if thing is not None:
                    thing.close()
            except (OSError, *_ZIP_ERRORS):
                pass
        self._zip = self._fh = None

    def _open(self) -> None:
        p = self.path
        try:
            if p.is_dir():
                raise CubeError(f"{p}: is a folder, not a memory cube")
            size = p.stat().st_size
        except FileNotFoundError:
            raise CubeError(f"{p}: no such file") from None
        except OSError as exc:
            raise CubeError(f"{p}: cannot read ({exc.strerror or exc})") from None
        if size > self.limits.max_file_bytes:
            raise CubeError(f"{self.name}: {safezip.size_text(size)} is larger than the memory cube limit")
        try:
            self._fh = p.open("rb")
            digest = hashlib.sha256()
            while chunk := self._fh.read(safezip.CHUNK):
                digest.update(chunk)
            self.file_sha256 = digest.hexdigest()
            self._fh.seek(0)
            if self._fh.read(4) != b"PK\x03\x04":
                raise CubeError(f"{self.name}: not a memory cube (it is not a zip file)")
            self._fh.seek(0)
            self._zip = zipfile.ZipFile(self._fh)
        except CubeError:
            raise
        except OSError as exc:
            raise CubeError(f"{self.name}: cannot read ({exc.strerror or exc})") from None
        except (*_ZIP_ERRORS, ValueError) as exc:
            raise CubeError(f"{self.name}: not a memory cube (a damaged zip file: {_one_line(exc)})") from None
        self._check_members()
        self.manifest = self._read_manifest()
        self._check_listed()

    def _check_members(self) -> None:
        assert self._zip is not None
        infos = self._zip.infolist()
        if len(infos) > self.limits.max_members:
            raise CubeError(f"{self.name}: {len(infos)} members, more than a memory cube holds")
        total = 0
        for info in infos:
            name = info.filename
            shown = f"{self.name}: member {safezip.printable(name)!r}"
            parts = name.split("/")
            if name.startswith("/") or "\\" in name or _DRIVE.match(name):
                raise CubeError(f"{shown} has an absolute path; refused")
            if any(part in ("..", ".", "") for part in parts):
                raise CubeError(f"{shown} has a path that leaves its folder ('..' or an empty part); refused")
            mode = (info.external_attr >> 16) & _S_IFMT
            if mode == _S_IFLNK:
                raise CubeError(f"{shown} is a symbolic link; refused")
            if mode not in (0, _S_IFREG) or info.is_dir():
                raise CubeError(f"{shown} is not a plain file; refused")
            if info.flag_bits & 0x1:
                raise CubeError(f"{shown} is encrypted; export the cube again without a password")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise CubeError(f"{shown} uses a compression a memory cube does not (method {info.compress_type})")
            if name in self.infos:
                raise CubeError(f"{shown} is in the zip twice; refused")
            safezip.check_size(
                info.file_size,
                info.compress_size,
                f"{self.name}/{safezip.printable(name)}",
                max_bytes=self.limits.max_member_bytes,
                max_ratio=self.limits.max_ratio,
                error=CubeError,
            )
            total += info.file_size
            self.infos[name] = info
        if total > self.limits.max_total_bytes:
            raise CubeError(
                f"{self.name}: refused: its members expand to {safezip.size_text(total)}, over the "
                f"{safezip.size_text(self.limits.max_total_bytes)} limit"
            )

    def _read_manifest(self) -> dict[str, Any]:
        info = self.infos.get(MANIFEST)
        if info is None:
            raise CubeError(f"{self.name}: not a memory cube (no {MANIFEST})")
        raw = self._guarded_read(info, self.limits.max_manifest_bytes)
        try:
            text = raw.decode("utf-8")
            manifest = json.loads(text, parse_constant=_refuse_constant)
        except UnicodeDecodeError as exc:
            raise CubeError(f"{self.name}: {MANIFEST}: not UTF-8 text (byte {exc.start})") from None
        except (ValueError, RecursionError) as exc:
            raise CubeError(f"{self.name}: {MANIFEST}: not valid JSON ({_one_line(exc)})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CubeError(f"{self.name}: not a memory cube ({MANIFEST} does not say format {FORMAT!r})")
        version = manifest.get("format_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
            raise CubeError(
                f"{self.name}: made by a newer Mnemo (cube format {version}; this Mnemo reads up to "
                f"{FORMAT_VERSION}): update Mnemo to import it"
            )
        problem = schema_problem("manifest", manifest)
        if problem:
            raise CubeError(f"{self.name}: {MANIFEST}: {problem}")
        return manifest

    def _check_listed(self) -> None:
        listed = self.manifest["members"]
        known = {name for name, _ in RECORD_MEMBERS}
        vectors = {name for name, _ in VECTOR_MEMBERS}
        for name in self.infos:
            if name != MANIFEST and name not in listed:
                raise CubeError(f"{self.name}: member {safezip.printable(name)!r} is not in the manifest; refused")
        for name, entry in listed.items():
            if name not in self.infos:
                raise CubeError(f"{self.name}: the manifest lists {name}, which the cube does not hold")
            if name in known or name in vectors:
                if entry.get("optional"):
                    raise CubeError(f"{self.name}: {name} cannot be optional")
            elif not (entry.get("optional") and name.startswith(OPTIONAL_PREFIXES)):
                raise CubeError(f"{self.name}: unknown member {name}")
            if entry["bytes"] != self.infos[name].file_size:
                raise CubeError(f"{self.name}: {name} is not the size the manifest says (damaged or altered)")
        need = known | (vectors if self.manifest["embedding"]["vectors"] else set())
        missing = sorted(need - set(listed))
        if missing:
            raise CubeError(f"{self.name}: not a complete memory cube (no {', '.join(missing)})")
        if not self.manifest["embedding"]["vectors"] and vectors & set(listed):
            raise CubeError(f"{self.name}: the cube holds vectors its manifest says it has not")

    # ------------------------------------------------------------------ reading members
    def _guarded_read(self, info: zipfile.ZipInfo, max_bytes: int) -> bytes:
        return b"".join(self._chunks(info, max_bytes))

    def _chunks(self, info: zipfile.ZipInfo, max_bytes: int | None = None) -> Iterator[bytes]:
        assert self._zip is not None
        try:
            yield from safezip.iter_member(
                self._zip,
                info,
                f"{self.name}/{safezip.printable(info.filename)}",
                max_bytes=min(max_bytes or self.limits.max_member_bytes, self.limits.max_member_bytes),
                max_ratio=self.limits.max_ratio,
                error=CubeError,
            )
        except OSError as exc:
            raise CubeError(f"{self.name}: cannot read ({exc.strerror or exc})") from None
        except _ZIP_ERRORS as exc:
            raise CubeError(f"{self.name}/{info.filename}: damaged ({_one_line(exc)})") from None
        except RuntimeError as exc:  # zipfile: "File ... is encrypted, password required"
            raise CubeError(f"{self.name}/{info.filename}: {_one_line(exc)}") from None

    def _lines(self, name: str) -> Iterator[tuple[int, str]]:
        """The member's lines as text (strict UTF-8, no NUL), each at most `max_line_bytes`, with their
        numbers; its SHA-256 and size are checked against the manifest once it has been read to its end."""
        info = self.infos[name]
        expected = self.manifest["members"][name]
        digest = hashlib.sha256()
        where = f"{self.name}/{name}"
        rest = b""
        n = 0
        size = 0
        for chunk in self._chunks(info):
            digest.update(chunk)
            size += len(chunk)
            pieces = (rest + chunk).split(b"\n")
            rest = pieces.pop()
            for raw in pieces:
                n += 1
                yield n, self._decode(raw, where, n)
            if len(rest) > self.limits.max_line_bytes:
                raise CubeError(f"{where}: line {n + 1} is longer than a record may be (an oversized item)")
        if rest:
            n += 1
            yield n, self._decode(rest, where, n)
        if size != expected["bytes"] or digest.hexdigest() != expected["sha256"]:
            raise CubeError(f"{where}: checksum mismatch (the cube is damaged or was altered)")
        if n != expected["records"]:
            raise CubeError(f"{where}: {n} records where the manifest says {expected['records']}")

    def _decode(self, raw: bytes, where: str, n: int) -> str:
        if len(raw) > self.limits.max_line_bytes:
            raise CubeError(f"{where}: line {n} is longer than a record may be (an oversized item)")
        if b"\x00" in raw:
            raise CubeError(f"{where}: line {n}: a NUL byte, which text never holds")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CubeError(f"{where}: line {n}, byte {exc.start + 1}: not UTF-8 text") from None

    def records(self, name: str, definition: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The member's records with their line numbers, each one valid against the schema's `definition`."""
        where = f"{self.name}/{name}"
        for n, text in self._lines(name):
            if not text.strip():
                raise CubeError(f"{where}: line {n} is empty")
            if "\\u0000" in text:
                raise CubeError(f"{where}: line {n}: a NUL character (\\u0000), which text never holds")
            try:
                record = json.loads(text, parse_constant=_refuse_constant)
            except (ValueError, RecursionError) as exc:
                raise CubeError(f"{where}: line {n}: malformed JSON ({_one_line(exc)})") from None
            if not isinstance(record, dict):
                raise CubeError(f"{where}: line {n}: not a JSON object")
            problem = schema_problem(definition, record)
            if problem:
                raise CubeError(f"{where}: line {n}: {problem}")
            yield n, record

    def drain(self, name: str) -> None:
        """Read a member through (its checksum checked) without using it: an optional member."""
        expected = self.manifest["members"][name]
        digest = hashlib.sha256()
        size = 0
        for chunk in self._chunks(self.infos[name]):
            digest.update(chunk)
            size += len(chunk)
        if size != expected["bytes"] or digest.hexdigest() != expected["sha256"]:
            raise CubeError(f"{self.name}/{name}: checksum mismatch (the cube is damaged or was altered)")

    def optional_members(self, prefix: str) -> list[str]:
        """The optional members under `prefix` (e.g. "parametric/"), as the manifest lists them."""
        return [n for n, e in self.manifest["members"].items() if e.get("optional") and n.startswith(prefix)]

    def extract(self, name: str, dest: Path, max_bytes: int) -> None:
        """Write an optional member to `dest` (a file the caller names, never one the cube names), at
        most `max_bytes`, its checksum checked; CubeError (and no `dest` left) when it fails."""
        expected = self.manifest["members"][name]
        digest = hashlib.sha256()
        size = 0
        try:
            with open(dest, "wb") as out:
                for chunk in self._chunks(self.infos[name], max_bytes):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            if size != expected["bytes"] or digest.hexdigest() != expected["sha256"]:
                raise CubeError(f"{self.name}/{name}: checksum mismatch (the cube is damaged or was altered)")
        except BaseException:
            Path(dest).unlink(missing_ok=True)
            raise

    # ------------------------------------------------------------------ the whole check
    @property
    def dim(self) -> int:
        return int(self.manifest["embedding"]["dim"])

    @property
    def has_vectors(self) -> bool:
        return bool(self.manifest["embedding"]["vectors"])

    def check(self) -> CubeIndex:
        """Read every member once and check every record; raises CubeError at the first problem."""
        ix = CubeIndex()
        checks = _Checks(self, ix)
        for name, definition in RECORD_MEMBERS:
            for n, rec in self.records(name, definition):
                checks.record(name, n, rec)
                ix.records[name] += 1
            checks.member_done(name)
        if self.has_vectors:
            for name, definition in VECTOR_MEMBERS:
                for n, rec in self.records(name, definition):
                    checks.vector(name, n, rec)
                    ix.records[name] += 1
                checks.vectors_done(name)
        for name, entry in self.manifest["members"].items():
            if entry.get("optional"):
                self.drain(name)
        counts = self.manifest["counts"]
        for name, key in COUNT_OF.items():
            if counts[key] != ix.records[name]:
                raise CubeError(
                    f"{self.name}: the manifest counts {counts[key]} {key} but the cube holds {ix.records[name]}"
                )
        self.index = ix
        return ix


class _Checks:
    """The checks of records against the records before them (ids unique, links to records that exist,
    tiers that agree, vectors of the right size)."""

    def __init__(self, cube: CubeReader, ix: CubeIndex):
        self.cube = cube
        self.ix = ix
        self.seg_pages: Counter = Counter()
        self.seg_counts: dict[int, int] = {}
        self.last_page = 0
        self.seen: dict[str, set[int]] = {}

    def _fail(self, name: str, n: int, why: str) -> CubeError:
        return CubeError(f"{self.cube.name}/{name}: line {n}: {why}")

    def _unique(self, name: str, n: int, key: int) -> None:
        seen = self.seen.setdefault(name, set())
        if key in seen:
            raise self._fail(name, n, f"id {key} appears twice")
        seen.add(key)

    def record(self, name: str, n: int, rec: dict[str, Any]) -> None:
        ix = self.ix
        rid = rec["id"]
        self._unique(name, n, rid)
        if name == "chats.jsonl":
            ix.chats.add(rid)
        elif name == "chains.jsonl":
            ix.chains.add(rid)
        elif name == "segments.jsonl":
            ix.segments[rid] = rec["tier"]
            self.seg_counts[rid] = rec["page_count"]
        elif name == "pages.jsonl":
            self._page(name, n, rec)
        elif name in ("traits.jsonl", "facts.jsonl"):
            self._persona(name, n, rec)

    def _page(self, name: str, n: int, rec: dict[str, Any]) -> None:
        ix = self.ix
        rid = rec["id"]
        if rid <= self.last_page:
            raise self._fail(name, n, "pages are not in the order of their ids")
        self.last_page = rid
        if not (rec["user_text"].strip() or rec["assistant_text"].strip()):
            raise self._fail(name, n, "a page without text")
        if rec["chat"] is not None and rec["chat"] not in ix.chats:
            raise self._fail(name, n, f"chat {rec['chat']} is not in the cube")
        if rec["chain"] is not None and rec["chain"] not in ix.chains:
            raise self._fail(name, n, f"chain {rec['chain']} is not in the cube")
        if rec["prev"] is not None and rec["prev"] not in ix.pages:
            raise self._fail(name, n, f"page {rec['prev']} before it is not in the cube")
        seg = rec["segment"]
        if (rec["tier"] == "stm") != (seg is None):
            raise self._fail(name, n, "a short-term page has no segment, and only it")
        if seg is not None:
            if seg not in ix.segments:
                raise self._fail(name, n, f"segment {seg} is not in the cube")
            if ix.segments[seg] != rec["tier"]:
                raise self._fail(name, n, f"its tier is not its segment's ({ix.segments[seg]})")
            self.seg_pages[seg] += 1
        if len(json.dumps(rec["meta"], ensure_ascii=False)) > self.cube.limits.max_meta_bytes:
            raise self._fail(name, n, "its meta is larger than a page's may be (an oversized item)")
        ix.pages.add(rid)

    def _persona(self, name: str, n: int, rec: dict[str, Any]) -> None:
        ix = self.ix
        (ix.traits if name == "traits.jsonl" else ix.facts).add(rec["id"])
        if name == "traits.jsonl" and not (rec["dimension"].strip() and rec["value"].strip()):
            raise self._fail(name, n, "a trait without a dimension or a value")
        if name == "facts.jsonl" and not rec["text"].strip():
            raise self._fail(name, n, "a fact without text")
        for sources in [rec["sources"], *(v["sources"] for v in rec["versions"])]:
            missing = next((p for p in sources if p not in ix.pages), None)
            if missing is not None:
                raise self._fail(name, n, f"source page {missing} is not in the cube")
        missing = next((c for c in rec["chats"] if c not in ix.chats), None)
        if missing is not None:
            raise self._fail(name, n, f"chat {missing} is not in the cube")
        numbers = [v["version"] for v in rec["versions"]]
        if len(set(numbers)) != len(numbers) or any(v >= rec["version"] for v in numbers):
            raise self._fail(name, n, "its earlier versions are not numbered below its version, once each")

    def member_done(self, name: str) -> None:
        if name == "pages.jsonl":
            for sid, count in self.seg_counts.items():
                if self.seg_pages[sid] != count:
                    raise CubeError(
                        f"{self.cube.name}/segments.jsonl: segment {sid} counts {count} pages but the cube "
                        f"holds {self.seg_pages[sid]} of it"
                    )

    def vector(self, name: str, n: int, rec: dict[str, Any]) -> None:
        ix, dim = self.ix, self.cube.dim
        what = f"{self.cube.name}/{name}: line {n}"
        if name == "vectors/pages.jsonl":
            self._unique(name, n, rec["page"])
            if rec["page"] not in ix.pages:
                raise self._fail(name, n, f"page {rec['page']} is not in the cube")
            decode_vector(rec["vector"], dim, what)
            if rec["tokens"] is not None:
                rows = decode_bytes(rec["tokens"], what)
                rb = token_match.row_bytes(dim)
                if len(rows) % rb or len(rows) // rb > self.cube.limits.max_token_rows:
                    raise self._fail(name, n, "its word rows are not whole rows of the cube's dimension")
            if rec["sides"] is not None and len(decode_bytes(rec["sides"], what)) not in (0, 2 * dim):
                raise self._fail(name, n, "its side vectors are not of the cube's dimension")
        elif name == "vectors/segments.jsonl":
            self._unique(name, n, rec["segment"])
            if rec["segment"] not in ix.segments:
                raise self._fail(name, n, f"segment {rec['segment']} is not in the cube")
            decode_vector(rec["sum"], dim, what)
        else:
            kind = rec["kind"]
            self._unique(f"{name}:{kind}", n, rec["id"])
            if rec["id"] not in (ix.traits if kind == "trait" else ix.facts):
                raise self._fail(name, n, f"{kind} {rec['id']} is not in the cube")
            decode_vector(rec["vector"], dim, what)

    def vectors_done(self, name: str) -> None:
        ix = self.ix
        want = {
            "vectors/pages.jsonl": len(ix.pages),
            "vectors/persona.jsonl": len(ix.traits) + len(ix.facts),
        }.get(name)
        if want is not None and ix.records[name] != want:
            raise CubeError(f"{self.cube.name}/{name}: {ix.records[name]} vectors for {want} items")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."
