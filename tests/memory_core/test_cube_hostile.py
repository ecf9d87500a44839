"""A cube is untrusted: each way it can be wrong is refused in one line naming what is wrong, by the dry run
and the import alike, and memory (every table of it, vectors and indexes included) is left exactly as it
was."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from memory_core import MemoryStore
from memory_core.cubes import FORMAT_VERSION, CubeError, CubeLimits

from .conftest import Clock
from .cubes_support import build_memory, dump, open_memory


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, embedder) -> Path:
    """A valid cube of a small memory (made once for the module)."""
    folder = tmp_path_factory.mktemp("cube")
    s = open_memory(folder / "source.db", embedder, Clock())
    try:
        build_memory(s, s.clock)  # type: ignore[arg-type]
        return s.cubes.export(folder / "good.mnemocube").path
    finally:
        s.close()


@pytest.fixture
def target(tmp_path, embedder, clock):
    s = open_memory(tmp_path / "target.db", embedder, clock)
    cid = s.conversations.create_conversation("mine")
    s.intake.add_page(cid, "I collect vinyl records.", "Which genres?")
    s.persona.add_knowledge("user", "I live in Madrid")
    yield s
    s.close()


def members_of(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def write_cube(
    path: Path, members: dict[str, bytes], *, fix: bool = True, infos: dict[str, zipfile.ZipInfo] | None = None
) -> Path:
    """A zip of `members`; with `fix`, the manifest's checksums, sizes and record counts made to agree with
    them (so what is refused is the content, not the checksum)."""
    members = dict(members)
    if fix and "manifest.json" in members:
        manifest = json.loads(members["manifest.json"])
        for name, data in members.items():
            if name in manifest["members"]:
                manifest["members"][name] = {
                    **manifest["members"][name],
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "bytes": len(data),
                    "records": data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1),
                }
        members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = (infos or {}).get(name) or zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def _lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines()]


def _jsonl(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def refused(store: MemoryStore, path: Path, expect: str, limits: CubeLimits | None = None) -> str:
    """Assert that the dry run and the import both refuse the cube, with a one-line message holding
    `expect`, and that nothing changed; returns the message."""
    before = dump(store)
    with pytest.raises(CubeError) as dry:
        store.cubes.plan(path, limits)
    with pytest.raises(CubeError) as real:
        store.cubes.import_cube(path, limits)
    for exc in (dry.value, real.value):
        message = str(exc)
        assert "\n" not in message and expect in message, message
    assert dump(store) == before
    return str(real.value)


def test_the_pristine_cube_imports(target, pristine):
    assert target.cubes.import_cube(pristine).status == "done"


def test_a_cube_of_an_older_format_imports(target, pristine, tmp_path):
    """Format 1 (before facts about other people) is read by this Mnemo as it was written."""
    m = members_of(pristine)
    manifest = json.loads(m["manifest.json"])
    manifest["format_version"] = 1
    m["manifest.json"] = json.dumps(manifest).encode()
    assert target.cubes.import_cube(write_cube(tmp_path / "old.mnemocube", m, fix=False)).status == "done"


def test_not_a_zip(target, tmp_path):
    p = tmp_path / "x.mnemocube"
    p.write_text("just some text\n")
    refused(target, p, "not a memory cube (it is not a zip file)")
    p.write_bytes(b"")
    refused(target, p, "not a zip file")
    p.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    refused(target, p, "damaged zip file")
    refused(target, tmp_path / "missing.mnemocube", "no such file")
    refused(target, tmp_path, "is a folder")


def test_missing_manifest(target, pristine, tmp_path):
    m = members_of(pristine)
    del m["manifest.json"]
    refused(target, write_cube(tmp_path / "x.mnemocube", m), "no manifest.json")


@pytest.mark.parametrize(
    "name, expect",
    [
        ("../evil.txt", "leaves its folder"),
        ("vectors/../../evil.txt", "leaves its folder"),
        ("/etc/evil", "absolute path"),
        ("C:/evil.txt", "absolute path"),
        ("..\\evil.txt", "absolute path"),
        ("a//b.txt", "leaves its folder"),
    ],
)
def test_member_paths_that_leave_the_cube(target, pristine, tmp_path, name, expect):
    m = members_of(pristine)
    m[name] = b"x"
    refused(target, write_cube(tmp_path / "x.mnemocube", m), expect)


def test_a_symlink_member(target, pristine, tmp_path):
    m = members_of(pristine)
    link = zipfile.ZipInfo("activation/link")
    link.external_attr = 0o120777 << 16
    m["activation/link"] = b"/etc/passwd"
    refused(target, write_cube(tmp_path / "x.mnemocube", m, infos={"activation/link": link}), "symbolic link")


def test_a_checksum_mismatch(target, pristine, tmp_path):
    m = members_of(pristine)
    m["pages.jsonl"] = m["pages.jsonl"].replace(b"Lisbon", b"Madrid", 1)
    refused(target, write_cube(tmp_path / "x.mnemocube", m, fix=False), "checksum mismatch")


def test_a_newer_format(target, pristine, tmp_path):
    m = members_of(pristine)
    manifest = json.loads(m["manifest.json"])
    manifest["format_version"] = FORMAT_VERSION + 1
    m["manifest.json"] = json.dumps(manifest).encode()
    msg = refused(target, write_cube(tmp_path / "x.mnemocube", m, fix=False), "made by a newer Mnemo")
    assert "update Mnemo" in msg


def test_malformed_json_lines(target, pristine, tmp_path):
    m = members_of(pristine)
    lines = m["facts.jsonl"].splitlines()
    lines[1] = b'{"id": 3, "owner": "user", "text": "cut sh'
    m["facts.jsonl"] = b"\n".join(lines) + b"\n"
    refused(target, write_cube(tmp_path / "x.mnemocube", m), "facts.jsonl: line 2: malformed JSON")
    m = members_of(pristine)
    m["chats.jsonl"] = m["chats.jsonl"] + b"[1, 2]\n"
    refused(target, write_cube(tmp_path / "y.mnemocube", m), "not a JSON object")
    m = members_of(pristine)
    m["pages.jsonl"] = m["pages.jsonl"].replace(b'"pinned":false', b'"pinned":NaN', 1)
    refused(target, write_cube(tmp_path / "z.mnemocube", m), "malformed JSON")


def test_text_that_is_not_utf8(target, pristine, tmp_path):
    m = members_of(pristine)
    m["pages.jsonl"] = m["pages.jsonl"].replace(b"Lisbon", b"Lisb\xf6n", 1)
    refused(target, write_cube(tmp_path / "x.mnemocube", m), "not UTF-8 text")
    m = members_of(pristine)
    m["pages.jsonl"] = m["pages.jsonl"].replace(b"Lisbon", b"Lis\\u0000bon", 1)
    refused(target, write_cube(tmp_path / "y.mnemocube", m), "NUL")


def test_oversized_items(target, pristine, tmp_path):
    m = members_of(pristine)
    pages = _lines(m["pages.jsonl"])
    pages[0]["user_text"] = "x" * 1_000_001
    m["pages.jsonl"] = _jsonl(pages)
    refused(target, write_cube(tmp_path / "x.mnemocube", m), "user_text: larger than the format allows")
    pages[0]["user_text"] = "x" * 5000
    m["pages.jsonl"] = _jsonl(pages)
    refused(
        target, write_cube(tmp_path / "y.mnemocube", m), "longer than a record may be", CubeLimits(max_line_bytes=4096)
    )
    pages[0]["user_text"] = "fine"
    pages[0]["meta"] = {"blob": "y" * 70_000}
    m["pages.jsonl"] = _jsonl(pages)
    refused(target, write_cube(tmp_path / "z.mnemocube", m), "its meta is larger")


def test_a_zip_bomb(target, pristine, tmp_path):
    m = members_of(pristine)
    m["activation/kv.bin"] = b"\x00" * (24 * 1024**2)  # 24 MiB of zeros deflate to about 24 KiB
    manifest = json.loads(m["manifest.json"])
    manifest["members"]["activation/kv.bin"] = {"sha256": "0" * 64, "bytes": 0, "records": 0, "optional": True}
    m["manifest.json"] = json.dumps(manifest).encode()
    msg = refused(target, write_cube(tmp_path / "y.mnemocube", m), "refused as a likely zip bomb")
    assert "to 1" in msg


def test_members_and_totals_over_the_limits(target, pristine, tmp_path):
    refused(target, pristine, "too large to import", CubeLimits(max_member_bytes=2048))
    refused(target, pristine, "over the", CubeLimits(max_total_bytes=4096))
    refused(target, pristine, "larger than the memory cube limit", CubeLimits(max_file_bytes=1000))


def test_members_the_manifest_does_not_vouch_for(target, pristine, tmp_path):
    m = members_of(pristine)
    m["notes.txt"] = b"hello"
    refused(target, write_cube(tmp_path / "x.mnemocube", m), "not in the manifest")
    m = members_of(pristine)
    del m["facts.jsonl"]
    refused(target, write_cube(tmp_path / "y.mnemocube", m), "does not hold")
    with zipfile.ZipFile(tmp_path / "z.mnemocube", "w") as zf:
        for name, data in members_of(pristine).items():
            zf.writestr(name, data)
        with pytest.warns(UserWarning):
            zf.writestr("pages.jsonl", b"")
    refused(target, tmp_path / "z.mnemocube", "in the zip twice")


def test_records_that_do_not_agree(target, pristine, tmp_path):
    m = members_of(pristine)
    pages = _lines(m["pages.jsonl"])
    pages[0]["chat"] = 999
    m["pages.jsonl"] = _jsonl(pages)
    refused(target, write_cube(tmp_path / "x.mnemocube", m), "chat 999 is not in the cube")
    m = members_of(pristine)
    facts = _lines(m["facts.jsonl"])
    facts[0]["sources"] = [424242]
    m["facts.jsonl"] = _jsonl(facts)
    refused(target, write_cube(tmp_path / "y.mnemocube", m), "source page 424242 is not in the cube")
    m = members_of(pristine)
    pages = _lines(m["pages.jsonl"])
    pages[1]["id"] = pages[0]["id"]
    m["pages.jsonl"] = _jsonl(pages)
    refused(target, write_cube(tmp_path / "z.mnemocube", m), "id 1 appears twice")
    m = members_of(pristine)
    pages = _lines(m["pages.jsonl"])
    for p in pages:
        p["prev"] = None
    m["pages.jsonl"] = _jsonl([pages[1], pages[0], *pages[2:]])
    refused(target, write_cube(tmp_path / "v.mnemocube", m), "not in the order of their ids")
    m = members_of(pristine)
    vecs = _lines(m["vectors/pages.jsonl"])
    m["vectors/pages.jsonl"] = _jsonl(vecs[:1] + vecs[2:])
    refused(target, write_cube(tmp_path / "w.mnemocube", m), "vectors for")
    vecs[0]["vector"] = vecs[0]["vector"][:-8] + "AAAAAA=="
    m["vectors/pages.jsonl"] = _jsonl(vecs)
    refused(target, write_cube(tmp_path / "u.mnemocube", m), "a vector of 383 values where the cube says 384")
    vecs = _lines(members_of(pristine)["vectors/pages.jsonl"])
    vecs[0]["vector"] = "not base64!"
    m["vectors/pages.jsonl"] = _jsonl(vecs)
    refused(target, write_cube(tmp_path / "t.mnemocube", m), "not base64")


def test_counts_that_lie(target, pristine, tmp_path):
    m = members_of(pristine)
    manifest = json.loads(m["manifest.json"])
    manifest["counts"]["pages"] += 1
    m["manifest.json"] = json.dumps(manifest).encode()
    refused(target, write_cube(tmp_path / "x.mnemocube", m, fix=False), "the manifest counts")
