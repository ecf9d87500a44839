"""The `mnemo` console script: CLI commands go to `app.cli`; no command opens the window."""

from __future__ import annotations

import os
import sys
import time

PROCESS_START = time.perf_counter()
# One BLAS thread: multi-threaded OpenBLAS fights onnxruntime and llama.cpp for the cores and
# made one small matrix product take seconds under load (measured on 2 cores). Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    from app.cli import main as cli_main

    def gui(ctx, args) -> int:
        from ui.app import run_gui

        return run_gui(ctx, self_test=args.self_test, timings=args.timings, started=PROCESS_START)

    return cli_main(argv, gui=gui)


if __name__ == "__main__":
    sys.exit(main())
