"""Starting Mnemo again on the same memory brings the running window forward (real local sockets,
real processes); another data folder runs beside it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ui.single_instance import InstanceServer, ask_running_instance, server_name


def test_a_second_start_on_the_same_folder_activates_the_first(qtbot, tmp_path):
    server = InstanceServer(tmp_path / "memory")
    assert server.listening
    try:
        with qtbot.waitSignal(server.activated, timeout=5_000):
            assert ask_running_instance(tmp_path / "memory") is True
        assert ask_running_instance(tmp_path / "another memory") is False
        assert server_name(tmp_path / "memory") != server_name(tmp_path / "another memory")
    finally:
        server.close()
        server.deleteLater()


def test_a_second_process_exits_and_the_first_keeps_running(qtbot, tmp_path):
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        MNEMO_DATA_DIR=str(tmp_path / "data"),
        MNEMO_CONFIG_DIR=str(tmp_path / "config"),
    )
    first = subprocess.Popen(
        [sys.executable, "-m", "ui.launcher"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not ask_running_instance(tmp_path / "data"):  # wait until the first one listens
            assert first.poll() is None, first.stdout.read()
            assert time.monotonic() < deadline, "the first instance never started listening"
            time.sleep(0.2)
        second = subprocess.run(
            [sys.executable, "-m", "ui.launcher"], env=env, capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 0 and "already running" in second.stdout, second.stdout + second.stderr
        assert first.poll() is None  # the first window is still there
        # while it runs, a backup can be made (online) but not restored (that swaps the file)
        made = subprocess.run(
            [sys.executable, "-m", "app", "memory", "backup"], env=env, capture_output=True, text=True, timeout=120
        )
        assert made.returncode == 0, made.stderr
        backup = made.stdout.split("memory backed up to ")[1].split(" (")[0]
        refused = subprocess.run(
            [sys.executable, "-m", "app", "memory", "restore", backup, "--yes"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 1 and "close its window first" in refused.stderr
        # another memory (data folder) gets a window of its own beside the first
        other = dict(env, MNEMO_DATA_DIR=str(tmp_path / "other-data"))
        third = subprocess.Popen(
            [sys.executable, "-m", "ui.launcher"],
            env=other,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not ask_running_instance(tmp_path / "other-data"):
                assert third.poll() is None, third.stdout.read()
                assert time.monotonic() < deadline, "the second memory's instance never started"
                time.sleep(0.2)
            assert first.poll() is None and third.poll() is None
        finally:
            third.kill()
            third.wait(timeout=30)
    finally:
        first.kill()
        first.wait(timeout=30)
    # once it is gone (killed: the OS dropped its lock), restoring works
    done = subprocess.run(
        [sys.executable, "-m", "app", "memory", "restore", backup, "--yes"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "kept as" in done.stdout, done.stderr


def test_the_instance_lock_is_exclusive_and_released(tmp_path):
    from app.runtime.instance_lock import InstanceLock, app_is_running

    assert app_is_running(tmp_path) is False
    held = InstanceLock(tmp_path)
    assert held.acquire() is True
    assert app_is_running(tmp_path) is True and InstanceLock(tmp_path).acquire() is False
    held.release()
    assert app_is_running(tmp_path) is False
