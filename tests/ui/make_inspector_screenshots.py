"""Screenshots of every tab of the memory inspector on a store filled from LoCoMo.

    python -m tests.ui.make_inspector_screenshots OUTDIR [--locomo PATH] [--questions 60]

Imports ../shared/data/locomo/locomo-dev.json with the app's importer (the real memory core and
the real ONNX embedder), runs the memory jobs (LLM-free promotion into the persona), recalls
memory for LoCoMo questions as a chat would (so segments gain N_visit and heat), asks one
question through the real chat agent and the bundled GGUF (for a reply trace), then saves
OUTDIR/inspector-<tab>.png for every tab, plus the test-query box and the docked panel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def build(ctx, locomo: Path, n_questions: int, chat: bool) -> dict:
    from app.importers import load, write_all

    store = ctx.open_store()
    t0 = time.perf_counter()
    parsed = load(locomo, "locomo")
    report = write_all(store, parsed, path=str(locomo))
    print(
        f"imported {report.pages_written} pages from {len(parsed.conversations)} conversations "
        f"in {time.perf_counter() - t0:.0f} s",
        file=sys.stderr,
    )
    store.jobs.run_pending(allow_llm=False)
    # recall memory for LoCoMo questions, as chat turns would (segments gain N_visit → heat)
    raw = json.loads(locomo.read_text(encoding="utf-8"))
    qs = [q["question"] for s in raw for q in s.get("qa", []) if isinstance(q.get("question"), str)]
    step = max(1, len(qs) // max(1, n_questions))
    for q in qs[::step][:n_questions]:
        store.retrieve(q, record_visits=True)
    store.jobs.run_pending(allow_llm=False)
    info = {"pages": store.pages.count_pages()}
    if chat:
        from app.chat.agent import ChatAgent
        from models.llama_cpp_backend import LlamaCppChatModel

        model = LlamaCppChatModel(n_ctx=2048, max_tokens=48, seed=1234)
        try:
            cid = store.conversations.create_conversation("New chat")
            question = "What did Caroline research for her career, and when did she go to the LGBTQ support group?"
            result = ChatAgent(store, model).send(cid, question)
            info["message_id"] = result.assistant_message_id
            info["included_pages"] = result.trace.get("included", {}).get("pages", [])
        finally:
            model.close()
    store.close()
    return info


def shoot(ctx, out: Path, info: dict) -> list[Path]:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QLabel, QMainWindow

    app = QApplication.instance() or QApplication([])
    from ui.inspector import InspectorWindow, attach

    saved: list[Path] = []

    def grab(widget, name: str) -> None:
        for _ in range(5):
            app.processEvents()
            time.sleep(0.02)
        path = out / f"inspector-{name}.png"
        widget.grab().save(str(path))
        saved.append(path)

    win = InspectorWindow(ctx)
    win.resize(1440, 900)
    win.show()
    p = win.panel
    p.wait_idle(60)
    grab(win, "overview")

    p.show_tab("segments")
    p.wait_idle(60)
    seg = p.segments.model.peek(0)
    if seg is not None:
        p.segments.table.select_key(seg.id)
        p.wait_idle(60)
    grab(win, "segments")

    p.show_tab("pages")
    p.wait_idle(60)
    chained = None
    for r in range(min(p.pages.model.rowCount(), 200)):
        rec = p.pages.model.peek(r)
        if rec is not None and rec.prev_page_id and rec.next_page_id:
            chained = rec
            break
    if chained is not None:
        p.pages.table.select_key(chained.id)
        p.wait_idle(60)
    grab(win, "pages")

    p.show_tab("persona")
    p.wait_idle(60)
    tm = p.persona.traits
    if tm.rowCount():
        idx = tm.index(0, 0, tm.index(0, 0))
        if idx.isValid():
            p.persona.tree.setCurrentIndex(idx)
            p.wait_idle(60)
    grab(win, "persona")

    if info.get("message_id"):
        p.show_trace_for_message(info["message_id"])
        p.wait_idle(60)
        grab(win, "trace-reply")
        p.trace.tabs.setCurrentIndex(1)
        grab(win, "trace-reply-persona")
        p.trace.tabs.setCurrentIndex(2)
        grab(win, "trace-reply-segments")
        p.trace.tabs.setCurrentIndex(0)
        listed = p.trace.listed_page_ids("in_prompt")
        print(
            f"reply {info['message_id']}: prompt pages {info.get('included_pages')}, listed {listed}", file=sys.stderr
        )
    p.show_tab("trace")
    p.trace.query.setText("When did Melanie paint a sunrise?")
    p.trace.run_query()
    p.wait_idle(60)
    grab(win, "trace-query")
    win.close()

    main = QMainWindow()
    main.ctx = ctx
    main.setWindowTitle("Mnemo")
    chat = QLabel("(the chat window)")
    chat.setAlignment(Qt.AlignmentFlag.AlignCenter)
    main.setCentralWidget(chat)
    main.resize(1440, 900)
    main.show()
    panel = attach(main)
    panel.show_tab("segments")
    panel.wait_idle(60)
    grab(main, "docked")
    panel.shutdown()
    main.close()
    app.processEvents()
    return saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--locomo", default=str(DEFAULT_LOCOMO))
    ap.add_argument("--questions", type=int, default=60, help="LoCoMo questions recalled before the shots")
    ap.add_argument("--no-chat", action="store_true", help="skip the chat turn through the bundled GGUF")
    ap.add_argument(
        "--store",
        help="keep the filled store in this folder and reuse it on later runs (default: a new temp folder each run)",
    )
    args = ap.parse_args(argv)
    locomo = Path(args.locomo)
    if not locomo.is_file():
        print(f"LoCoMo file not found: {locomo}", file=sys.stderr)
        return 2
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    tmp = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="mnemo-inspector-shots-"))
    from app.context import AppContext

    ctx = AppContext.create(config_dir=tmp / "config", data_dir=tmp / "data")
    marker = tmp / "built.json"
    if marker.is_file():
        info = json.loads(marker.read_text())
    else:
        info = build(ctx, locomo, args.questions, chat=not args.no_chat)
        if args.store:
            marker.write_text(json.dumps(info))
    for path in shoot(ctx, out, info):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
