"""The `mnemo` console script: CLI commands go to `app.cli`; no command opens the window."""
from __future__ import annotations

import sys
import time

PROCESS_START = time.perf_counter()


def main(argv: list[str] | None = None) -> int:
    from app.cli import main as cli_main

    def gui(ctx, args) -> int:
        from ui.app import run_gui

        return run_gui(ctx, self_test=args.self_test, timings=args.timings, started=PROCESS_START)

    return cli_main(argv, gui=gui)


if __name__ == "__main__":
    sys.exit(main())
