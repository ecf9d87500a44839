"""Backups of the memory database: the online copy, the daily rotation, restore (the current file
kept aside), and the CLI around them. Real store files, real embedder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from app.operations import backups
from app.settings import Paths
from memory_core import MemoryStore


def _open(path, embedder):
    return MemoryStore.open(path, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)


def test_a_backup_is_a_complete_database_even_while_another_connection_writes(tmp_path, embedder):
    s = _open(tmp_path / "mnemo.sqlite3", embedder)
    other = _open(tmp_path / "mnemo.sqlite3", embedder)
    try:
        cid = s.conversations.create_conversation()
        s.intake.add_pages(
            cid, [{"user_text": f"I planted tree number {i}.", "assistant_text": "Nice."} for i in range(400)]
        )
        progress = []

        def write_meanwhile(done, total):
            progress.append((done, total))
            if len(progress) == 1:
                other.intake.add_page(cid, "Written during the backup.", "Ok.")

        copy = s.backup(tmp_path / "copy.sqlite3", pages_per_step=8, on_progress=write_meanwhile)
        assert len(progress) > 2 and progress[-1][0] == progress[-1][1]
        assert not list(tmp_path.glob(".copy.sqlite3.partial"))
    finally:
        s.close()
        other.close()
    c = _open(copy, embedder)
    try:
        assert c.pages.count_pages() in (400, 401)  # before or after the concurrent write, never torn
        assert c.check_integrity() == [] and c.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert any("tree number 7." in p.text for p in c.pages.list_pages(limit=1000, text="tree number 7."))
    finally:
        c.close()


def test_daily_rotation_keeps_the_newest(tmp_path, embedder):
    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    try:
        day = 86_400.0
        t0 = time.time() - 10 * day
        first = backups.maybe_backup(s, paths, now=t0)
        assert first is not None and backups.list_backups(paths) == [first]
        os.utime(first, (t0, t0))
        assert backups.maybe_backup(s, paths, now=t0 + 3600) is None  # not due yet
        second = backups.maybe_backup(s, paths, now=t0 + day)
        os.utime(second, (t0 + day, t0 + day))
        third = backups.maybe_backup(s, paths, now=t0 + 2 * day)
        assert backups.list_backups(paths) == [third, second]  # keep 2, newest first
        assert backups.maybe_backup(s, paths, keep=0, now=t0 + 9 * day) is None
    finally:
        s.close()


def test_restore_puts_the_backup_back_and_keeps_the_current_file_aside(tmp_path, embedder):
    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    cid = s.conversations.create_conversation()
    s.intake.add_page(cid, "My bike is red.", "Noted.")
    saved = backups.make_backup(s, paths)
    s.intake.add_page(cid, "My bike is now blue.", "Noted.")
    s.close()
    paths.db_file.write_bytes(b"damaged" * 1000)  # the file is ruined afterwards
    aside = backups.restore(paths, saved)
    assert aside.read_bytes() == b"damaged" * 1000
    r = _open(paths.db_file, embedder)
    try:
        assert [p.user_text for p in r.pages.list_pages(limit=10)] == ["My bike is red."]
    finally:
        r.close()


def test_restore_refuses_a_file_that_is_not_a_sound_mnemo_memory_and_changes_nothing(tmp_path, embedder):
    import apsw
    import pytest

    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    s.intake.add_page(s.conversations.create_conversation(), "My bike is red.", "Noted.")
    good = backups.make_backup(s, paths)
    s.close()
    before = paths.db_file.read_bytes()
    other = tmp_path / "other.db"  # a SQLite database, but someone else's
    c = apsw.Connection(str(other))
    c.execute("CREATE TABLE notes(x)")
    c.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all")
    damaged = tmp_path / "damaged.sqlite3"  # a real backup with pages overwritten
    raw = bytearray(good.read_bytes())
    for i in range(4096, len(raw) - 4096, 3001):
        raw[i] ^= 0x5A
    damaged.write_bytes(bytes(raw))
    for bad, why in (
        (other, "not a Mnemo memory database"),
        (text, "not a Mnemo memory database"),
        (damaged, "damaged"),
    ):
        with pytest.raises(backups.UnusableBackupError, match=why):
            backups.restore(paths, bad)
        assert paths.db_file.read_bytes() == before
        assert not [p for p in paths.data_dir.iterdir() if "before-restore" in p.name or "restoring" in p.name]
    backups.check(good)  # the real backup passes, and is not modified
    assert sorted(p.name for p in good.parent.iterdir()) == [good.name]


def test_restore_drops_this_processs_cached_vectors_of_the_replaced_file(tmp_path, embedder):
    # The window restores in-process and reopens the same path; the page-vector cache is shared per
    # path and syncs from the file's change log, which a different file can continue seamlessly.
    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    s.intake.add_page(s.conversations.create_conversation(), "My bike is blue.", "Noted.")
    assert len(s.retrieve("bike", record_visits=False).pages) == 1  # the cache holds it
    s.close()
    other = _open(tmp_path / "other" / "mnemo.sqlite3", embedder)  # another profile's memory
    cid = other.conversations.create_conversation()
    for text in ("I keep bees in the garden.", "My cat is called Tom.", "I drink green tea."):
        other.intake.add_page(cid, text, "Lovely.")
    copy = other.backup(tmp_path / "other-copy.sqlite3")
    other.close()
    backups.restore(paths, copy)
    r = _open(paths.db_file, embedder)
    try:
        hits = r.retrieve("My bike is blue.", record_visits=False).pages
        got = sorted(h.page.user_text for h in hits)
        assert got == ["I drink green tea.", "I keep bees in the garden.", "My cat is called Tom."]
        # page 1 is now the bees page: a stale cached vector (the bike page's) would score ~1.0 here
        cos = [float(re.search(r"cos (-?[\d.]+)", h.reason).group(1)) for h in hits]
        assert max(cos) < 0.6, [(h.page.user_text, c) for h, c in zip(hits, cos)]
    finally:
        r.close()


def test_a_backup_is_dated_by_its_name_which_survives_copying(tmp_path):
    named = tmp_path / "mnemo-20260102-030405.sqlite3"
    other = tmp_path / "my-copy.sqlite3"
    for p in (named, other):
        p.write_bytes(b"x")
        os.utime(p, (0, time.mktime((2025, 5, 6, 7, 8, 0, 0, 0, -1))))
    assert backups.made_at(named) == "2026-01-02 03:04"
    assert backups.made_at(other) == "2025-05-06 07:08"


def _mnemo(dirs, *args):
    env = dict(
        os.environ, MNEMO_DATA_DIR=str(dirs["data"]), MNEMO_CONFIG_DIR=str(dirs["config"]), QT_QPA_PLATFORM="offscreen"
    )
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, timeout=300)


def test_cli_backup_list_damage_and_restore(mnemo_dirs, embedder):
    s = _open(mnemo_dirs["data"] / "mnemo.sqlite3", embedder)
    s.intake.add_page(s.conversations.create_conversation(), "I keep bees in the garden.", "Lovely.")
    s.close()
    out = _mnemo(mnemo_dirs, "memory", "backup")
    assert out.returncode == 0 and "memory backed up to" in out.stdout, out.stderr
    listed = json.loads(_mnemo(mnemo_dirs, "memory", "backups", "--json").stdout)
    assert len(listed) == 1 and listed[0]["bytes"] > 0
    (mnemo_dirs["data"] / "mnemo.sqlite3").write_bytes(b"\x00garbage" * 2000)
    for extra in ("-wal", "-shm"):
        (mnemo_dirs["data"] / f"mnemo.sqlite3{extra}").unlink(missing_ok=True)
    broken = _mnemo(mnemo_dirs, "memory", "stats")
    assert broken.returncode == 1 and "mnemo memory restore" in broken.stderr
    refused = _mnemo(mnemo_dirs, "memory", "restore", listed[0]["path"])  # no --yes, no terminal
    assert refused.returncode != 0 and "--yes" in refused.stderr
    junk = mnemo_dirs["data"] / "notes.txt"
    junk.write_text("not a memory")
    wrong = _mnemo(mnemo_dirs, "memory", "restore", str(junk), "--yes")
    assert wrong.returncode == 1 and "not restored" in wrong.stderr and "not a Mnemo memory" in wrong.stderr
    assert (mnemo_dirs["data"] / "mnemo.sqlite3").read_bytes() == b"\x00garbage" * 2000
    done = _mnemo(mnemo_dirs, "memory", "restore", listed[0]["path"], "--yes")
    assert done.returncode == 0 and "kept as" in done.stdout, done.stderr
    stats = json.loads(_mnemo(mnemo_dirs, "memory", "stats", "--json").stdout)
    assert stats["pages_total"] == 1 and stats["conversations"] == 1


def test_a_cancelled_backup_leaves_nothing_and_stale_partials_are_swept(tmp_path, embedder):
    import pytest

    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    try:
        s.intake.add_pages(
            s.conversations.create_conversation(),
            [{"user_text": f"line {i}", "assistant_text": "ok"} for i in range(300)],
        )
        steps = []
        with pytest.raises(InterruptedError):  # cancelled between steps, here after the second
            s.backup(
                backups.backup_dir(paths) / "x.sqlite3",
                pages_per_step=4,
                cancelled=lambda: len(steps) >= 2,
                on_progress=lambda done, total: steps.append(done),
            )
        assert len(steps) == 2
        with pytest.raises(InterruptedError):
            backups.make_backup(s, paths, cancelled=lambda: True)
        assert backups.list_backups(paths) == [] and list(backups.backup_dir(paths).iterdir()) == []
        (backups.backup_dir(paths) / ".mnemo-20260101-000000.sqlite3.partial").write_bytes(b"half")
        made = backups.make_backup(s, paths)
        assert [p.name for p in backups.backup_dir(paths).iterdir()] == [made.name]
    finally:
        s.close()


def test_backups_are_the_users_alone(tmp_path, embedder):
    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    try:
        made = backups.make_backup(s, paths)
    finally:
        s.close()
    assert os.stat(made).st_mode & 0o777 == 0o600
    aside = backups.restore(paths, made)
    assert os.stat(paths.db_file).st_mode & 0o777 == 0o600 and aside.exists()


def test_the_backups_made_while_forgotten_memory_existed_are_named_and_dropped(tmp_path, embedder):
    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    try:
        old = backups.make_backup(s, paths, now=time.time() - 7200)
        t = time.time() - 3600
        os.utime(old, (t, t))  # made an hour ago: before the fact below existed
        kid = s.persona.add_knowledge("user", "My locker code is 4312.")
        holds = backups.make_backup(s, paths, now=time.time() - 60)
        assert backups.holding_forgotten(paths, s.db.purge.spans()) == []
        s.curation.forget("knowledge", kid)
        assert backups.holding_forgotten(paths, s.db.purge.spans()) == [holds]
        assert b"4312" in holds.read_bytes() and b"4312" not in old.read_bytes()
        gone, fresh = backups.drop_forgotten(s, paths, keep=2)
        assert gone == [holds] and not holds.exists() and fresh is not None and b"4312" not in fresh.read_bytes()
        assert backups.list_backups(paths) == [fresh, old]
        assert backups.holding_forgotten(paths, s.db.purge.spans()) == []
        # with backups off (keep 0) the ones that hold it go, and none is made
        kid = s.persona.add_knowledge("user", "My bike lock code is 9876.")
        later = backups.make_backup(s, paths, now=time.time() + 60)
        s.curation.forget("knowledge", kid)
        assert backups.drop_forgotten(s, paths, keep=0) == ([later], None) and not later.exists()
    finally:
        s.close()


def test_cli_names_the_backups_that_hold_what_was_forgotten_and_drops_them(mnemo_dirs, embedder, capsys):
    from app.cli import main as cli

    paths = Paths.resolve()
    s = _open(paths.db_file, embedder)
    try:
        kid = s.persona.add_knowledge("user", "My locker code is 4312.")
        made = backups.make_backup(s, paths, now=time.time() - 60)
    finally:
        s.close()
    assert cli(["memory", "forget", "knowledge", str(kid)]) == 0
    out = capsys.readouterr().out
    assert "1 backup (of " in out and "may still hold what was forgotten" in out, out
    assert "mnemo memory backups --drop-forgotten" in out
    assert cli(["memory", "backups"]) == 0
    listed = capsys.readouterr().out
    assert f"{made}  (may hold forgotten memory)" in listed, listed
    assert cli(["memory", "backups", "--drop-forgotten"]) == 0
    assert capsys.readouterr().out.startswith("deleted 1 backup")
    assert not made.exists() and len(backups.list_backups(paths)) == 1
    assert cli(["memory", "backups", "--json"]) == 0
    assert [r["holds_forgotten"] for r in json.loads(capsys.readouterr().out)] == [False]
