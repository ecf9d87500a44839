"""`app.runtime.tasks.TaskQueue`, the one background-task mechanism, on a real store connection."""

from __future__ import annotations

import threading

import pytest

from app.runtime.tasks import TaskQueue
from memory_core import MemoryStore


@pytest.fixture
def open_store(tmp_path, embedder):
    opened = []

    def open_():
        store = MemoryStore.open(
            tmp_path / "tasks.sqlite3", embedder.embed, embed_model_id=embedder.model_id, dim=embedder.dim
        )
        opened.append(store)
        return store

    open_.opened = opened
    return open_


def test_tasks_run_in_order_on_one_thread_and_one_connection(open_store):
    q = TaskQueue("t-order", open_resource=open_store)
    seen = []
    futures = [q.submit(lambda s, i=i: seen.append((i, threading.current_thread().name, id(s)))) for i in range(5)]
    for f in futures:
        f.result(timeout=30)
    q.stop(10)
    assert [i for i, _, _ in seen] == list(range(5))
    assert {name for _, name, _ in seen} == {"t-order"}
    assert len({sid for _, _, sid in seen}) == 1 and len(open_store.opened) == 1


def test_results_and_errors_reach_their_callbacks_through_deliver(open_store):
    delivered_on = []

    def deliver(callback):
        delivered_on.append(threading.current_thread().name)
        callback()

    q = TaskQueue("t-cb", open_resource=open_store, deliver=deliver)
    got, failed = [], []
    cid = q.submit(lambda s: s.conversations.create_conversation("x"), got.append, failed.append).result(timeout=30)
    boom = q.submit(lambda s: 1 / 0, got.append, failed.append)
    with pytest.raises(ZeroDivisionError):
        boom.result(timeout=30)
    q.stop(10)
    assert got == [cid] and isinstance(failed[0], ZeroDivisionError)
    assert delivered_on == ["t-cb", "t-cb"]


def test_lower_priority_numbers_go_first(open_store):
    q = TaskQueue("t-prio", open_resource=open_store)
    gate, order = threading.Event(), []
    q.submit(lambda s: gate.wait(30))  # holds the thread while the others queue up
    late = q.submit(lambda s: order.append("normal"), priority=5)
    first = q.submit(lambda s: order.append("chat"), priority=0)
    gate.set()
    late.result(timeout=30)
    first.result(timeout=30)
    q.stop(10)
    assert order == ["chat", "normal"]


def test_a_task_no_longer_wanted_is_skipped(open_store):
    q = TaskQueue("t-skip", open_resource=open_store)
    ran, skipped = [], []
    q.submit(lambda s: ran.append(1), wanted=lambda: False, on_skip=lambda: skipped.append(1)).result(timeout=30)
    q.stop(10)
    assert ran == [] and skipped == [1]


def test_wake_runs_the_idle_work_on_the_resource(open_store):
    rounds = []
    woke = threading.Event()

    def idle(store):
        rounds.append(store)
        woke.set()

    q = TaskQueue("t-idle", open_resource=open_store, on_idle=idle)
    q.start()
    q.wake()
    assert woke.wait(30)
    q.stop(10)
    assert rounds and rounds[0] is open_store.opened[0]


@pytest.mark.parametrize("drop", [False, True])
def test_stop_finishes_or_drops_what_is_queued_and_closes_the_resource(open_store, drop):
    q = TaskQueue("t-stop", open_resource=open_store)
    started, gate, ran = threading.Event(), threading.Event(), []
    q.submit(lambda s: (started.set(), gate.wait(30)))
    queued = q.submit(lambda s: ran.append(1))
    assert started.wait(30)
    q.stop(0, drop_pending=drop)  # asks the thread to end; it is still held by the first task
    gate.set()
    q.join(30)
    assert not q.running
    assert ran == ([] if drop else [1])
    assert queued.done() is (not drop)
    assert q.submit(lambda s: 1).cancelled()  # nothing runs after stop
    assert q.resource is None  # closed with the thread
