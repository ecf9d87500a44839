"""Starting a `mnemo` server command as a subprocess and waiting for its ready line (not a sleep)."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
READY = "listening on "


def start(args: list[str], env: dict[str, str], timeout: float = 120.0) -> tuple[subprocess.Popen, str]:
    """`python -m app ARGS` started; returns the process and the URL of its "listening on URL" line on
    stderr, once printed. Fails with what it printed when it exits or `timeout` passes first."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if READY in line:
            return proc, line.split(READY, 1)[1].split()[0]
    proc.kill()
    raise AssertionError(f"mnemo {' '.join(args)} did not start: {''.join(seen)}")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(30)
