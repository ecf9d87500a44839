"""Screenshots of the window as a person uses it, offscreen: `python -m tests.ui.make_layout_screenshots OUTDIR`.

A temp store gets a few chats of the user's own (their facts kept through `app.operations.chats.remember`,
pages through the memory core, topics formed by its LLM-free jobs); one more message goes through the
real window and the bundled GGUF, so the last reply has a trace and a prompt. Then it saves the main
window at 1440×900 and 800×600 with the inspector docked, every inspector tab (Saved memories and
Prompt among them), the help page, the import help, Settings (plain and with Developer settings) and
the dark theme. The window, store, embedder and model are the real ones.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from tests.ui.make_screenshots import _pump, offscreen_app  # it sets the offscreen platform first

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

DAY = 86400.0
CHATS = [  # (title, days ago, [(user, assistant)])
    (
        "Moving to Lisbon",
        9,
        [
            ("I moved to Lisbon last month, to a flat in Alfama.", "Congratulations! Alfama is lovely."),
            ("The tram 28 stops right below my window.", "Handy, and a classic ride too."),
        ],
    ),
    (
        "Marathon training",
        3,
        [
            ("I'm training for the Porto marathon in November.", "Great goal. How many weeks do you have?"),
            ("Twelve weeks. I run four times a week.", "A 12-week plan with one long run a week fits well."),
        ],
    ),
    (
        "New job",
        1,
        [("I started a job as a data engineer at a bike-sharing company.", "Nice! What stack do they use?")],
    ),
]
FACTS = ["I live in Lisbon, in Alfama.", "I am training for the Porto marathon in November."]
TRAITS = [("occupation", "data engineer"), ("likes", "running and old trams")]
QUESTION = "Where do I live now, and what am I training for?"


def seed(ctx) -> None:
    from app.operations import chats as operations

    store = ctx.open_store()
    try:
        now = time.time()
        for title, days, turns in CHATS:
            cid = store.conversations.create_conversation(title, created_at=now - days * DAY)
            parent = None
            for i, (u, a) in enumerate(turns):
                at = now - days * DAY + i * 600
                uid = store.conversations.add_message(cid, "user", u, parent_id=parent, created_at=at)
                aid = store.conversations.add_message(cid, "assistant", a, parent_id=uid, created_at=at + 5)
                store.intake.add_page(cid, u, a, timestamp=at, user_message_id=uid, assistant_message_id=aid)
                parent = aid
        for f in FACTS:
            operations.remember(store, f)
        for dim, value in TRAITS:
            operations.remember_a_trait(store, dim, value, pin=dim == "occupation")
        store.jobs.run_pending(allow_llm=False)
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    args = parser.parse_args(argv)
    out: Path = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    app, tmp = offscreen_app("mnemo-layout-")
    from PySide6.QtCore import Qt

    from app.context import AppContext
    from ui.main_window import MainWindow

    ctx = AppContext.create()
    ctx.settings.ui.theme = "light"
    ctx.settings.chat.max_tokens = 40
    ctx.settings.memory = {"stm_capacity": 1, "tau": 2.0}  # the pages move into topics, busy ones are read
    seed(ctx)
    win = MainWindow(ctx)
    win.resize(1440, 900)
    win.show()
    win.start_background_loading()
    _pump(app, 240, lambda: bool(win.backend.model_id or win.backend.model_error) and win.sidebar.list.count() > 0)
    saved: list[Path] = []

    def shot(widget, name: str, settle: float = 0.4) -> None:
        _pump(app, settle)
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        saved.append(path)
        print(f"wrote {path}")

    win.composer.set_text(QUESTION)
    win.turns.send()
    _pump(app, 240, lambda: not win.backend.busy)
    _pump(app, 300, lambda: win.status.jobs_pending == 0)  # busy topics read for the profile (by the model, when idle)
    win.statusBar().clearMessage()
    panel = win.dock.show_inspector()
    panel.wait_idle(30)
    shot(win, "main-1440x900-docked", 1.0)
    for name in panel.TABS:
        panel.show_tab(name)
        panel.wait_idle(30)
        if name == "trace":
            mid = win.latest_reply_id()
            if mid is not None:
                panel.show_trace_for_message(mid)
                panel.wait_idle(30)
        if name == "prompt":
            mid = win.latest_reply_id()
            if mid is not None:
                panel.show_prompt_for_message(mid)
                panel.wait_idle(30)
        if name == "segments":
            panel.segments.table.selectRow(0)
            panel.wait_idle(30)
        shot(win, f"inspector-{name}", 0.6)
    panel.set_details(True)
    panel.show_tab("segments")
    panel.wait_idle(30)
    shot(win, "inspector-segments-details", 0.6)
    panel.set_details(False)

    panel.show_tab("overview")
    win.resize(800, 600)
    _pump(app, 1.0)
    shot(win, "main-800x600-docked", 0.6)
    panel.show_tab("memories")
    shot(win, "main-800x600-saved-memories", 0.6)
    win.resize(640, 420)
    _pump(app, 1.0)
    shot(win, "main-640x420", 0.6)
    dock = win.dock.dock_widget()
    if dock is not None and dock.isFloating():
        shot(dock, "inspector-floating-640x420", 0.4)
        dock.setFloating(False)

    win.resize(1440, 900)
    _pump(app, 0.8)
    if dock is not None:
        win.resizeDocks([dock], [560], Qt.Orientation.Horizontal)
    win.menus.set_theme("dark", save=False)
    panel.show_tab("segments")
    panel.wait_idle(30)
    shot(win, "dark-1440x900-topics", 1.0)
    panel.show_tab("memories")
    shot(win, "dark-1440x900-saved-memories", 0.6)
    panel.show_tab("trace")
    shot(win, "dark-1440x900-recall", 0.6)
    win.menus.set_theme("light", save=False)
    win.dock.toggle_inspector(False)
    shot(win, "main-1440x900-inspector-hidden", 0.6)

    win.dialogs.show_help()
    win.dialogs.help_dialog.resize(620, 640)
    shot(win.dialogs.help_dialog, "help-how-mnemo-remembers", 0.5)
    win.dialogs.help_dialog.close()
    win.dialogs.import_dialog()
    shot(win.dialogs.import_help, "import-help", 0.5)
    win.dialogs.import_help.close()
    win.dialogs.open_settings()
    dlg = win.dialogs.settings_dialog
    dlg.resize(660, 620)
    shot(dlg, "settings-plain", 0.5)
    dlg.tabs.setCurrentIndex(1)
    shot(dlg, "settings-replies", 0.3)
    dlg.developer_check.setChecked(True)
    dlg.tabs.setCurrentIndex(2)
    shot(dlg, "settings-developer-memory", 0.5)
    dlg.reject()

    win.close()
    app.processEvents()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(saved)} screenshots in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
