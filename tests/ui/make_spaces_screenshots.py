"""Screenshots of memory spaces in the inspector and in Memory ▸ Memory spaces…, on a small real store.

    python -m tests.ui.make_spaces_screenshots OUTDIR

Fills a memory with two spaces (Personal and Work: pages, facts and traits, a fact of Work close to one of
Personal, one conflicting with a pinned one) through the real store and embedder, then saves:
OUTDIR/persona-spaces.png (the persona's facts and traits, every space, with the Space column),
OUTDIR/persona-space-filter.png (filtered to Work), OUTDIR/pages-spaces.png (the pages' Space column by
name), OUTDIR/merge-question.png (Merge into…'s question: what the merge would do, from a dry run) and
OUTDIR/merge-done.png (the dialog after the merge, saying what it did).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

PERSONAL = [
    ("I adopted a golden retriever puppy named Biscuit.", "Congratulations, Biscuit sounds sweet."),
    ("My sister Laura is getting married in Lisbon next spring.", "How exciting, Lisbon is beautiful."),
]
WORK = [
    ("The quarterly report for the Porto client is due Friday.", "Good luck finishing it."),
    ("Our team moved the sprint review to Thursday.", "Thursday it is."),
]


def build(store) -> None:
    """Two spaces with pages, facts and traits; Personal's facts a day older than Work's."""
    home = store.conversations.create_conversation("Weekend plans")
    for u, a in PERSONAL:
        store.intake.add_page(home, u, a)
    store.persona.add_knowledge("user", "The user lives in Porto.")
    store.persona.add_knowledge("user", "The user's dog is called Biscuit.")
    store.persona.add_knowledge("user", "The user's manager is Ana.", pinned=True)
    store.persona.add_knowledge("assistant", "I will answer in French when asked.")
    store.persona.add_trait("likes", "jazz")
    store.persona.add_trait("diet", "vegetarian")
    with store.transaction():  # said a day before what Work holds
        store.db.execute("UPDATE knowledge SET updated_at = updated_at - 86400, created_at = created_at - 86400")
    work = store.spaces.create("Work")
    office = store.conversations.create_conversation("Porto client", space_id=work)
    for u, a in WORK:
        store.intake.add_page(office, u, a)
    store.persona.add_knowledge("user", "The user lives in Lyon now.", space_id=work)
    store.persona.add_knowledge("user", "The user's manager is Rui now.", space_id=work)
    store.persona.add_knowledge("user", "The user's report for the Porto client is due Friday.", space_id=work)
    store.persona.add_trait("occupation", "data engineer", space_id=work)
    store.persona.add_trait("likes", "jazz", space_id=work)


def shoot(ctx, out: Path) -> list[Path]:
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    from app.operations import spaces as ops
    from ui.inspector import InspectorWindow
    from ui.spaces_dialog import SpacesDialog, merge_question

    saved: list[Path] = []

    def grab(widget, name: str) -> None:
        for _ in range(5):
            app.processEvents()
            time.sleep(0.02)
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        saved.append(path)

    win = InspectorWindow(ctx)
    win.resize(1440, 900)
    win.show()
    p = win.panel
    p.show_tab("persona")
    p.wait_idle(60)
    pv = p.persona
    pv.refresh()
    p.wait_idle(60)
    pv.kviews["user"].selectRow(0)
    p.wait_idle(60)
    grab(win, "persona-spaces")
    pv.space.setCurrentIndex(pv.space.findText("Work"))
    p.wait_idle(60)
    grab(win, "persona-space-filter")
    p.show_tab("pages")
    p.wait_idle(60)
    p.pages.load_spaces()
    p.wait_idle(60)
    grab(win, "pages-spaces")
    win.panel.shutdown()
    win.close()

    store = ctx.open_store()
    try:
        dlg = SpacesDialog(lambda fn, done, err: done(fn(store)))  # on this thread: a script, not the app
        dlg.resize(560, 380)
        dlg.show()
        dlg.select("Work")
        plan = ops.merge_spaces(store, "Work", "Personal", dry_run=True)
        box, _ = dlg.question_box("Merge spaces", merge_question("Work", "Personal", plan), "Merge")
        box.show()
        grab(box, "merge-question")
        box.close()
        dlg.ask_target = lambda title, names: names.index("Personal")
        dlg.confirm = lambda title, text, action: True
        dlg.merge_space()
        grab(dlg, "merge-done")
        dlg.close()
    finally:
        store.close()
    app.processEvents()
    return saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    args = ap.parse_args(argv)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-spaces-shots-"))
    from app.context import AppContext

    ctx = AppContext.create(config_dir=tmp / "config", data_dir=tmp / "data")
    store = ctx.open_store()
    try:
        build(store)
    finally:
        store.close()
    for path in shoot(ctx, out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
