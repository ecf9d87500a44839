"""Fallback copy of ui/pyside_fix.py: a reference-counting bug of PySide6 6.12.0 on CPython < 3.12.

Used only when ui.pyside_fix is not importable.

Measured here (PySide6/shiboken6 6.12.0, CPython 3.11.7): every call of a wrapped C++
method that returns void (`QLabel.setText`, `QTimer.start`, `QCoreApplication.processEvents`,
…) hands back `None` without taking a reference, and `SignalInstance.emit` does the same with
`True`. Each call therefore lowers the reference count of the `None` / `True` singleton by one;
after a few thousand calls CPython aborts with "Fatal Python error: none_dealloc: deallocating
None" (or bool_dealloc). On CPython 3.12+ these singletons are immortal (PEP 683), which is
presumably why the bug went unnoticed.

The fix here does what 3.12 does: give None, True and False a huge reference count, so the
leak can never reach zero. These objects are statically allocated and never freed, so an
excess count is harmless. It is a no-op on CPython 3.12+ and on other interpreters.
"""

from __future__ import annotations

import ctypes
import sys

_BOOST = 1 << 40
_done = False


def immortalize_singletons() -> bool:
    """Apply the workaround once per process; True when it was applied now."""
    global _done
    if _done or sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return False
    if getattr(sys, "_mnemo_singletons_immortal", False):
        _done = True
        return False
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += _BOOST
    setattr(sys, "_mnemo_singletons_immortal", True)  # noqa: B010  (a process-wide mark; sys declares no such attribute)
    _done = True
    return True
