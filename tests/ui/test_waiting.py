"""Honest waiting: a reply queued behind memory work on the model's thread says so ("Waiting for memory
work…", not a silent "processing"), the memory work gives way, and the reply's time to first token is
counted from the moment the user sent, the wait included (the model's own clock started after it).

The memory job is a real one (a busy topic read for the profile by the bundled model through the
scheduler); only its JSON completion is held on an event first, as a long prompt evaluation that no token
check can cut short would be: the test is about what the reply waits for, not about the model.
"""

from __future__ import annotations

import threading
import time

from tests.ui.conftest import TURN_TIMEOUT_MS


class HeldJsonModel:
    """The bundled model, whose JSON completions (the memory jobs' one use of it) wait for `gate` first."""

    def __init__(self, model, gate: threading.Event):
        self._model = model
        self.gate = gate
        self.started = threading.Event()

    def __getattr__(self, name):
        return getattr(self._model, name)

    def complete_json(self, *args, **kwargs):
        self.started.set()
        assert self.gate.wait(TURN_TIMEOUT_MS / 1000)
        return self._model.complete_json(*args, **kwargs)


def test_a_reply_behind_a_memory_job_says_so_and_its_first_token_counts_the_wait(make_window, chat, qtbot, chat_model):
    from app.context import AppContext
    from ui.window.turns import PENDING_MEMORY

    ctx = AppContext.create()
    ctx.settings.chat.max_tokens = 8
    ctx.settings.ui.prepare_replies = False  # no prompt warming on the model's thread: only the memory job
    ctx.settings.memory = {"stm_capacity": 1, "tau": 1.0}  # the second exchange makes a topic busy at once
    gate = threading.Event()
    held = HeldJsonModel(chat_model, gate)
    ctx._chat_model = held
    win = make_window(ctx=ctx, share_model=False)
    chat.send(win, "I keep bees on the roof of my flat in Lyon.")
    chat.send(win, "My bees made twelve jars of honey this summer.")
    # the busy topic is read for the profile once chat has been idle a moment: the job holds the thread
    qtbot.waitUntil(held.started.is_set, timeout=TURN_TIMEOUT_MS)
    sched = win.backend.scheduler
    assert sched.memory_job_running
    chat.send(win, "How many jars of honey did my bees make?", wait=False)
    turn = win.backend.turn
    reply = win.chat_view.last("assistant")
    qtbot.waitUntil(lambda: reply.pending and reply.status_label.text().startswith(PENDING_MEMORY), timeout=10_000)
    assert turn.began_at is None and sched.chat_waiting  # queued; the memory thread starts nothing meanwhile
    qtbot.waitUntil(lambda: time.perf_counter() - turn.started_at >= 1.0, timeout=10_000)  # a wait to measure
    released = time.perf_counter()
    gate.set()  # the job's completion returns: it sees the chat waiting, gives way and stays pending
    done = chat.wait_turn(win)
    assert done is turn and turn.result is not None and turn.result.status == "complete", turn.error
    stats = turn.result.stats
    waited = released - turn.started_at
    assert stats["queued_s"] >= waited - 0.05, stats
    assert stats["time_to_first_token_s"] >= stats["queued_s"] + stats["model_first_token_s"] - 0.01, stats
    assert stats["time_to_first_token_s"] >= waited
    assert sched.jobs_deferred >= 1  # the memory job gave way to the reply
    # the reply says how long the first token took from sending, and that it waited
    shown = reply.stats_label.text()
    assert (
        f"first token {stats['time_to_first_token_s']:.1f} s" in shown and f"waited {stats['queued_s']:.1f} s" in shown
    )
    # the stored reply keeps the same figures (the chat shows them again when reopened)
    stored = win.backend.db(lambda s: s.conversations.get_message(turn.result.assistant_message_id)).result(timeout=30)
    assert stored.meta["stats"]["time_to_first_token_s"] == stats["time_to_first_token_s"]
