"""Start the Qt application: the main window, and the `--self-test` smoke run."""
from __future__ import annotations

import sys
import time

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication


class _FirstPaint(QObject):
    """Records the time of the first paint event of a widget."""

    def __init__(self, started: float):
        super().__init__()
        self.started = started
        self.first_paint_s: float | None = None

    def eventFilter(self, obj, event):  # noqa: N802 (Qt API)
        if event.type() == QEvent.Type.Paint and self.first_paint_s is None:
            self.first_paint_s = time.perf_counter() - self.started
        return False


def run_gui(ctx, *, self_test: bool = False, timings: bool = False, started: float | None = None) -> int:
    started = started if started is not None else time.perf_counter()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Mnemo")
    app.setOrganizationName("Mnemo")

    from ui.main_window import MainWindow

    window = MainWindow(ctx)
    probe = _FirstPaint(started)
    window.installEventFilter(probe)
    window.show()
    if self_test:
        return _self_test(app, window, ctx, probe, timings)
    window.start_background_loading()
    return app.exec()


def _self_test(app, window, ctx, probe: _FirstPaint, timings: bool) -> int:
    """Show the window, embed one sentence and generate 5 tokens; exit 0 only if all worked."""
    deadline = time.perf_counter() + 5.0
    while probe.first_paint_s is None and time.perf_counter() < deadline:
        app.processEvents()
        time.sleep(0.005)
    for _ in range(20):
        app.processEvents()
    ok = True
    lines: list[str] = []
    if probe.first_paint_s is None:
        ok = False
        lines.append("self-test: the main window never painted")
    else:
        lines.append(f"first paint: {probe.first_paint_s * 1000:.0f} ms")
    try:
        t0 = time.perf_counter()
        vec = ctx.embedder().embed(["Mnemo self-test sentence."])
        lines.append(f"embed: {vec.shape[1]}-d in {(time.perf_counter() - t0) * 1000:.0f} ms (incl. load)")
    except Exception as exc:
        ok = False
        lines.append(f"self-test: embedding failed: {exc}")
    try:
        t0 = time.perf_counter()
        model = ctx.chat_model()
        text = "".join(model.stream([{"role": "user", "content": "Say hello."}], max_tokens=5, temperature=0.0))
        n = model.last_stats.completion_tokens
        if n < 1:
            raise RuntimeError("no tokens generated")
        lines.append(f"generate: {n} tokens {text!r} in {(time.perf_counter() - t0) * 1000:.0f} ms (incl. load)")
    except Exception as exc:
        ok = False
        lines.append(f"self-test: generation failed: {exc}")
    window.close()
    app.processEvents()
    for line in lines:
        if timings or line.startswith("self-test"):
            print(line)
    print("self-test: OK" if ok else "self-test: FAILED")
    return 0 if ok else 1
