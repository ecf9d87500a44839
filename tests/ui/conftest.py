"""Fixtures for the GUI tests: a real MainWindow on temp folders, with the real embedder and bundled GGUF.

The session's chat model is shared between windows (its KV cache of the system prompt
makes every later turn's prompt processing nearly free); a test that reloads the model
asks for a window with its own (`share_model=False`).
"""

from __future__ import annotations

import pytest

from ui.pyside_fix import ensure_refcount_fix

# PySide6 6.12.0 on Python < 3.12 loses a reference to None on every void call; without
# this a long GUI test session aborts with "deallocating None" (see ui/pyside_fix.py).
ensure_refcount_fix()

TURN_TIMEOUT_MS = 120_000
LOAD_TIMEOUT_MS = 120_000

# Every GUI test fails on a Qt warning (pytest-qt's qt_log_level_fail), except these
# harmless ones of the offscreen platform.
QT_LOG_IGNORE = [
    r"This plugin does not support propagateSizeHints\(\)",
    r"This plugin does not support raise\(\)",
    r"This plugin does not support grabbing the keyboard",
    r"QFont::setPointSize: Point size <= 0",
    r"propagateSizeHints",
]


OWN_MODULES = (
    "test_chat_window.py",
    "test_window_features.py",
    "test_pyside_fix.py",
    "test_send_before_load.py",
    "test_plain_words.py",
    "test_waiting.py",
    "test_layout.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.path).replace("\\", "/")
        if (
            "tests/ui/" in path
            and path.rsplit("/", 1)[-1] in OWN_MODULES
            and item.get_closest_marker("qt_log_level_fail") is None
        ):
            item.add_marker(pytest.mark.qt_log_level_fail("WARNING"))
            item.add_marker(pytest.mark.qt_log_ignore(*QT_LOG_IGNORE))


@pytest.fixture
def make_window(qtbot, mnemo_dirs, embedder, chat_model):
    """make_window(max_tokens=24, share_model=True, start=True, ctx=None) -> a shown MainWindow."""
    from app.context import AppContext
    from ui.main_window import MainWindow

    made = []

    def make(*, max_tokens: int = 24, share_model: bool = True, start: bool = True, ctx=None, wait: bool = True):
        if ctx is None:
            ctx = AppContext.create()
            ctx.settings.chat.max_tokens = max_tokens
        ctx._embedder = embedder
        if share_model:
            ctx._chat_model = chat_model
        win = MainWindow(ctx)
        qtbot.addWidget(win)
        win.show()
        made.append(win)
        if start:
            # the load's own signal, not only its attributes: they are set on the LLM thread just before it
            # emits, and a test that waits for the next modelLoaded must not catch this one (a busy machine
            # widens that gap)
            told: list[object] = []
            win.backend.modelLoaded.connect(told.append)
            win.backend.modelFailed.connect(told.append)
            win.start_background_loading()
            if wait:
                qtbot.waitUntil(
                    lambda: (
                        win.backend.store_ok is not None
                        and bool(win.backend.model_id or win.backend.model_error)
                        and bool(told)
                    ),
                    timeout=LOAD_TIMEOUT_MS,
                )
                assert win.backend.store_ok, "the memory store did not open"
        return win

    yield make
    for win in made:
        win.close()


@pytest.fixture
def chat(qtbot):
    """Helpers that drive a window like a user: type, send, wait for the reply."""

    class Chat:
        @staticmethod
        def send(win, text: str, *, typed: bool = False, wait: bool = True):
            from PySide6.QtCore import Qt

            if typed:
                win.composer.edit.setFocus()
                qtbot.keyClicks(win.composer.edit, text)
            else:
                win.composer.set_text(text)
            if wait:
                with qtbot.waitSignal(win.backend.turnFinished, timeout=TURN_TIMEOUT_MS) as blocker:
                    qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)
                return blocker.args[0]
            qtbot.keyClick(win.composer.edit, Qt.Key.Key_Return)
            return None

        @staticmethod
        def wait_turn(win):
            """Wait until the window has handled the end of the turn in flight; return that turn."""
            qtbot.waitUntil(lambda: not win.backend.busy, timeout=TURN_TIMEOUT_MS)
            return win.backend.turn

        @staticmethod
        def wait_db(win):
            """Let the UI's database thread finish what was queued before (and deliver the results)."""
            fut = win.backend.db(lambda s: None)
            qtbot.waitUntil(fut.done, timeout=30_000)
            qtbot.wait(30)

    return Chat()
