"""`ui.tasks`: background tasks whose callbacks run on the UI thread (real Qt, offscreen)."""

from __future__ import annotations

import threading

from memory_core import MemoryStore
from ui.tasks import UiWorker


def _worker(tmp_path, embedder):
    return UiWorker(
        lambda: MemoryStore.open(
            tmp_path / "ui.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
        ),
        name="t-ui",
    )


def test_callbacks_run_on_the_ui_thread_and_busy_is_reported(qtbot, tmp_path, embedder):
    worker = _worker(tmp_path, embedder)
    busy, got = [], []
    worker.busy_changed = busy.append
    main = threading.current_thread()
    worker.submit(
        lambda s: s.conversations.create_conversation("x"), lambda cid: got.append((cid, threading.current_thread()))
    )
    qtbot.waitUntil(lambda: worker.idle, timeout=30_000)
    assert got and got[0][1] is main
    assert busy == [True, False]
    worker.stop(10)


def test_a_failure_without_its_own_handler_goes_to_the_sink(qtbot, tmp_path, embedder):
    worker = _worker(tmp_path, embedder)
    sunk, own = [], []
    worker.on_error = lambda label, exc: sunk.append((label, type(exc)))
    worker.submit(lambda s: 1 / 0, label="divide")
    worker.submit(lambda s: {}["x"], on_error=own.append)
    assert worker.wait_idle(30)
    assert sunk == [("divide", ZeroDivisionError)]
    assert isinstance(own[0], KeyError)
    assert worker.last_error.startswith("KeyError")
    worker.stop(10)


def test_after_stop_no_callback_runs(qtbot, tmp_path, embedder):
    worker = _worker(tmp_path, embedder)
    started, gate, got = threading.Event(), threading.Event(), []
    worker.submit(lambda s: (started.set(), gate.wait(30)), got.append)
    assert started.wait(30)
    worker.stop(0)  # the thread is still held by the task
    gate.set()
    worker.tasks.join(30)
    qtbot.waitUntil(lambda: worker.idle, timeout=30_000)  # its delivery came, and skipped the callback
    assert got == []
    assert worker.submit(lambda s: 1).cancelled()


def test_a_worker_without_a_store_delivers_late_when_asked(qtbot):
    """A dialog's worker (no store of its own) stopped as the dialog closes: the task running still
    reports back, on the UI thread, and nothing more is taken."""
    worker = UiWorker(None, name="t-dialog")
    started, gate, got = threading.Event(), threading.Event(), []
    main = threading.current_thread()
    worker.submit(
        lambda resource: (started.set(), gate.wait(30), resource)[2],
        lambda r: got.append((r, threading.current_thread())),
    )
    assert started.wait(30)
    worker.stop(0, drop_pending=False, deliver_late=True)
    gate.set()
    qtbot.waitUntil(lambda: worker.idle, timeout=30_000)
    assert got == [(None, main)]
    assert worker.submit(lambda s: 1).cancelled()


def test_on_own_store_opens_a_store_for_the_call_and_closes_it(qtbot):
    from ui.tasks import on_own_store

    class Store:
        closed = False

        def close(self):
            self.closed = True

    made: list[Store] = []

    def open_store():
        made.append(Store())
        return made[-1]

    worker = UiWorker(None, name="t-own-store")
    got = []
    worker.submit(on_own_store(open_store, lambda s: s), got.append)
    worker.submit(on_own_store(open_store, lambda s: 1 / 0), on_error=got.append)
    assert worker.wait_idle(30)
    assert got[0] is made[0] and isinstance(got[1], ZeroDivisionError)
    assert len(made) == 2 and all(s.closed for s in made)
    worker.stop(10)
