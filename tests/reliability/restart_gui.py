"""Start Mnemo the way the desktop app does, without its window, for `tests.reliability.faults`.

`python -m tests.reliability.restart_gui` (MNEMO_DATA_DIR / MNEMO_CONFIG_DIR name the profile)
starts `ui.bridge.Backend` — the app's workers, its store opening with the crash recovery, the
model load, the scheduler's memory jobs — waits until no memory job is pending, and stops. It
prints `STORE ok` or `STORE failed: …`, then `JOBS <pending>`.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DEADLINE_S = 180.0


def main() -> int:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    from app.context import AppContext
    from ui.bridge import Backend

    app = QCoreApplication(sys.argv[:1])
    ctx = AppContext.create()
    backend = Backend(ctx)
    state: dict = {"store": None, "jobs": None, "model": None}
    backend.storeReady.connect(lambda: state.update(store="ok"))
    backend.storeFailed.connect(lambda why: state.update(store=f"failed: {why}"))
    backend.jobsChanged.connect(lambda n: state.update(jobs=n))
    backend.modelLoaded.connect(lambda _id: state.update(model="ok"))
    backend.modelFailed.connect(lambda why: state.update(model=f"failed: {why}"))
    backend.start()
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 100)
        if state["store"] is not None and state["store"] != "ok":
            break
        if state["store"] == "ok" and state["model"] is not None and state["jobs"] == 0:
            break
        time.sleep(0.02)  # the workers report through queued signals; this loop only pumps them
    print(f"STORE {state['store']}", flush=True)
    print(f"JOBS {state['jobs']}", flush=True)
    backend.shutdown()
    return 0 if state["store"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
