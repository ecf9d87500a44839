"""`mnemo memory export --cube`, `import [--dry-run]`, `imports` and `undo-import` through the real CLI (a
process each, real embedder, real memory files): what a user at a terminal does to move memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.context import AppContext
from tests.memory_core.conftest import Clock
from tests.memory_core.cubes_support import build_memory, persona_text


def mnemo(dirs, *args, check=True):
    env = dict(
        os.environ, MNEMO_DATA_DIR=str(dirs["data"]), MNEMO_CONFIG_DIR=str(dirs["config"]), QT_QPA_PLATFORM="offscreen"
    )
    out = subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def profile(root: Path, name: str) -> dict[str, Path]:
    dirs = {"data": root / name / "data", "config": root / name / "config"}
    dirs["config"].mkdir(parents=True)
    (dirs["config"] / "settings.json").write_text(json.dumps({"memory": {"stm_capacity": 3}}))
    return dirs


def open_profile(dirs):
    return AppContext.create(config_dir=dirs["config"], data_dir=dirs["data"]).open_store()


@pytest.fixture
def source(tmp_path):
    dirs = profile(tmp_path, "source")
    s = open_profile(dirs)
    try:
        build_memory(s, Clock())
        expected = persona_text(s), s.pages.count_pages()
    finally:
        s.close()
    return dirs, expected


def test_export_import_twice_list_and_undo(source, tmp_path):
    src, (src_persona, src_pages) = source
    cube = tmp_path / "all.mnemocube"
    out = mnemo(src, "memory", "export", "--cube", str(cube)).stdout
    assert f"exported the whole memory as a memory cube: {src_pages} pages" in out and "with vectors" in out
    assert zipfile.is_zipfile(cube)

    dst = profile(tmp_path, "target")
    dry = mnemo(dst, "memory", "import", str(cube), "--dry-run").stdout
    assert f"pages: {src_pages} to add" in dry and "nothing was imported" in dry
    plan = json.loads(mnemo(dst, "memory", "import", str(cube), "--dry-run", "--json").stdout)
    assert plan["would"]["pages"] == {"added": src_pages}

    first = mnemo(dst, "memory", "import", str(cube)).stdout
    assert "import    1" in first and f"{src_pages} pages" in first
    second = mnemo(dst, "memory", "import", str(cube), "--json").stdout
    assert json.loads(second)["counts"]["pages"] == {"present": src_pages}  # nothing added the second time
    s = open_profile(dst)
    try:
        assert persona_text(s) == src_persona and s.pages.count_pages() == src_pages
    finally:
        s.close()

    listed = mnemo(dst, "memory", "imports").stdout.splitlines()
    assert len(listed) == 2 and "all.mnemocube" in listed[0]
    undone = mnemo(dst, "memory", "undo-import", "1").stdout
    assert f"import 1 undone: {src_pages} pages" in undone
    again = mnemo(dst, "memory", "undo-import", "1", check=False)
    assert again.returncode == 1 and "was undone already" in again.stderr
    s = open_profile(dst)
    try:
        assert s.pages.count_pages() == 0 and persona_text(s) == []
    finally:
        s.close()


def test_what_goes_into_a_cube(source, tmp_path):
    src, (src_persona, _) = source
    persona = tmp_path / "persona.mnemocube"
    out = mnemo(src, "memory", "export", "--cube", str(persona), "--persona-only").stdout
    assert "exported the persona as a memory cube: 0 pages" in out
    span = tmp_path / "span.mnemocube"
    out = mnemo(src, "memory", "export", "--cube", str(span), "--since", "2000-01-01", "--until", "2001-12-31").stdout
    assert "a span of time as a memory cube: 0 pages" in out
    bad = mnemo(src, "memory", "export", "--cube", str(tmp_path / "x.mnemocube"), "--chat", "999", check=False)
    assert bad.returncode == 1 and "no chat 999" in bad.stderr and not (tmp_path / "x.mnemocube").exists()
    wrong = mnemo(src, "memory", "export", str(tmp_path / "x.json"), "--persona-only", check=False)
    assert wrong.returncode == 2 and "add --cube FILE" in wrong.stderr
    date = mnemo(src, "memory", "export", "--cube", str(tmp_path / "y.mnemocube"), "--since", "May", check=False)
    assert date.returncode == 2 and "not a date" in date.stderr

    dst = profile(tmp_path, "target")
    mnemo(dst, "memory", "import", str(persona))
    s = open_profile(dst)
    try:
        assert s.pages.count_pages() == 0 and persona_text(s) == src_persona
    finally:
        s.close()


def test_a_hostile_cube_is_one_line_and_changes_nothing(source, tmp_path):
    dst = profile(tmp_path, "target")
    bomb = tmp_path / "bomb.mnemocube"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps({"format": "mnemo-memcube", "format_version": 1}))
        zf.writestr("pages.jsonl", b"\x00" * (8 * 1024**2))
    out = mnemo(dst, "memory", "import", str(bomb), check=False)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert "refused as a likely zip bomb" in out.stderr and "memory was not changed" in out.stderr
    newer = tmp_path / "newer.mnemocube"
    with zipfile.ZipFile(newer, "w") as zf:
        zf.writestr("manifest.json", json.dumps({"format": "mnemo-memcube", "format_version": 7}))
    out = mnemo(dst, "memory", "import", str(newer), check=False)
    assert out.returncode == 1 and "made by a newer Mnemo (cube format 7" in out.stderr
    assert "no memory cube was imported" in mnemo(dst, "memory", "imports").stdout


def test_show_says_where_an_item_came_from(source, tmp_path):
    src, _ = source
    cube = tmp_path / "all.mnemocube"
    mnemo(src, "memory", "export", "--cube", str(cube))
    dst = profile(tmp_path, "target")
    mnemo(dst, "memory", "import", str(cube))
    page = json.loads(mnemo(dst, "memory", "list", "page", "--limit", "1", "--json").stdout)[0]
    shown = json.loads(mnemo(dst, "memory", "show", "page", str(page["id"]), "--json").stdout)
    assert shown["imported"].startswith("imported from memory cube all.mnemocube")
