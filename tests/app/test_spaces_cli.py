"""`mnemo memory spaces …` and `--space` on cube export and import, through the real CLI (a process
each, real embedder, real memory files)."""

from __future__ import annotations

import json

from tests.app.test_cube_cli import mnemo, open_profile, profile
from tests.memory_core.conftest import Clock

ROWS = [
    ("I adopted a golden retriever puppy named Biscuit.", "Congratulations, Biscuit sounds sweet."),
    ("The quarterly report for the Porto client is due Friday.", "Good luck finishing it."),
]


def test_spaces_commands_and_a_space_as_a_cube(tmp_path):
    src = profile(tmp_path, "source")
    s = open_profile(src)
    try:
        clock = Clock()
        home = s.conversations.create_conversation("home")
        office = s.conversations.create_conversation("office")
        for cid, (u, a) in zip((home, office), ROWS):
            clock.advance(60)
            s.intake.add_page(cid, u, a)
    finally:
        s.close()
    assert "space 2 'Work' created" in mnemo(src, "memory", "spaces", "create", "Work").stdout
    out = mnemo(src, "memory", "spaces", "create", "work", check=False)
    assert out.returncode == 2 and "exists already" in out.stderr and "Traceback" not in out.stderr
    out = mnemo(src, "memory", "spaces", "chat", str(office), "Work", "--read", "all").stdout
    assert "writes to 'Work' and reads every space" in out
    assert (
        "1 pages moved to 'Work'" in mnemo(src, "memory", "spaces", "move", "chat", str(office), "--to", "Work").stdout
    )
    out = mnemo(src, "memory", "spaces", "copy", "page", "2", "--to", "Personal").stdout
    assert "1 pages copied to 'Personal' (new ids 3)" in out
    out = mnemo(src, "memory", "spaces", "copy", "knowledge", "99", "--to", "Nope", check=False)
    assert out.returncode == 2 and "no space named 'Nope'" in out.stderr
    listing = mnemo(src, "memory", "spaces", "list").stdout
    assert "Personal                       2 pages" in listing
    assert "Personal" in listing and "Work" in listing
    cube = tmp_path / "work.mnemocube"
    out = mnemo(src, "memory", "export", "--cube", str(cube), "--space", "Work").stdout
    assert "1 pages" in out or "1 page" in out
    out = mnemo(src, "memory", "export", "--cube", str(tmp_path / "x.mnemocube"), "--space", "Nope", check=False)
    assert out.returncode == 2 and "no space named 'Nope'" in out.stderr

    dst = profile(tmp_path, "target")
    mnemo(dst, "memory", "import", str(cube), "--space", "Imported work")
    d = open_profile(dst)
    try:
        by_name = {sp.name: sp.pages for sp in d.spaces.list()}
        assert by_name == {"Personal": 0, "Imported work": 1}
        [page] = d.pages.list_pages(limit=5)
        assert "Porto" in page.user_text and d.spaces.name_of(page.space_id) == "Imported work"
    finally:
        d.close()
    merged = mnemo(dst, "memory", "spaces", "merge", "Imported work", "Personal").stdout
    assert merged.strip() == "“Imported work” merged into “Personal”: 1 page moved."
    out = mnemo(dst, "memory", "spaces", "delete", "Personal", check=False)
    assert out.returncode == 2 and "last space" in out.stderr


def test_merge_fuses_facts_and_says_so(tmp_path):
    dirs = profile(tmp_path, "fuse")
    s = open_profile(dirs)
    try:
        work = s.spaces.create("Work")
        porto = s.persona.add_knowledge("user", "The user lives in Porto.")
        pinned = s.persona.add_knowledge("user", "The user's manager is Ana.", pinned=True)
        with s.transaction():  # said a day before what Work holds
            s.db.execute("UPDATE knowledge SET updated_at = updated_at - 86400")
        s.persona.add_knowledge("user", "The user lives in Lyon now.", space_id=work)
        s.persona.add_knowledge("user", "The user's manager is Rui now.", space_id=work)
    finally:
        s.close()
    plan = mnemo(dirs, "memory", "spaces", "merge", "Work", "Personal", "--dry-run").stdout
    assert plan.strip() == (
        "Merging “Work” into “Personal” would move 1 fact. Newer, would update what “Personal” holds (the older "
        "text stays a version): 1 fact. Against a pinned item, would be left beside it: “The user's manager is "
        "Rui now” (pinned: “The user's manager is Ana”)."
    )
    counts = json.loads(mnemo(dirs, "memory", "spaces", "merge", "Work", "Personal", "--dry-run", "--json").stdout)
    assert counts["dry_run"] and counts["facts"]["updated"] == 1 and counts["facts"]["pinned"] == 1
    assert [c["held_id"] for c in counts["conflicts"]] == [pinned]
    done = mnemo(dirs, "memory", "spaces", "merge", "Work", "Personal").stdout
    assert done.startswith("“Work” merged into “Personal”: 1 fact moved. Newer, updated what “Personal” holds")
    s = open_profile(dirs)
    try:
        assert s.persona.get_knowledge(porto).text == "The user lives in Lyon now."
        assert [v.text for v in s.persona.item_versions("knowledge", porto)][0] == "The user lives in Porto."
        assert sorted(k.text for k in s.persona.list_knowledge(limit=10)) == [
            "The user lives in Lyon now.",
            "The user's manager is Ana.",
            "The user's manager is Rui now.",
        ]
        assert s.check_integrity() == []
    finally:
        s.close()
