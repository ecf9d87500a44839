"""Screenshots of the chat window, offscreen: `python -m tests.ui.make_screenshots OUTDIR [--readme]`.

Writes empty.png (the empty state), conversation.png (Markdown and a code block),
settings.png (the settings dialog), dark.png (the same conversation in the dark theme)
and streaming.png (a real reply from the bundled model while it streams). The
conversation is written into a temp store so the screenshot shows well-formed Markdown;
the window, the store and the model are the real ones. With --readme, conversation.png
is also copied to docs/screenshot.png.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as ui.launcher does, before numpy loads

SIZE = (1100, 700)
QUESTION = "How do I read a large CSV file in Python without loading it all into memory?"
ANSWER = """Use the standard library's **`csv`** module and iterate over the rows — the file is read
lazily, one line at a time:

```python
import csv

def rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            yield row

total = sum(float(r["amount"]) for r in rows("sales.csv"))
```

A few tips:

1. Keep the generator: `rows()` never holds more than one row.
2. For column arithmetic on big files, *pandas* can read in chunks with `chunksize=100_000`.
3. Compressed files work too — open them with `gzip.open(path, "rt")`.

Last week you mentioned your `sales.csv` is about **4 GB**, so the streaming version above is the safe choice."""
FOLLOW_UP = "Thanks! Can it skip the header line?"
FOLLOW_ANSWER = (
    "`csv.DictReader` already consumes the header: it uses the first line as the field names, "
    "so every row you get is data."
)


def _pump(app, seconds: float, until=None) -> bool:
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        app.processEvents()
        if until is not None and until():
            return True
        time.sleep(0.01)
    return until is None or bool(until())


def _seed(ctx) -> int:
    store = ctx.open_store()
    try:
        old = store.conversations.create_conversation("Trip to Lisbon in May")
        store.conversations.add_message(old, "user", "Plan three days in Lisbon for me.")
        store.conversations.add_message(old, "assistant", "Day 1: Alfama and the castle…")
        store.conversations.create_conversation("Sourdough starter schedule")
        cid = store.conversations.create_conversation("Reading a big CSV in Python")
        u = store.conversations.add_message(cid, "user", QUESTION)
        a = store.conversations.add_message(
            cid,
            "assistant",
            ANSWER,
            parent_id=u,
            meta={"stats": {"completion_tokens": 212, "tokens_per_s": 38.5, "time_to_first_token_s": 0.42}},
        )
        u2 = store.conversations.add_message(cid, "user", FOLLOW_UP, parent_id=a)
        store.conversations.add_message(
            cid,
            "assistant",
            FOLLOW_ANSWER,
            parent_id=u2,
            meta={"stats": {"completion_tokens": 31, "tokens_per_s": 41.0, "time_to_first_token_s": 0.18}},
        )
        return cid
    finally:
        store.close()


def offscreen_app(prefix: str):
    """(the QApplication, a temp folder whose data and config folders the app now uses)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["MNEMO_DATA_DIR"] = str(tmp / "data")
    os.environ["MNEMO_CONFIG_DIR"] = str(tmp / "config")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Mnemo")
    return app, tmp


def _save(widget, path: Path) -> None:
    pm = widget.grab()
    if not pm.save(str(path), "PNG"):
        raise SystemExit(f"could not write {path}")
    print(f"wrote {path} ({pm.width()}x{pm.height()}, {path.stat().st_size // 1024} KB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--readme", action="store_true", help="also copy conversation.png to docs/screenshot.png")
    args = parser.parse_args(argv)
    out: Path = args.outdir
    out.mkdir(parents=True, exist_ok=True)

    app, tmp = offscreen_app("mnemo-shots-")
    from app.context import AppContext
    from ui.main_window import MainWindow
    from ui.settings_dialog import SettingsDialog

    ctx = AppContext.create()
    ctx.settings.ui.theme = "light"
    ctx.settings.chat.max_tokens = 48
    cid = _seed(ctx)
    win = MainWindow(ctx)
    win.resize(*SIZE)
    win.show()
    win.start_background_loading()
    _pump(app, 180, lambda: bool(win.backend.model_id or win.backend.model_error) and win.sidebar.list.count() > 0)
    win.statusBar().clearMessage()
    win.new_chat()
    _pump(app, 0.3)
    _save(win, out / "empty.png")

    win.open_conversation(cid)
    _pump(app, 10, lambda: len(win.chat_view.messages()) == 4)
    win.statusBar().clearMessage()
    _pump(app, 0.3)
    win.chat_view.scroll_to_bottom()
    _pump(app, 0.2)
    win.chat_view.scroll_area.verticalScrollBar().setValue(0)
    _pump(app, 0.2)
    _save(win, out / "conversation.png")

    dlg = SettingsDialog(ctx, win)
    dlg.resize(640, 600)
    dlg.show()
    _pump(app, 0.3)
    _save(dlg, out / "settings.png")
    dlg.tabs.setCurrentIndex(2)
    _pump(app, 0.2)
    _save(dlg, out / "settings-memory.png")
    dlg.close()

    win.menus.set_theme("dark", save=False)
    _pump(app, 0.3)
    win.chat_view.scroll_area.verticalScrollBar().setValue(0)
    _pump(app, 0.2)
    _save(win, out / "dark.png")

    # A real reply streaming from the bundled model, caught mid-stream.
    win.menus.set_theme("light", save=False)
    win.new_chat()
    win.composer.set_text("Write a haiku about remembering.")
    win.turns.send()
    if _pump(app, 120, lambda: bool(win.backend.turn and win.backend.turn.first_token_at)):
        _pump(app, 0.15)
        _save(win, out / "streaming.png")
    _pump(app, 120, lambda: not win.backend.busy)

    if args.readme:
        docs = Path(__file__).resolve().parents[2] / "docs"
        docs.mkdir(exist_ok=True)
        shutil.copyfile(out / "conversation.png", docs / "screenshot.png")
        print(f"copied to {docs / 'screenshot.png'}")
    win.close()
    app.processEvents()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
