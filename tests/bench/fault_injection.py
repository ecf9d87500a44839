"""Benchmark-style runner: SIGKILL Mnemo at random moments of its work, restart, count what was lost.

    python -m tests.bench.fault_injection [--kills 50] [--seed 0] [--keep DIR]

Rounds over the scenarios of `tests.reliability.faults` (chat turns with the bundled model, memory
jobs, import, backup, export, restore), each killed at a random moment and followed by a restart
through the desktop app's start path or the terminal's, by turns. Prints one line per round on
stderr and the tally as JSON; exits 1 when anything was lost, doubled or damaged.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.reliability.faults import run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", help="keep the profiles in this folder (default: a temporary one)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mnemo-faults-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        tally = run(args.kills, args.seed, root=root, log=lambda line: print(line, file=sys.stderr, flush=True))
    summary = tally.summary() | {"seed": args.seed, "wall_s": round(time.monotonic() - t0, 1)}
    print(json.dumps(summary, indent=2))
    return 0 if tally.ok else 1


if __name__ == "__main__":
    sys.exit(main())
