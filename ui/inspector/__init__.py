"""The memory inspector: a dockable panel (and a window of its own) showing everything the assistant
remembers — tiers, segments and their heat, pages, the persona, and why each reply recalled what it
recalled — with controls to edit, pin, forget, pause and wipe memory.

    from ui.inspector import attach
    panel = attach(main_window)          # the "Memory" dock on the right, created once
    panel.show_trace_for_message(mid)    # what an assistant reply recalled

All database work runs on the panel's own worker thread (one store connection, `ctx.open_store()`).
"""

from __future__ import annotations

try:  # PySide6 6.12.0 + CPython < 3.12 leak references to None/True: see ui/pyside_fix.py
    from ui.pyside_fix import ensure_refcount_fix
except ImportError:  # pragma: no cover - the app's own fix is missing: use the inspector's copy
    from ui.inspector._compat import immortalize_singletons as ensure_refcount_fix

ensure_refcount_fix()

from ui.inspector.panel import InspectorPanel, InspectorWindow, attach  # noqa: E402  (after ensure_refcount_fix)

__all__ = ["InspectorPanel", "InspectorWindow", "attach"]
