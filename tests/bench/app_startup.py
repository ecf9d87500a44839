"""Benchmark: time to first paint and resident memory of the running app with the default models.

Runs `mnemo --self-test --timings` (window shown offscreen, embedder and GGUF loaded, one
sentence embedded, 5 tokens generated) several times in fresh processes; prints JSON with
the median first paint and the peak resident set size (VmHWM of the child).

    python -m tests.bench.app_startup [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def _peak_rss_mb(pid: int, stop: threading.Event, out: list) -> None:
    peak = 0
    while not stop.is_set():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            break
        time.sleep(0.02)
    out.append(peak / 1024)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    paints, rss = [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(
            os.environ,
            QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"),
            MNEMO_DATA_DIR=f"{tmp}/data",
            MNEMO_CONFIG_DIR=f"{tmp}/config",
        )
        for _ in range(args.runs):
            proc = subprocess.Popen(
                [sys.executable, "-m", "ui.launcher", "--self-test", "--timings"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
            stop, peak = threading.Event(), []
            watcher = threading.Thread(target=_peak_rss_mb, args=(proc.pid, stop, peak))
            watcher.start()
            output, _ = proc.communicate(timeout=300)
            stop.set()
            watcher.join()
            m = re.search(r"first paint: (\d+) ms", output)
            if proc.returncode != 0 or not m:
                raise SystemExit(f"self-test failed:\n{output}")
            paints.append(int(m.group(1)))
            rss.append(peak[0])
    out = {
        "benchmark": "app_startup",
        "runs": args.runs,
        "first_paint_ms_p50": statistics.median(paints),
        "first_paint_ms_max": max(paints),
        "peak_rss_mb_p50": round(statistics.median(rss), 1),
        "peak_rss_mb_max": round(max(rss), 1),
    }
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
