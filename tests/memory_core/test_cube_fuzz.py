"""Corrupted cubes, made by hypothesis (truncated, bytes flipped, members with paths that leave the cube,
huge members, records changed behind valid checksums), fed to the importer: it never raises anything but
CubeError (one line), and a refused cube leaves memory exactly as it was (a full dump of its tables
compared). A cube the damage left valid imports as the intact one does; one whose records were changed
into other valid ones imports consistently and its undo puts memory back."""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_core import MemoryStore
from memory_core.cubes import CubeError, CubeLimits

from .conftest import Clock
from .cubes_support import build_memory, dump, open_memory

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
ITEM_TABLES = ("page", "segment", "chain", "conversation", "trait", "knowledge", "item_version", "derivation")


@dataclass
class World:
    folder: Path
    cube: bytes  # the intact cube
    template: Path  # a memory with something in it, copied for each example
    after: dict  # its dump once the intact cube is imported
    embedder: object

    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing example
        return f"World({self.folder})"


def _comparable(d: dict) -> dict:
    """A dump without what differs between two files of the same contents (the file's own checksum)."""
    d = dict(d)
    d["cube_import"] = [r[:3] + r[4:] for r in d["cube_import"]]
    return d


@pytest.fixture(scope="module")
def world(tmp_path_factory, embedder) -> World:
    folder = tmp_path_factory.mktemp("fuzz")
    src = open_memory(folder / "source.db", embedder, Clock())
    build_memory(src, src.clock)  # type: ignore[arg-type]
    cube = src.cubes.export(folder / "c.mnemocube").path.read_bytes()
    src.close()
    t = open_memory(folder / "template.db", embedder, Clock())
    cid = t.conversations.create_conversation("mine")
    t.intake.add_page(cid, "I collect vinyl records.", "Which genres?")
    t.persona.add_knowledge("user", "I live in Madrid")
    t.close()
    w = World(folder, cube, folder / "template.db", {}, embedder)
    with _copy(w) as (store, path):
        path.write_bytes(cube)
        store.cubes.import_cube(path)
        w.after = _comparable(dump(store))
    return w


class _copy:
    """A fresh copy of the template memory and a path for the cube, removed afterwards."""

    def __init__(self, w: World):
        self.w = w

    def __enter__(self) -> tuple[MemoryStore, Path]:
        self.dir = Path(tempfile.mkdtemp(dir=self.w.folder))
        shutil.copy(self.w.template, self.dir / "m.db")
        self.store = open_memory(self.dir / "m.db", self.w.embedder, Clock())
        return self.store, self.dir / "c.mnemocube"

    def __exit__(self, *exc: object) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def attempt(w: World, data: bytes, *, limits: CubeLimits | None = None, intact_if_valid: bool = True) -> str:
    """Import `data` as a cube into a copy of the template: "refused" (memory unchanged) or "imported"."""
    with _copy(w) as (store, path):
        path.write_bytes(data)
        before = dump(store)
        try:
            store.cubes.import_cube(path, limits)
        except CubeError as exc:
            assert "\n" not in str(exc) and str(exc), repr(exc)
            assert dump(store) == before
            return "refused"
        assert store.check_integrity() == []
        if intact_if_valid:
            assert _comparable(dump(store)) == w.after
        else:
            store.cubes.undo(store.cubes.imports()[0].id)
            now = dump(store)
            assert {t: now[t] for t in ITEM_TABLES} == {t: before[t] for t in ITEM_TABLES}
        return "imported"


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def _zip(members: dict[str, bytes], *, fix: bool) -> bytes:
    members = dict(members)
    if fix:
        manifest = json.loads(members["manifest.json"])
        for name, body in members.items():
            if name in manifest["members"]:
                manifest["members"][name].update(
                    sha256=hashlib.sha256(body).hexdigest(), bytes=len(body), records=body.count(b"\n")
                )
        members["manifest.json"] = json.dumps(manifest).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return out.getvalue()


@FUZZ
@given(data=st.data())
def test_truncated_cubes(world, data):
    n = data.draw(st.integers(min_value=0, max_value=len(world.cube) - 1))
    assert attempt(world, world.cube[:n]) == "refused"


@FUZZ
@given(
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), min_size=1, max_size=6)
)
def test_flipped_bytes(world, flips):
    raw = bytearray(world.cube)
    for at, mask in flips:
        raw[at % len(raw)] ^= mask
    attempt(world, bytes(raw))  # refused, or (a flip in a date, say) imported exactly as the intact cube


_PARTS = st.sampled_from(
    ["..", ".", "", "a", "vectors", "pages.jsonl", "manifest.json", "C:", "\\..", "/", "activation"]
)


@FUZZ
@given(parts=st.lists(_PARTS, min_size=1, max_size=4), listed=st.booleans())
def test_member_names_that_leave_the_cube(world, parts, listed):
    name = "/".join(parts) or ".."
    members = _members(world.cube)
    if name in members:
        name = "../" + name
    members[name] = b"{}\n"
    if listed:
        manifest = json.loads(members["manifest.json"])
        manifest["members"][name] = {"sha256": "0" * 64, "bytes": 0, "records": 0, "optional": True}
        members["manifest.json"] = json.dumps(manifest).encode()
    # the one kind of name a cube may add: an optional member of another memory type, listed as such
    optional = listed and re.fullmatch(r"(activation|parametric)(/[a-z0-9_-]+)*/[a-z0-9_-]+\.[a-z0-9]+", name)
    assert attempt(world, _zip(members, fix=True)) == ("imported" if optional else "refused")


@FUZZ
@given(
    mib=st.integers(min_value=2, max_value=24),
    member=st.sampled_from(["pages.jsonl", "facts.jsonl", "vectors/pages.jsonl", "activation/kv.bin"]),
    filler=st.sampled_from([b"\x00", b'{"id": 1}\n', b"a"]),
)
def test_huge_members(world, mib, member, filler):
    members = _members(world.cube)
    members[member] = filler * (mib * 1024**2 // len(filler))
    if member not in json.loads(members["manifest.json"])["members"]:
        manifest = json.loads(members["manifest.json"])
        manifest["members"][member] = {"sha256": "0" * 64, "bytes": 0, "records": 0, "optional": True}
        members["manifest.json"] = json.dumps(manifest).encode()
    assert attempt(world, _zip(members, fix=True)) == "refused"  # far more than 100 to 1: a bomb


@FUZZ
@given(seed=st.integers(min_value=0, max_value=2**32), kib=st.integers(min_value=1100, max_value=2048))
def test_members_over_the_size_limit(world, seed, kib):
    members = _members(world.cube)
    members["pages.jsonl"] = random.Random(seed).randbytes(kib * 1024)  # incompressible: no ratio to catch
    limits = CubeLimits(max_member_bytes=1024**2)
    assert attempt(world, _zip(members, fix=True), limits=limits) == "refused"


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(data=st.data())
def test_records_changed_behind_valid_checksums(world, data):
    members = _members(world.cube)
    names = sorted(n for n in members if n.endswith(".jsonl") and members[n])
    name = data.draw(st.sampled_from(names))
    lines = members[name].split(b"\n")[:-1]
    i = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    record = json.loads(lines[i])
    how = data.draw(st.sampled_from(["field", "drop", "line", "bytes"]))
    if how == "field":
        record[data.draw(st.sampled_from(sorted(record)))] = data.draw(_JSONISH)
        lines[i] = json.dumps(record).encode()
    elif how == "drop":
        del record[data.draw(st.sampled_from(sorted(record)))]
        lines[i] = json.dumps(record).encode()
    elif how == "line":
        lines[i] = data.draw(st.text(max_size=40)).encode("utf-8", "surrogatepass").replace(b"\n", b" ")
    else:
        lines[i] = data.draw(st.binary(max_size=40)).replace(b"\n", b" ")
    members[name] = b"\n".join(lines) + b"\n"
    attempt(world, _zip(members, fix=True), intact_if_valid=False)
