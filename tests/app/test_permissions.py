"""Mnemo's folders and files are its user's alone (0700 folders, 0600 files), whatever the umask:
made so, and an older Mnemo's 0755/0644 ones tightened at the next start."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from app.context import AppContext
from app.operations.backups import backup_dir, make_backup
from app.operations.chat_export import export_chat
from app.private_files import ensure_private_dir, secure_folder
from app.runtime.instance_lock import InstanceLock
from app.settings import Paths, Settings, save_settings

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def open_umask():
    """The usual desktop umask, which alone would give 0755 folders and 0644 files."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_first_start_makes_both_folders_owner_only(mnemo_dirs):
    ctx = AppContext.create()
    assert mode(mnemo_dirs["data"]) == 0o700 and mode(mnemo_dirs["config"]) == 0o700
    ctx.save()
    assert mode(ctx.paths.settings_file) == 0o600


def test_a_start_tightens_what_an_older_mnemo_left_open(mnemo_dirs):
    data, config = mnemo_dirs["data"], mnemo_dirs["config"]
    backups = backup_dir(Paths(config, data))
    backups.mkdir(parents=True)
    config.mkdir()
    for folder in (data, backups, config):
        folder.chmod(0o755)
    (data / "mnemo.lock").write_text("")
    (config / "settings.json").write_text("{}")
    for f in (data / "mnemo.lock", config / "settings.json"):
        f.chmod(0o644)
    (data / "notes of mine").mkdir(mode=0o755)  # not Mnemo's: left alone
    AppContext.create()
    assert [mode(p) for p in (data, backups, config)] == [0o700] * 3
    assert mode(data / "mnemo.lock") == 0o600 and mode(config / "settings.json") == 0o600
    assert mode(data / "notes of mine") == 0o755


def test_a_read_only_folder_stays_read_only_and_start_does_not_fail(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    secure_folder(folder)
    assert mode(folder) == 0o500  # others lose their access; the owner's stays what it was
    secure_folder(tmp_path / "ro" / "cannot" / "be made")  # best effort, never fatal
    folder.chmod(0o700)


def test_folders_made_later_are_owner_only(tmp_path):
    made = ensure_private_dir(tmp_path / "a" / "b")
    assert mode(made) == 0o700
    paths = Paths(tmp_path / "cfg" / "Mnemo", tmp_path / "data")
    save_settings(paths, Settings())  # the config folder did not exist
    assert mode(paths.config_dir) == 0o700 and mode(paths.settings_file) == 0o600


def test_the_instance_lock_is_owner_only(tmp_path):
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    (old / "mnemo.lock").write_text("")
    (old / "mnemo.lock").chmod(0o644)
    for folder in (tmp_path / "new", old):
        lock = InstanceLock(folder)
        assert lock.acquire()
        try:
            assert mode(folder / "mnemo.lock") == 0o600
            assert InstanceLock(folder).acquire() is False  # still a lock
        finally:
            lock.release()
    assert mode(tmp_path / "new") == 0o700


def test_exports_and_the_backups_folder_are_owner_only(store, tmp_path):
    cid = store.conversations.create_conversation("Private")
    store.conversations.add_message(cid, "user", "My PIN is not for others.")
    for name in ("chat.md", "chat.json"):
        assert mode(export_chat(store, cid, tmp_path / name).path) == 0o600
    (tmp_path / "old.md").write_text("an earlier export")
    (tmp_path / "old.md").chmod(0o644)
    assert mode(export_chat(store, cid, tmp_path / "old.md").path) == 0o600  # replaced, not reused
    for name in ("memory.json", "memory.md"):
        assert mode(Path(store.export(tmp_path / name).path)) == 0o600
    paths = Paths(tmp_path / "config", tmp_path / "data")
    make_backup(store, paths)
    assert mode(backup_dir(paths)) == 0o700
