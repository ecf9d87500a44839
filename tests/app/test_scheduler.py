"""The scheduler: chat on the LLM thread, memory jobs in the background, events reported."""

from __future__ import annotations

import threading
import time

import pytest

from app.chat.agent import ChatAgent
from app.runtime.scheduler import PRIORITY_NORMAL, Scheduler
from memory_core import MemoryParams, MemoryStore


def _hiking_turns(store, model):
    """Four related turns: their segment gets hot enough to queue an LLM promotion job."""
    agent = ChatAgent(store, model, max_tokens=8)
    cid = agent.new_conversation()
    for text in [
        "I love hiking in the Alps.",
        "My favourite hike is the Eiger trail.",
        "Hiking boots matter a lot.",
        "I hike every weekend in summer.",
    ]:
        agent.send(cid, text)
        store.jobs.run_pending(allow_llm=False, exclude_kinds=("promote_segment",))
    return cid


@pytest.fixture
def scheduler(tmp_path, embedder, chat_model):
    db = tmp_path / "sched.sqlite3"

    def open_store(llm=None):
        return MemoryStore.open(
            db,
            embedder.embed,
            embed_model_id=embedder.model_id,
            dim=embedder.dim,
            params=MemoryParams.from_flat(stm_capacity=2, tau=1.0),
            llm=llm,
        )

    events, jobs = [], []
    s = Scheduler(
        open_store=open_store,
        get_model=lambda: chat_model,
        on_event=events.append,
        on_jobs=jobs.append,
        idle_s=0.2,
        poll_s=0.1,
    )
    s.events, s.job_counts, s.open = events, jobs, open_store
    s.start()
    yield s
    s.stop()


def test_chat_runs_on_llm_thread_and_memory_job_in_background(scheduler):
    threads = {}

    def turn(store, model):
        threads["chat"] = threading.current_thread().name
        agent = ChatAgent(store, model, max_tokens=12)
        cid = agent.new_conversation()
        return agent.send(cid, "I keep bees in my garden.")

    result = scheduler.submit(turn).result(timeout=120)
    assert threads["chat"] == "mnemo-llm"
    assert result.status == "complete"
    scheduler.notify_jobs()
    assert scheduler.wait_idle(timeout=60)
    probe = scheduler.open()
    try:
        assert probe.pages.count_pages() == 1
    finally:
        probe.close()
    # the events and the job count are told by the memory thread after its commit, which another
    # connection already sees: wait for them (a busy machine delays that thread)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
        any(e.kind == "page_added" for e in scheduler.events) and scheduler.job_counts and scheduler.job_counts[-1] == 0
    ):
        time.sleep(0.05)
    assert any(e.kind == "page_added" for e in scheduler.events)
    assert scheduler.job_counts and scheduler.job_counts[-1] == 0


def test_chat_tasks_jump_the_queue(scheduler):
    order = []
    gate = threading.Event()

    def blocker(store, model):
        gate.wait(10)
        order.append("blocker")

    scheduler.submit(blocker, priority=PRIORITY_NORMAL)
    time.sleep(0.2)  # the blocker is running now
    background = scheduler.submit(lambda s, m: order.append("background"), priority=PRIORITY_NORMAL)
    chat = scheduler.submit(lambda s, m: order.append("chat"))
    gate.set()
    chat.result(timeout=10)
    background.result(timeout=10)
    assert order == ["blocker", "chat", "background"]


def test_task_errors_reach_the_caller(scheduler):
    def broken(store, model):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        scheduler.submit(broken).result(timeout=10)
    # the thread survives
    assert scheduler.submit(lambda s, m: 42).result(timeout=10) == 42


def test_llm_memory_jobs_run_on_llm_thread_when_idle(scheduler):
    scheduler.submit(_hiking_turns).result(timeout=300)
    assert scheduler.wait_idle(timeout=300, include_llm_jobs=True)
    probe = scheduler.open()
    try:
        done = [j for j in probe.jobs.list_jobs(status="done") if j.kind == "promote_segment"]
        assert done, "no promotion ran"
        assert probe.jobs.pending() == 0
        # what the user said became persona or knowledge (the bundled model's own answer, empty lists or
        # inventions, is not stated by the turns: the LLM-free path stands in for it)
        items = [f"{t.dimension}: {t.value}" for t in probe.persona.list_traits()] + [
            k.text for k in probe.persona.list_knowledge()
        ]
        assert any("hik" in item.lower() for item in items), items
        # the store knows which model answered (provenance; rejections are counted per model)
        assert scheduler.llm_store.promotion.llm_model_id == scheduler.model.model_id
        for e in probe.event_log.events(limit=1000):
            if e.kind == "llm_fallback":
                assert e.detail["model"] == scheduler.model.model_id
    finally:
        probe.close()


def test_a_chat_task_preempts_a_generating_memory_job_which_runs_again_later(scheduler):
    """An LLM memory job is cut short within a token when a chat task arrives; it stays pending
    (no attempt counted, nothing half-stored) and completes at the next idle moment."""
    scheduler.submit(_hiking_turns).result(timeout=300)
    deadline = time.monotonic() + 120
    while scheduler._job_cancel is None and time.monotonic() < deadline:  # wait until a job generates
        time.sleep(0.005)
    assert scheduler._job_cancel is not None, "no LLM memory job started"
    time.sleep(0.05)
    t0 = time.monotonic()
    answer = scheduler.submit(
        lambda store, model: "".join(model.stream([{"role": "user", "content": "Say hi."}], max_tokens=4))
    ).result(timeout=120)
    assert answer is not None
    waited = time.monotonic() - t0
    assert scheduler.jobs_deferred == 1, f"the job was not preempted (chat waited {waited:.2f} s)"
    probe = scheduler.open()
    try:
        job = next(j for j in probe.jobs.list_jobs() if j.kind == "promote_segment")
        assert job.status == "done" or (job.status == "pending" and job.attempts == 0)  # not counted as a failure
        if job.status == "pending":  # a cut-short answer is not judged (a finished one may fall back)
            assert not [
                e for e in probe.event_log.events(limit=1000) if e.kind == "llm_fallback"
            ]  # nothing half-stored
    finally:
        probe.close()
    assert scheduler.wait_idle(timeout=300, include_llm_jobs=True)
    probe = scheduler.open()
    try:
        done = [j for j in probe.jobs.list_jobs(status="done") if j.kind == "promote_segment"]
        assert done and probe.jobs.pending() == 0
        assert all(j.attempts == 1 for j in done)
    finally:
        probe.close()


def test_the_memory_thread_loads_the_page_index_at_start(scheduler):
    """The in-memory page matrix (seconds to load at 100k pages) is loaded in the background at
    start, so the first reply does not pay for it."""
    probe = scheduler.open()
    try:
        cache = probe.retrieval._page_cache  # shared by every connection to this file in the process
        deadline = time.monotonic() + 30
        while cache.seq < 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cache.seq >= 0
    finally:
        probe.close()
