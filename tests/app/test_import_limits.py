"""A zip import cannot expand into all of memory: a real zip bomb is refused from its header, with
memory bounded; a member too big, or lying about its size, is refused while it is read; a member's
name is never a path."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from app.cli import main
from app.importers import ImportFatalError, load
from app.importers.reading import MAX_UNZIPPED_BYTES, MAX_ZIP_RATIO, read_bytes

FIXTURES = Path(__file__).parent / "fixtures"
MiB = 1024**2


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB".replace(".0 ", " ")


def _padded_export(path: Path, padding: int, *, member: str = "conversations.json") -> zipfile.ZipInfo:
    """A real ChatGPT export whose JSON is followed by `padding` spaces (still valid JSON), written in
    chunks so the test itself never holds it: deflate packs the spaces about 1,000 to 1."""
    raw = (FIXTURES / "chatgpt_conversations.json").read_bytes()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open(member, "w", force_zip64=True) as out:
            out.write(raw)
            block = b" " * MiB
            for _ in range(padding // MiB):
                out.write(block)
    with zipfile.ZipFile(path) as zf:
        return zf.getinfo(member)


def _refusal_and_peak(path: Path) -> tuple[str, int]:
    """The one line `load(path)` refuses the file with, and the most memory Python held meanwhile."""
    tracemalloc.start()
    try:
        with pytest.raises(ImportFatalError) as exc:
            load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return str(exc.value), peak


def test_a_zip_bomb_is_refused_from_its_header_with_memory_bounded(tmp_path, mnemo_dirs, capsys):
    bomb = tmp_path / "export.zip"
    info = _padded_export(bomb, 200 * MiB)
    assert bomb.stat().st_size < MiB and info.file_size > 200 * MiB  # a few hundred KB that would be 200 MB
    expected = (
        f"export.zip/conversations.json: refused as a likely zip bomb: {_kib(info.compress_size)} that expands to "
        f"200 MiB ({info.file_size / info.compress_size:,.0f} to 1, over the limit of 100 to 1)"
    )
    error, peak = _refusal_and_peak(bomb)
    assert error == expected
    assert peak < 4 * MiB  # nothing was inflated (the finding: an 815 KB zip took 1.69 GB)
    # the same one line from `mnemo ingest`, exit 2, and no memory opened
    assert main(["ingest", str(bomb), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"mnemo ingest: error: {expected}\n"
    assert not (mnemo_dirs["data"] / "mnemo.sqlite3").exists()


def test_a_member_over_the_size_limit_is_refused(tmp_path):
    """A real export's ratio (a few to 1) but too big: refused at the limit, with the way round it."""
    big = tmp_path / "big.zip"
    raw = (FIXTURES / "chatgpt_conversations.json").read_bytes()
    with zipfile.ZipFile(big, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("chatgpt-export/conversations.json", raw * 200)  # 2.5 MiB, about 30 to 1
    with pytest.raises(ImportFatalError) as exc:
        read_bytes(big, max_unzipped=2 * MiB)
    assert str(exc.value) == (
        "big.zip/chatgpt-export/conversations.json: too large to import from a zip: it expands to 2.5 MiB, "
        "over the 2 MiB limit; unzip it and import the .json file itself"
    )
    data, name = read_bytes(big, max_unzipped=3 * MiB)  # within the limit: read whole
    assert name == "big.zip/chatgpt-export/conversations.json" and data == raw * 200
    # the defaults leave room for the biggest real exports, and refuse what only a bomb reaches
    assert MAX_UNZIPPED_BYTES == 512 * MiB and MAX_ZIP_RATIO == 100


def test_a_member_lying_about_its_size_is_stopped_while_read(tmp_path):
    """A header that says 1 MiB where the data inflates to 64 MiB: read in steps, no more than the
    header says is inflated, and the CRC then tells the member is damaged."""
    liar = tmp_path / "liar.zip"
    with zipfile.ZipFile(liar, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("conversations.json", "w") as out:
            for _ in range(64):
                out.write(b" " * MiB)
    blob = bytearray(liar.read_bytes())
    central = blob.rindex(b"PK\x01\x02")  # the central directory entry, whose sizes zipfile trusts
    assert int.from_bytes(blob[central + 24 : central + 28], "little") == 64 * MiB
    blob[central + 24 : central + 28] = MiB.to_bytes(4, "little")  # the uncompressed size: 1 MiB
    liar.write_bytes(bytes(blob))
    error, peak = _refusal_and_peak(liar)
    assert error == "liar.zip: damaged zip file (Bad CRC-32 for file 'conversations.json')"
    assert peak < 8 * MiB  # one read of it all would inflate the whole 64 MiB (and more) at once


def test_member_names_are_never_paths(tmp_path):
    """A member called ../../conversations.json is read in place; nothing is written anywhere, and its
    odd characters are not printed as they are."""
    inner = tmp_path / "inner"
    inner.mkdir()
    export = inner / "export.zip"
    raw = (FIXTURES / "chatgpt_conversations.json").read_bytes()
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr("../../conversations.json", raw)
    before = sorted(tmp_path.rglob("*"))
    result = load(export)
    assert result.format == "chatgpt" and len(result.conversations) == 3
    assert sorted(tmp_path.rglob("*")) == before
    with zipfile.ZipFile(export, "w") as zf:
        zf.writestr("x\n\x1b[31m/conversations.json", json.dumps({"not": "an export"}))
    with pytest.raises(ImportFatalError) as exc:
        load(export)
    assert str(exc.value).startswith("export.zip/x??[31m/conversations.json: unrecognised JSON")
