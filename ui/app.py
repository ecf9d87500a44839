"""Start the Qt application: the main window, and the `--self-test` smoke run."""

from __future__ import annotations

import sys
import time
from concurrent.futures import Future

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

SELF_TEST_TIMEOUT_S = 180.0
GIL_SWITCH_INTERVAL_S = 0.001


def tune_interpreter() -> None:
    """Process settings for a responsive window next to busy worker threads.

    The workers (llama.cpp, ONNX Runtime, SQLite) release the GIL inside native code but
    take it back between calls; a shorter switch interval than Python's 5 ms lets the UI
    thread in sooner, which cuts event-loop stalls while a reply streams.
    """
    from ui.pyside_fix import ensure_refcount_fix

    ensure_refcount_fix()
    if sys.getswitchinterval() > GIL_SWITCH_INTERVAL_S:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


class _FirstPaint(QObject):
    """Records the time of the first paint event of a widget."""

    def __init__(self, started: float):
        super().__init__()
        self.started = started
        self.first_paint_s: float | None = None

    def eventFilter(self, obj, event):
        if event.type() == QEvent.Type.Paint and self.first_paint_s is None:
            self.first_paint_s = time.perf_counter() - self.started
        return False


def run_gui(ctx, *, self_test: bool = False, timings: bool = False, started: float | None = None) -> int:
    started = started if started is not None else time.perf_counter()
    tune_interpreter()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)  # instance() is typed QCoreApplication; the GUI always makes a QApplication
    app.setApplicationName("Mnemo")
    app.setOrganizationName("Mnemo")
    app.setDesktopFileName("mnemo")

    instance = None
    if not self_test:
        from ui.single_instance import InstanceServer, ask_running_instance

        if ask_running_instance(ctx.paths.data_dir):
            print("Mnemo is already running on this memory; its window was brought to the front.")
            return 0
        instance = InstanceServer(ctx.paths.data_dir, app)
        from app.runtime.instance_lock import InstanceLock

        running = InstanceLock(ctx.paths.data_dir)  # held for the process's life: `mnemo memory restore` checks it
        running.acquire()

    from ui.main_window import MainWindow

    notice, reopen_chat = None, None
    while True:
        window = MainWindow(ctx)
        if instance is not None:
            instance.activated.connect(window.bring_to_front)
        probe = _FirstPaint(started)
        window.installEventFilter(probe)
        window.show()
        # The store, the embedder and the chat model load on worker threads while the window paints.
        window.start_background_loading()
        if self_test:
            return _self_test(app, window, ctx, probe, timings)
        if notice is not None:
            window.backups.show_notice(notice)
        if reopen_chat is not None:
            window.open_conversation(reopen_chat)  # a new chat instead if the restored memory lacks it
        code = app.exec()
        # A window that closed to reopen (a backup was restored): a fresh one on the swapped file,
        # in the same process, so the models stay loaded and this process keeps the instance lock.
        notice, reopen_chat = window.backups.reopen_notice, window.current_id
        window.deleteLater()
        if notice is None:
            return code


def _wait(app, future: Future, timeout: float):
    """Keep the event loop turning until `future` is done; return its result (or raise its error)."""
    deadline = time.perf_counter() + timeout
    while not future.done():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no answer within {timeout:.0f} s")
        app.processEvents()
        time.sleep(0.005)
    app.processEvents()
    return future.result()


def _generate(store, model) -> tuple[str, int]:
    """Runs on the LLM thread (the scheduler's): 5 tokens from the loaded chat model."""
    text = "".join(model.stream([{"role": "user", "content": "Say hello."}], max_tokens=5, temperature=0.0))
    return text, model.last_stats.completion_tokens


def _self_test(app, window, ctx, probe: _FirstPaint, timings: bool) -> int:
    """Show the window, embed one sentence and generate 5 tokens (all through the window's
    background workers, as the app does); exit 0 only if all worked."""
    t_start = time.perf_counter()
    deadline = t_start + 5.0
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
    backend = window.backend
    try:
        t0 = time.perf_counter()
        vec = _wait(
            app, backend.db(lambda store: ctx.embedder().embed(["Mnemo self-test sentence."])), SELF_TEST_TIMEOUT_S
        )
        lines.append(
            f"embed: {vec.shape[1]}-d in {(time.perf_counter() - t0) * 1000:.0f} ms "
            f"(store open + embedder load: {(time.perf_counter() - t_start) * 1000:.0f} ms after paint)"
        )
    except Exception as exc:
        ok = False
        lines.append(f"self-test: embedding failed: {exc}")
    try:
        t0 = time.perf_counter()
        text, n = _wait(app, backend.submit(_generate), SELF_TEST_TIMEOUT_S)
        if n < 1:
            raise RuntimeError("no tokens generated")
        lines.append(
            f"generate: {n} tokens {text!r} in {(time.perf_counter() - t0) * 1000:.0f} ms (model: {backend.model_id})"
        )
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
