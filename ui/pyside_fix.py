"""Keep PySide6 6.12.0 from crashing the interpreter on Python < 3.12 (`ensure_refcount_fix()`).

PySide6/shiboken6 6.12.0 returns `None` from every void Qt method (`setText`, `update`,
`processEvents`, …) and `True` from `SignalInstance.emit()` without taking a new
reference. Python 3.12+ makes `None`, `True` and `False` immortal, so there nothing
happens; on Python 3.10/3.11 each such call drops the reference count by one, and after
some thousands of calls the process aborts with "Fatal Python error: none_dealloc:
deallocating None" (or bool_dealloc). A chat window makes thousands of such calls a
minute, so without this the app dies within minutes.

`ensure_refcount_fix()` measures the leak once and, only where it is real, does what
Python 3.12 does: gives `None`, `True` and `False` a reference count so large that it can
never reach zero. These three objects are never freed by a healthy interpreter anyway,
so nothing else changes. It is a no-op on Python ≥ 3.12, on a fixed PySide6, and on
interpreters other than release builds of CPython.
"""

from __future__ import annotations

import ctypes
import sys
import threading

from PySide6.QtCore import QObject, Signal

_IMMORTAL = 1 << 40
_lock = threading.Lock()
_state: dict[str, object] = {}


class _Probe(QObject):
    ping = Signal()


def _leaks() -> tuple[int, int]:
    """(references to None lost, references to True lost) over 16 void calls / 16 emits."""
    probe = _Probe()
    probe.ping.connect(lambda: None)
    n0 = sys.getrefcount(None)
    for _ in range(16):
        probe.setObjectName("probe")
    lost_none = n0 - sys.getrefcount(None)
    t0 = sys.getrefcount(True)
    for _ in range(16):
        probe.ping.emit()
    lost_true = t0 - sys.getrefcount(True)
    return lost_none, lost_true


def _bump(obj: object, n: int) -> None:
    ctypes.c_ssize_t.from_address(id(obj)).value += n  # ob_refcnt is the first field of PyObject


def ensure_refcount_fix() -> bool:
    """Apply the fix once per process when needed; return True when it was applied."""
    with _lock:
        if "applied" in _state:
            return bool(_state["applied"])
        applicable = (
            sys.implementation.name == "cpython" and sys.version_info < (3, 12) and not hasattr(sys, "gettotalrefcount")
        )  # debug builds lay PyObject out differently
        lost_none, lost_true = _leaks() if applicable else (0, 0)
        applied = applicable and (lost_none >= 16 or lost_true >= 16)
        if applied:
            for obj in (None, True, False):
                _bump(obj, _IMMORTAL)
        _state.update(applied=applied, lost_none=lost_none, lost_true=lost_true)
        return applied


def status() -> dict:
    ensure_refcount_fix()
    return dict(_state)
