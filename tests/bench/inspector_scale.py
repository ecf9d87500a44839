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

WORDS = (
    "garden kitchen travel music guitar piano soccer tennis running cycling movies novel poetry coffee tea "
    "bakery bread pasta sushi curry market budget salary promotion meeting project deadline laptop phone "
    "camera photos beach mountain lake river forest snow winter summer birthday wedding concert museum "
    "painting sculpture history science physics chemistry biology medicine doctor nurse hospital school "
    "teacher student exam homework library language spanish french german japanese chinese grammar verbs "
    "dog cat puppy kitten horse bird fish aquarium plants flowers tomatoes roses apartment rent neighbour "
    "car bike train flight airport hotel passport visa holiday vacation weekend evening morning breakfast "
    "dinner lunch recipe oven grill salad soup cheese wine beer yoga meditation sleep dream anxiety stress"
).split()


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
        cid = store.conversations.create_conversation(f"Bench conversation {conv + 1}", created_at=base + conv * 86400)
        items = []
        topic = int(rng.integers(n_topics))
        for i in range(k):
            if i % 12 == 0:
                topic = int(rng.integers(n_topics))
            v = centers[topic] + rng.normal(scale=0.6 / np.sqrt(dim), size=dim).astype(np.float32)
            v /= np.linalg.norm(v)
            w = topic_words[topic]
            items.append(
                {
                    "user_text": f"Can we talk about {w[0]} and {w[1]} again? Page {done + i}: I keep thinking about "
                    f"{w[2]} and {rng.choice(WORDS)}.",
                    "assistant_text": f"Sure. About {w[0]}: {w[3]} and {w[4]} matter most; {rng.choice(WORDS)} too.",
                    "timestamp": base + conv * 86400 + i * 300.0,
                    "embedding": v,
                }
            )
        store.intake.add_pages(cid, items)
        done += k
        conv += 1
        if conv % 25 == 0:
            el = time.perf_counter() - t0
            print(
                f"  built {done:,}/{n:,} pages in {el:.0f} s (≈{el / done * (n - done):.0f} s left)",
                file=sys.stderr,
                flush=True,
            )
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
        self.gaps: list[tuple[float, str]] = []  # (gap, phase) while browsing (after the first rows painted)
        self.open_gaps: list[float] = []  # while the window opens
        self.cpu_gaps: list[tuple[float, str]] = []
        self.phase = "open"
        self._last = None
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        self.timer.start()

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        gap = (now - self._last) * 1000.0
        if self.phase == "open":
            self.open_gaps.append(gap)
        else:
            self.gaps.append((gap, self.phase))
            # the UI thread's own CPU time in this gap: what our code cost, whatever else the machine runs
            self.cpu_gaps.append(((cpu - self._last_cpu) * 1000.0, self.phase))
        self._last, self._last_cpu = now, cpu

    def stop(self) -> None:
        self.timer.stop()


class _FirstPaint:
    def __init__(self, t0: float):
        from PySide6.QtCore import QObject

        outer = self

        class F(QObject):
            def eventFilter(self, obj, event):
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
    from ui.inspector.tabs.pages import PagesModel

    import_ms = (time.perf_counter() - t_imp) * 1000
    probe = _Probe()
    result: dict = {}

    class RowsPainted(QObject):
        def __init__(self):
            super().__init__()
            self.at = None
            self.t0 = 0.0
            self.model = None

        def eventFilter(self, obj, event):
            if (
                event.type() == QEvent.Type.Paint
                and self.at is None
                and self.model is not None
                and self.model.rowCount()
                and self.model.peek(0) is not None
            ):
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

    action_at = {"t": time.perf_counter()}

    def act(fn):
        """A step that does something the user would do, and notes when."""

        def step():
            action_at["t"] = time.perf_counter()
            fn()
            return True

        return step

    def wait_loaded(label: str, timeout: float = 60.0):
        def step():
            if model.ready and not model.is_loading() and model.peek(max(0, table.rowAt(0))) is not None:
                if label:
                    sort_ms[label] = round((time.perf_counter() - action_at["t"]) * 1000, 1)
                return True
            return time.perf_counter() - action_at["t"] > timeout

        return step

    def scroll_to(v_fn, phase):
        def step():
            probe.phase = f"pages: {phase}"
            sb.setValue(int(v_fn()))
            return True

        return step

    def sort_by(key: str, desc: bool):
        def do():
            from PySide6.QtCore import Qt

            probe.phase = f"pages: sort {key} {'desc' if desc else 'asc'}"
            table.horizontalHeader().setSortIndicator(
                model.column_index(key), Qt.SortOrder.DescendingOrder if desc else Qt.SortOrder.AscendingOrder
            )

        return act(do)

    steps.append(wait_loaded(""))
    steps.append(lambda: (setattr(probe, "phase", "pages: idle"), True)[1])
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

    # a text filter (LIKE over 100k rows, in the worker) and back; the search box waits 300 ms for typing
    def set_search(text):
        def do():
            probe.phase = f"pages: filter {text!r}"
            panel.pages.search.setText(text)

        return act(do)

    steps.append(set_search("guitar"))
    steps.append(lambda: model.filters.get("text") == "guitar")
    steps.append(wait_loaded("filter 'guitar' (incl. 300 ms typing pause)"))
    steps.append(set_search(""))
    steps.append(lambda: "text" not in model.filters)
    steps.append(wait_loaded("filter cleared (incl. 300 ms typing pause)"))
    # the segments tab (not part of the pages-table target): heat-ordered table + charts, then a sort
    from PySide6.QtCore import Qt

    seg_model = panel.segments.model

    def seg_loaded(label):
        def step():
            if seg_model.ready and not seg_model.is_loading() and panel.worker.idle:
                sort_ms[label] = round((time.perf_counter() - action_at["t"]) * 1000, 1)
                return True
            return False

        return step

    steps.append(act(lambda: (setattr(probe, "phase", "segments tab: open"), panel.show_tab("segments"))))
    steps.append(seg_loaded("segments tab: open (heat order, charts, detail)"))
    steps.append(
        act(
            lambda: (
                setattr(probe, "phase", "segments tab: sort"),
                panel.segments.table.horizontalHeader().setSortIndicator(
                    seg_model.column_index("n_visit"), Qt.SortOrder.DescendingOrder
                ),
            )
        )
    )
    steps.append(seg_loaded("segments tab: sort by N_visit"))

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
    page_gaps = sorted(g for g, ph in probe.gaps if ph.startswith("pages"))
    seg_gaps = sorted(g for g, ph in probe.gaps if ph.startswith("segments"))
    worst = sorted(probe.gaps, reverse=True)[:6]

    def stall(gs):
        return round(max(0.0, (gs[-1] if gs else 0.0) - PROBE_MS), 1)

    result.update(
        {
            "pages": model.rowCount() if not model.filters else None,
            "import_ms": round(import_ms, 1),
            "construct_ms": round(construct_ms, 1),
            "first_paint_ms": round(fp.at * 1000, 1) if fp.at is not None else None,
            "first_rows_painted_ms": round(rows_painted.at * 1000, 1) if rows_painted.at is not None else None,
            "longest_ui_stall_ms": stall(page_gaps),
            "longest_ui_stall_note": "pages table: scrolling, jumping, sorting by each column both ways, filtering",
            "longest_ui_stall_while_opening_ms": round(max([0.0] + [g - PROBE_MS for g in probe.open_gaps]), 1),
            "p99_probe_gap_ms": round(page_gaps[int(len(page_gaps) * 0.99) - 1], 1) if page_gaps else None,
            "longest_ui_thread_cpu_between_ticks_ms": round(
                max([0.0] + [c for c, ph in probe.cpu_gaps if ph.startswith("pages")]), 1
            ),
            "segments_tab_longest_ui_stall_ms": stall(seg_gaps),
            "worst_probe_gaps_ms": [[round(g, 1), ph] for g, ph in worst],
            "probe_ticks": len(probe.gaps),
            "steps_done": state["i"],
            "steps_total": len(steps),
            "rows_visible_after_ms": sort_ms,
            "worker_slowest_requests_ms": sorted(
                ((round(s * 1000, 1), label) for label, s in panel.worker.timings), reverse=True
            )[:5],
        }
    )
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
    try:
        out["machine"] = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}
    except OSError:  # pragma: no cover - no getloadavg on this platform
        pass
    out["ok"] = bool(
        out.get("first_paint_ms") is not None
        and out["first_paint_ms"] <= TARGET_FIRST_PAINT_MS
        and out["longest_ui_stall_ms"] <= TARGET_STALL_MS
        and out["steps_done"] == out["steps_total"]
    )
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
