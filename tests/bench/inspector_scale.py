"""Benchmark: the memory inspector on a 100k-page store.

    python -m tests.bench.inspector_scale [--pages 100000] [--rebuild] [--cache DIR]

Builds (once, cached under /tmp) a store of N pages through the memory core's public bulk path
(`add_pages` with precomputed topic-clustered unit embeddings, so the real STM → MTM paging,
segmenting and eviction run, without the embedder's cost), then opens the inspector on its Pages
tab and, inside the Qt event loop, scrolls the pages table (steps, page jumps, end, top), sorts
it by every SQL-sortable column both ways, filters it by text, and opens the Segments tab.
A 5 ms QTimer probe measures the longest gap of the UI thread's event loop.

Prints one JSON object: first paint of the window, time until the first rows are painted, the
longest UI stall (longest probe gap minus the 5 ms interval), how long each sort took to show
rows (worker time, the UI stays live meanwhile), and whether the targets are met
(first paint ≤ 500 ms, longest stall ≤ 50 ms).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

TARGET_FIRST_PAINT_MS = 500.0
TARGET_STALL_MS = 50.0
PROBE_MS = 5
CACHE_VERSION = 2

WORDS = ("garden kitchen travel music guitar piano soccer tennis running cycling movies novel poetry coffee tea "
         "bakery bread pasta sushi curry market budget salary promotion meeting project deadline laptop phone "
         "camera photos beach mountain lake river forest snow winter summer birthday wedding concert museum "
         "painting sculpture history science physics chemistry biology medicine doctor nurse hospital school "
         "teacher student exam homework library language spanish french german japanese chinese grammar verbs "
         "dog cat puppy kitten horse bird fish aquarium plants flowers tomatoes roses apartment rent neighbour "
         "car bike train flight airport hotel passport visa holiday vacation weekend evening morning breakfast "
         "dinner lunch recipe oven grill salad soup cheese wine beer yoga meditation sleep dream anxiety stress").split()


# ---------------------------------------------------------------------- building the store
def _paths(cache: Path, n: int) -> tuple[Path, Path, Path]:
    root = cache / f"n{n}-v{CACHE_VERSION}"
    return root / "data", root / "config", root / "complete.json"


def build_store(ctx, n: int, *, seed: int = 7, per_conv: int = 200, n_topics: int = 600) -> float:
    """Fill ctx's store with n pages in conversations of `per_conv`, topic by topic."""
    rng = np.random.default_rng(seed)
    store = ctx.open_store()
    dim = store.dim
    centers = rng.normal(size=(n_topics, dim)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    topic_words = [rng.choice(WORDS, size=6, replace=False) for _ in range(n_topics)]
    t0 = time.perf_counter()
    done = 0
    conv = 0
    base = 1_600_000_000.0
    while done < n:
        k = min(per_conv, n - done)
        cid = store.create_conversation(f"Bench conversation {conv + 1}", created_at=base + conv * 86400)
        items = []
        topic = int(rng.integers(n_topics))
        for i in range(k):
            if i % 12 == 0:
                topic = int(rng.integers(n_topics))
            v = centers[topic] + rng.normal(scale=0.6 / np.sqrt(dim), size=dim).astype(np.float32)
            v /= np.linalg.norm(v)
            w = topic_words[topic]
            items.append({
                "user_text": f"Can we talk about {w[0]} and {w[1]} again? Page {done + i}: I keep thinking about "
                             f"{w[2]} and {rng.choice(WORDS)}.",
                "assistant_text": f"Sure. About {w[0]}: {w[3]} and {w[4]} matter most; {rng.choice(WORDS)} too.",
                "timestamp": base + conv * 86400 + i * 300.0,
                "embedding": v,
            })
        store.add_pages(cid, items)
        done += k
        conv += 1
        if conv % 25 == 0:
            el = time.perf_counter() - t0
            print(f"  built {done:,}/{n:,} pages in {el:.0f} s (≈{el / done * (n - done):.0f} s left)",
                  file=sys.stderr, flush=True)
    store.close()
    return time.perf_counter() - t0


def open_ctx(cache: Path, n: int, rebuild: bool):
    from app.context import AppContext

    data, config, marker = _paths(cache, n)
    if rebuild or not marker.is_file():
        if data.parent.exists():
            shutil.rmtree(data.parent)
        data.mkdir(parents=True)
        config.mkdir(parents=True)
    ctx = AppContext.create(config_dir=config, data_dir=data)
    build_s = None
    if not marker.is_file():
        print(f"building a {n:,}-page store in {data} (cached for later runs)…", file=sys.stderr, flush=True)
        build_s = build_store(ctx, n)
        marker.write_text(json.dumps({"pages": n, "build_s": round(build_s, 1)}))
    else:
        build_s = json.loads(marker.read_text()).get("build_s")
    return ctx, build_s


# ---------------------------------------------------------------------- the GUI run
class _Probe:
    def __init__(self, interval_ms: int = PROBE_MS):
        from PySide6.QtCore import QTimer

        self.interval = interval_ms
        self.gaps: list[float] = []          # while browsing (after the first rows were painted)
        self.open_gaps: list[float] = []     # while the window opens
        self.worst_at = ""
        self.phase = "open"
        self._last = None
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self._last = time.perf_counter()
        self.timer.start()

    def _tick(self) -> None:
        now = time.perf_counter()
        gap = (now - self._last) * 1000.0
        if self.phase == "open":
            self.open_gaps.append(gap)
        else:
            if not self.gaps or gap > max(self.gaps):
                self.worst_at = self.phase
            self.gaps.append(gap)
        self._last = now

    def stop(self) -> None:
        self.timer.stop()


class _FirstPaint:
    def __init__(self, t0: float):
        from PySide6.QtCore import QObject

        outer = self

        class F(QObject):
            def eventFilter(self, obj, event):  # noqa: N802
                from PySide6.QtCore import QEvent

                if event.type() == QEvent.Type.Paint and outer.at is None:
                    outer.at = time.perf_counter() - t0
                return False

        self.at: float | None = None
        self.filter = F()


def run_gui(ctx, n: int) -> dict:
    from PySide6.QtCore import QEvent, QEventLoop, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    import memory_core  # noqa: F401  (the app has the memory core and the embedder loaded long before)

    ctx.embedder()
    t_imp = time.perf_counter()
    from ui.inspector import InspectorWindow
    from ui.inspector.models import PagesModel
    import_ms = (time.perf_counter() - t_imp) * 1000
    probe = _Probe()
    result: dict = {}

    class RowsPainted(QObject):
        def __init__(self):
            super().__init__()
            self.at = None
            self.t0 = 0.0
            self.model = None

        def eventFilter(self, obj, event):  # noqa: N802
            if event.type() == QEvent.Type.Paint and self.at is None and self.model is not None \
                    and self.model.rowCount() and self.model.peek(0) is not None:
                self.at = time.perf_counter() - self.t0
            return False

    rows_painted = RowsPainted()
    probe.start()
    t0 = time.perf_counter()
    fp = _FirstPaint(t0)
    rows_painted.t0 = t0
    win = InspectorWindow(ctx)
    win.installEventFilter(fp.filter)
    panel = win.panel
    panel.show_tab("pages")
    table = panel.pages.table
    model: PagesModel = panel.pages.model
    rows_painted.model = model
    table.viewport().installEventFilter(rows_painted)
    win.resize(1400, 900)
    win.show()
    construct_ms = (time.perf_counter() - t0) * 1000

    loop = QEventLoop()
    steps: list = []
    sort_ms: dict[str, float] = {}
    sb = table.verticalScrollBar()

    def wait_loaded(label: str, timeout: float = 60.0):
        def step(state={}):  # noqa: B006 - per-step state
            if "t" not in state:
                state["t"] = time.perf_counter()
            if model.ready and not model.is_loading() and model.peek(max(0, table.rowAt(0))) is not None:
                if label:
                    sort_ms[label] = round((time.perf_counter() - state["t"]) * 1000, 1)
                return True
            return time.perf_counter() - state["t"] > timeout
        return step

    def scroll_to(v_fn, phase):
        def step():
            probe.phase = phase
            sb.setValue(int(v_fn()))
            return True
        return step

    def sort_by(key: str, desc: bool):
        def step():
            probe.phase = f"sort {key} {'desc' if desc else 'asc'}"
            from PySide6.QtCore import Qt
            table.horizontalHeader().setSortIndicator(model.column_index(key),
                                                      Qt.SortOrder.DescendingOrder if desc else Qt.SortOrder.AscendingOrder)
            return True
        return step

    steps.append(wait_loaded(""))
    steps.append(lambda: (setattr(probe, "phase", "idle"), True)[1])
    # scroll down row pages, like holding Page Down, then drag the thumb around
    for i in range(120):
        steps.append(scroll_to(lambda i=i: (i + 1) * 30, "scroll steps"))
    for frac in (0.25, 0.5, 0.75, 1.0, 0.33, 0.0):
        steps.append(scroll_to(lambda f=frac: sb.maximum() * f, f"jump {frac:.2f}"))
        steps.append(wait_loaded(""))
    for key in ("id", "tier", "segment", "conversation", "timestamp"):
        for desc in (False, True):
            steps.append(sort_by(key, desc))
            steps.append(wait_loaded(f"{key} {'desc' if desc else 'asc'}"))
            for i in range(15):
                steps.append(scroll_to(lambda i=i: (i + 1) * 40, f"scroll after sort {key}"))
            steps.append(scroll_to(lambda: sb.maximum() / 2, f"jump after sort {key}"))
            steps.append(wait_loaded(""))
    # a text filter (LIKE over 100k rows, in the worker) and back
    steps.append(lambda: (setattr(probe, "phase", "filter"), panel.pages.search.setText("guitar"))[0] or True)
    steps.append(lambda: (model.filters.get("text") == "guitar") or False)
    steps.append(wait_loaded("filter 'guitar'"))
    steps.append(lambda: (panel.pages.search.setText(""), True)[1])
    steps.append(lambda: "text" not in model.filters)
    steps.append(wait_loaded("filter cleared"))
    # the segments tab: heat-sorted table + charts
    steps.append(lambda: (setattr(probe, "phase", "segments tab"), panel.show_tab("segments"), True)[2])
    seg_model = panel.segments.model
    t_seg = {}
    steps.append(lambda: (t_seg.setdefault("t", time.perf_counter()), seg_model.ready and
                          not seg_model.is_loading())[1])
    steps.append(lambda: (sort_ms.__setitem__("segments tab (heat order)",
                                              round((time.perf_counter() - t_seg["t"]) * 1000, 1)), True)[1])
    steps.append(lambda: (setattr(probe, "phase", "segments sort"), panel.segments.table.horizontalHeader()
                          .setSortIndicator(seg_model.column_index("n_visit"), __import__("PySide6.QtCore").QtCore.Qt
                                            .SortOrder.DescendingOrder), True)[2])
    steps.append(lambda: seg_model.ready and not seg_model.is_loading())

    state = {"i": 0, "deadline": time.perf_counter() + 900}

    def drive():
        if state["i"] >= len(steps) or time.perf_counter() > state["deadline"]:
            loop.quit()
            return
        if steps[state["i"]]():
            state["i"] += 1

    driver = QTimer()
    driver.setInterval(16)
    driver.timeout.connect(drive)
    QTimer.singleShot(0, driver.start)
    loop.exec()
    driver.stop()
    probe.stop()
    gaps = sorted(probe.gaps)
    longest_gap = gaps[-1] if gaps else 0.0
    result.update({
        "pages": model.rowCount() if not model.filters else None,
        "import_ms": round(import_ms, 1),
        "construct_ms": round(construct_ms, 1),
        "first_paint_ms": round(fp.at * 1000, 1) if fp.at is not None else None,
        "first_rows_painted_ms": round(rows_painted.at * 1000, 1) if rows_painted.at is not None else None,
        "longest_ui_stall_ms": round(max(0.0, longest_gap - PROBE_MS), 1),
        "longest_ui_stall_during": probe.worst_at,
        "longest_ui_stall_while_opening_ms": round(max([0.0] + [g - PROBE_MS for g in probe.open_gaps]), 1),
        "p99_probe_gap_ms": round(gaps[int(len(gaps) * 0.99) - 1], 1) if gaps else None,
        "probe_ticks": len(gaps),
        "steps_done": state["i"], "steps_total": len(steps),
        "rows_visible_after_ms": sort_ms,
        "worker_slowest_requests_ms": sorted(((round(s * 1000, 1), label) for label, s in panel.worker.timings),
                                             reverse=True)[:5],
    })
    win.close()
    app.processEvents()
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--cache", default=os.environ.get("MNEMO_BENCH_CACHE", "/tmp/mnemo-bench-inspector"))
    args = ap.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    ctx, build_s = open_ctx(Path(args.cache), args.pages, args.rebuild)
    out = {"benchmark": "inspector_scale", "store_pages": args.pages, "store_build_s": build_s}
    out.update(run_gui(ctx, args.pages))
    out["targets"] = {"first_paint_ms": TARGET_FIRST_PAINT_MS, "longest_ui_stall_ms": TARGET_STALL_MS}
    out["ok"] = bool(out.get("first_paint_ms") is not None and out["first_paint_ms"] <= TARGET_FIRST_PAINT_MS
                     and out["longest_ui_stall_ms"] <= TARGET_STALL_MS and out["steps_done"] == out["steps_total"])
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
