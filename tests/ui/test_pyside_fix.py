"""PySide6 6.12.0 loses a reference to None on every void call (and to True on every emit) on
Python < 3.12; ui.pyside_fix must keep a long-running window alive."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QWidget

from ui.pyside_fix import ensure_refcount_fix, status


class _Emitter(QObject):
    ping = Signal(object)


def test_many_void_calls_and_emits_do_not_kill_the_interpreter(qtbot):
    assert ensure_refcount_fix() == status()["applied"]
    if sys.version_info < (3, 12) and status()["lost_none"] >= 16:
        assert status()["applied"], "the leak is real here, so the fix must be on"
    w = QWidget()
    qtbot.addWidget(w)
    e = _Emitter()
    e.ping.connect(lambda _x: None)
    # Far more calls than None's or True's natural reference count: without the fix on an
    # affected PySide6 this aborts the test process with "deallocating None".
    for _ in range(300_000):
        w.update()
    for _ in range(100_000):
        e.ping.emit(None)
    QApplication.processEvents()
    assert sys.getrefcount(None) > 1000 and sys.getrefcount(True) > 100
