"""Backups of the memory database: the online copy, the daily rotation, restore (the current file
kept aside), and the CLI around them. Real store files, real embedder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from app import backups
from app.settings import Paths
from memory_core import MemoryStore


def _open(path, embedder):
    return MemoryStore.open(path, embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim)


def test_a_backup_is_a_complete_database_even_while_another_connection_writes(tmp_path, embedder):
    s = _open(tmp_path / "mnemo.sqlite3", embedder)
    other = _open(tmp_path / "mnemo.sqlite3", embedder)
    try:
        cid = s.create_conversation()
        s.add_pages(cid, [{"user_text": f"I planted tree number {i}.", "assistant_text": "Nice."} for i in range(400)])
        progress = []

        def write_meanwhile(done, total):
            progress.append((done, total))
            if len(progress) == 1:
                other.add_page(cid, "Written during the backup.", "Ok.")

        copy = s.backup(tmp_path / "copy.sqlite3", pages_per_step=8, on_progress=write_meanwhile)
        assert len(progress) > 2 and progress[-1][0] == progress[-1][1]
        assert not list(tmp_path.glob(".copy.sqlite3.partial"))
    finally:
        s.close()
        other.close()
    c = _open(copy, embedder)
    try:
        assert c.count_pages() in (400, 401)       # before or after the concurrent write, never torn
        assert c.check_integrity() == [] and c._x("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert any("tree number 7." in p.text for p in c.list_pages(limit=1000, text="tree number 7."))
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
        assert backups.maybe_backup(s, paths, now=t0 + 3600) is None        # not due yet
        second = backups.maybe_backup(s, paths, now=t0 + day)
        os.utime(second, (t0 + day, t0 + day))
        third = backups.maybe_backup(s, paths, now=t0 + 2 * day)
        assert backups.list_backups(paths) == [third, second]               # keep 2, newest first
        assert backups.maybe_backup(s, paths, keep=0, now=t0 + 9 * day) is None
    finally:
        s.close()


def test_restore_puts_the_backup_back_and_keeps_the_current_file_aside(tmp_path, embedder):
    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    cid = s.create_conversation()
    s.add_page(cid, "My bike is red.", "Noted.")
    saved = backups.make_backup(s, paths)
    s.add_page(cid, "My bike is now blue.", "Noted.")
    s.close()
    paths.db_file.write_bytes(b"damaged" * 1000)               # the file is ruined afterwards
    aside = backups.restore(paths, saved)
    assert aside.read_bytes() == b"damaged" * 1000
    r = _open(paths.db_file, embedder)
    try:
        assert [p.user_text for p in r.list_pages(limit=10)] == ["My bike is red."]
    finally:
        r.close()


def _mnemo(dirs, *args):
    env = dict(os.environ, MNEMO_DATA_DIR=str(dirs["data"]), MNEMO_CONFIG_DIR=str(dirs["config"]),
               QT_QPA_PLATFORM="offscreen")
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_cli_backup_list_damage_and_restore(mnemo_dirs, embedder):
    s = _open(mnemo_dirs["data"] / "mnemo.sqlite3", embedder)
    s.add_page(s.create_conversation(), "I keep bees in the garden.", "Lovely.")
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
    refused = _mnemo(mnemo_dirs, "memory", "restore", listed[0]["path"])     # no --yes, no terminal
    assert refused.returncode != 0 and "--yes" in refused.stderr
    done = _mnemo(mnemo_dirs, "memory", "restore", listed[0]["path"], "--yes")
    assert done.returncode == 0 and "kept as" in done.stdout, done.stderr
    stats = json.loads(_mnemo(mnemo_dirs, "memory", "stats", "--json").stdout)
    assert stats["pages_total"] == 1 and stats["conversations"] == 1


def test_a_cancelled_backup_leaves_nothing_and_stale_partials_are_swept(tmp_path, embedder):
    import pytest

    paths = Paths(tmp_path / "config", tmp_path / "data")
    s = _open(paths.db_file, embedder)
    try:
        s.add_pages(s.create_conversation(), [{"user_text": f"line {i}", "assistant_text": "ok"} for i in range(300)])
        steps = []
        with pytest.raises(InterruptedError):        # cancelled between steps, here after the second
            s.backup(backups.backup_dir(paths) / "x.sqlite3", pages_per_step=4,
                     cancelled=lambda: len(steps) >= 2, on_progress=lambda done, total: steps.append(done))
        assert len(steps) == 2
        with pytest.raises(InterruptedError):
            backups.make_backup(s, paths, cancelled=lambda: True)
        assert backups.list_backups(paths) == [] and list(backups.backup_dir(paths).iterdir()) == []
        (backups.backup_dir(paths) / ".mnemo-20260101-000000.sqlite3.partial").write_bytes(b"half")
        made = backups.make_backup(s, paths)
        assert [p.name for p in backups.backup_dir(paths).iterdir()] == [made.name]
    finally:
        s.close()
