"""UI event-loop latency while a reply streams and memory jobs run: `python -m tests.bench.ui_latency`.

Opens the real main window offscreen (real store, embedder and bundled GGUF, temp folders),
queues a batch of memory jobs (add_page with a small short-term capacity, so pages are
embedded, paged to mid-term memory and segmented on the memory thread), sends a message
and, until the reply is finished, measures the event loop with a QTimer probe firing every
`--probe-ms`: a stall is how much later than due a probe tick arrives. Prints JSON with the
max and p99 stall (target: at most 50 ms) for the whole turn and for the streaming part, and
while the window prepares the prompt of a long chat it opened (the model processing it in the
background while the user reads).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as ui.launcher does, before numpy loads

TARGET_MS = 50.0
PROMPT = "Tell me a long story about a lighthouse keeper who collects old maps. Use several paragraphs."
TOPICS = [
    "hiking in the Alps",
    "baking sourdough bread",
    "learning the cello",
    "a trip to Kyoto",
    "repairing a bicycle",
    "planting tomatoes",
    "reading Dostoevsky",
    "training for a marathon",
    "writing a Rust compiler",
    "birdwatching at dawn",
]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[k]


class Probe:
    """A repeating QTimer; records how late each tick is."""

    def __init__(self, interval_ms: int):
        from PySide6.QtCore import Qt, QTimer

        self.interval = interval_ms / 1000.0
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self.ticks: list[tuple[float, float]] = []  # (time, stall seconds)
        self._last = None

    def start(self) -> None:
        self._last = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.ticks.append((now, max(0.0, now - self._last - self.interval)))
        self._last = now

    def stalls(self, start: float = 0.0, end: float = float("inf")) -> list[float]:
        return [s * 1000 for t, s in self.ticks if start <= t <= end]


def _summary(stalls: list[float]) -> dict:
    return {
        "samples": len(stalls),
        "max_stall_ms": round(max(stalls, default=0.0), 2),
        "p99_stall_ms": round(_percentile(stalls, 0.99), 2),
        "p50_stall_ms": round(statistics.median(stalls), 2) if stalls else 0.0,
    }


def _time_handlers(targets) -> dict:
    """Wrap UI-thread handlers (class attributes, before the window exists) to time each call."""
    import functools

    stats: dict[str, list] = {}
    for cls, name in targets:
        original = getattr(cls, name)
        key = f"{cls.__name__}.{name}"
        stats[key] = [0, 0.0, 0.0]

        def wrapper(*a, __original=original, __key=key, **k):
            t0 = time.perf_counter()
            try:
                return __original(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                st = stats[__key]
                st[0] += 1
                st[1] = max(st[1], dt)
                st[2] += dt

        setattr(cls, name, functools.wraps(original)(wrapper))
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200, help="max tokens of the reply")
    parser.add_argument("--jobs", type=int, default=40, help="memory jobs queued when the message is sent")
    parser.add_argument("--probe-ms", type=int, default=5, help="probe timer interval")
    parser.add_argument("--turns", type=int, default=2, help="replies to measure (the first one warms the KV cache)")
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads (default: the settings default, 0 = all cores)"
    )
    parser.add_argument(
        "--switch-interval-ms",
        type=float,
        default=None,
        help="Python's GIL switch interval (default: what the app sets)",
    )
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="mnemo-ui-latency-"))
    os.environ["MNEMO_DATA_DIR"] = str(tmp / "data")
    os.environ["MNEMO_CONFIG_DIR"] = str(tmp / "config")

    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    from app.context import AppContext
    from ui import bridge
    from ui.main_window import MainWindow
    from ui.window.status import StatusRoom
    from ui.window.turns import TurnController

    handlers = _time_handlers(
        [(TurnController, name) for name in ("flush", "first_token", "turn_finished", "conversation_created")]
        + [(StatusRoom, "memory_event"), (StatusRoom, "set_jobs"), (MainWindow, "refresh_conversations")]
        + [(bridge.Backend, "_on_deliver"), (bridge.Backend, "_on_turn_done")]
    )
    from ui.app import tune_interpreter

    tune_interpreter()
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    ctx = AppContext.create()
    ctx.settings.chat.max_tokens = args.tokens
    if args.threads is not None:
        ctx.settings.chat.n_threads = args.threads
    ctx.settings.memory = {"stm_capacity": 2}
    win = MainWindow(ctx)
    win.resize(1100, 700)
    win.show()
    t_start = time.perf_counter()
    win.start_background_loading()

    def pump(cond, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            app.processEvents()
            if cond():
                return True
            time.sleep(0.002)
        return cond()

    if not pump(
        lambda: bool(win.backend.model_id or win.backend.model_error) and win.backend.store_ok is not None, 300
    ):
        print(json.dumps({"error": "the model did not load"}))
        return 2
    if win.backend.model_error:
        print(json.dumps({"error": win.backend.model_error}))
        return 2
    load_s = time.perf_counter() - t_start

    seeder = ctx.open_store()  # the benchmark's own connection, to queue memory work
    seed_cid = seeder.conversations.create_conversation("Benchmark: memory jobs")
    turns = []
    probe = Probe(args.probe_ms)
    for turn_no in range(args.turns):
        for i in range(args.jobs):
            topic = TOPICS[(i + turn_no * 3) % len(TOPICS)]
            seeder.jobs.enqueue(
                "add_page",
                {
                    "cid": seed_cid,
                    "timestamp": time.time() - 3600 + i,
                    "user_text": f"Turn {turn_no}, note {i}: I have been {topic} lately. " * 3,
                    "assistant_text": f"That sounds rewarding. Tell me more about {topic}; what did you enjoy most? "
                    * 4,
                },
            )
        pending_before = seeder.jobs.pending()
        win.backend.notify_jobs()
        probe.start()
        t_send = time.perf_counter()
        win.composer.set_text(PROMPT if turn_no == 0 else f"{PROMPT} Another one, please ({turn_no}).")
        t_call = time.perf_counter()
        win.turns.send()
        send_call_s = time.perf_counter() - t_call
        pump(lambda: not win.backend.busy, 600)
        t_end = time.perf_counter()
        probe.stop()
        turn = win.backend.turn
        pending_after = seeder.jobs.pending()
        first = turn.first_token_at or t_end
        stats = (turn.result.stats if turn.result else {}) or {}
        turns.append(
            {
                "turn": turn_no + 1,
                "status": turn.result.status if turn.result else f"failed: {turn.error}",
                "reply_tokens": stats.get("completion_tokens"),
                "tokens_per_s": stats.get("tokens_per_s"),
                "time_to_first_token_s": round(first - t_send, 3),
                "turn_s": round(t_end - t_send, 3),
                "send_call_ms": round(send_call_s * 1000, 1),
                "memory_jobs_pending_at_send": pending_before,
                "memory_jobs_done_during_turn": pending_before - pending_after,
                "whole_turn": _summary(probe.stalls(t_send, t_end)),
                "prompt_processing": _summary(probe.stalls(t_send, first)),
                "streaming": _summary(probe.stalls(first, t_end)),
                "worst_stalls_ms_at_s": [
                    [round(st * 1000, 1), round(t - t_send, 2)]
                    for t, st in sorted(probe.ticks, key=lambda x: -x[1])[:5]
                ],
            }
        )
        probe.ticks.clear()
    # Opening a long chat: the window lets the model process its prompt prefix in the background
    # (Backend.warm) while the user reads; the event loop must stay as responsive as while streaming.
    long_cid = seeder.conversations.create_conversation("Benchmark: a long chat")
    for i in range(8):
        seeder.conversations.add_message(
            long_cid, "user", f"Question {i}: how do gardens handle drought in region {i}?"
        )
        seeder.conversations.add_message(
            long_cid, "assistant", "Gardens adapt to drought with mulch, deep watering, native plants and shade. " * 6
        )
    pump(lambda: win.backend.last_warm is None or win.backend.last_warm.done(), 120)  # the after-reply one
    before = win.backend.last_warm
    probe.start()
    t_open = time.perf_counter()
    win.open_conversation(long_cid)
    # the chat on screen (its messages are built on the UI thread, once), then the model warming up
    pump(lambda: len(win.chat_view.messages()) == 16 and win.backend.last_warm is not before, 60)
    t_shown = time.perf_counter()
    pump(lambda: win.backend.last_warm.done() and time.perf_counter() - t_shown > 0.5, 300)
    t_warmed = time.perf_counter()
    probe.stop()
    warming = {
        "warm_tokens": win.backend.last_warm.result() if win.backend.last_warm.done() else None,
        "seconds": round(t_warmed - t_shown, 2),
        **_summary(probe.stalls(t_shown + 0.05, t_warmed)),
        "showing_the_chat": {"seconds": round(t_shown - t_open, 3), **_summary(probe.stalls(t_open, t_shown + 0.05))},
    }
    seeder.close()
    win.close()
    app.processEvents()

    phases = [t["whole_turn"] for t in turns] + [warming, warming["showing_the_chat"]]
    worst_max = max(p["max_stall_ms"] for p in phases)
    worst_p99 = max(p["p99_stall_ms"] for p in phases)
    report = {
        "benchmark": "ui_latency",
        "probe_interval_ms": args.probe_ms,
        "target_ms": TARGET_MS,
        "max_stall_ms": worst_max,
        "p99_stall_ms": worst_p99,
        "pass": worst_max <= TARGET_MS,
        "model": win.backend.model_id,
        "model_and_store_load_s": round(load_s, 2),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "llama_threads": ctx.settings.chat.n_threads,
        "gil_switch_interval_ms": round(sys.getswitchinterval() * 1000, 3),
        "ui_handlers": {
            k: {"calls": v[0], "max_ms": round(v[1] * 1000, 2), "total_ms": round(v[2] * 1000, 1)}
            for k, v in sorted(handlers.items())
        },
        "turns": turns,
        "opening_a_long_chat": warming,
    }
    print(json.dumps(report, indent=2))
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
