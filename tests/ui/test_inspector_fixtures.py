"""Fixtures and helpers shared by the memory inspector's GUI tests (no tests of its own).

The store is filled by the real memory core (`add_pages`, STM → MTM paging, segmenting, heat,
and the LLM-free promotion into the persona via `run_pending`) with the real ONNX embedder.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import pytest
from PySide6.QtCore import qInstallMessageHandler
from PySide6.QtTest import QAbstractItemModelTester

TOPICS = {
    "hiking": [
        (
            "I love hiking in the Alps; last weekend the mountain views were amazing.",
            "The Alps are beautiful in summer; which trail did you take?",
        ),
        (
            "We took the trail to the glacier above Zermatt, about six hours of hiking.",
            "A six hour hike to the glacier is a serious day in the mountains.",
        ),
        (
            "My hiking boots gave me blisters on the way down the mountain.",
            "Blisters are common with new boots; break them in on shorter hikes first.",
        ),
        (
            "Next month I want to hike the Tour du Mont Blanc with my sister.",
            "The Tour du Mont Blanc takes about ten days of hiking; book the huts early.",
        ),
        (
            "I bought new trekking poles for the mountain trip.",
            "Trekking poles save your knees on long descents in the mountains.",
        ),
        (
            "The weather forecast for the Alps hike says thunderstorms in the afternoon.",
            "Start hiking early so you are off the ridges before the storms.",
        ),
    ],
    "cat": [
        (
            "I have a cat named Luna and she knocked a glass off the kitchen table again.",
            "Cats love pushing things off tables; Luna is testing gravity.",
        ),
        (
            "Luna only eats salmon flavoured cat food now.",
            "Picky cats often settle on one flavour; salmon is a favourite.",
        ),
        (
            "I took Luna to the vet because she was sneezing.",
            "Sneezing cats often have a mild cold; I hope the vet visit went well.",
        ),
        (
            "The vet said Luna is healthy but a bit overweight.",
            "An overweight cat can slim down with measured meals and more play.",
        ),
        (
            "Luna sleeps on my keyboard whenever I try to work.",
            "Cats seek warm keyboards; a heated cat bed near the desk may help.",
        ),
        (
            "I bought Luna a laser pointer and a feather toy.",
            "Play with the feather toy daily to keep your cat active.",
        ),
    ],
    "cooking": [
        (
            "I work as a nurse, and on my day off I made fresh pasta from scratch with eggs and flour.",
            "Fresh pasta is rewarding; knead the dough until it is smooth.",
        ),
        (
            "My tomato sauce for the pasta came out too acidic.",
            "A pinch of sugar or some butter balances an acidic tomato sauce.",
        ),
        (
            "I am planning a pasta dinner party for eight friends on Saturday.",
            "For eight guests make about one kilo of pasta and two sauces.",
        ),
        (
            "I want to learn how to make ravioli filled with ricotta and spinach.",
            "Ricotta and spinach ravioli need a dry filling so the pasta does not tear.",
        ),
        (
            "The pasta machine I ordered finally arrived today.",
            "A pasta machine makes rolling thin sheets much easier.",
        ),
        (
            "My friends loved the lasagna I cooked at the dinner party.",
            "Lasagna is a great dish for a party; glad your friends enjoyed it.",
        ),
    ],
    "spanish": [
        (
            "My name is Sam and I live in Lyon; I started learning Spanish with an app every morning.",
            "Daily practice is the best way to learn Spanish vocabulary.",
        ),
        (
            "Spanish verb conjugations in the past tense confuse me.",
            "The preterite and imperfect tenses take time; practise with short stories.",
        ),
        (
            "I booked a Spanish tutor for conversation practice on Tuesdays.",
            "Speaking with a tutor will speed up your Spanish a lot.",
        ),
        (
            "I am planning to travel to Madrid next spring to practise my Spanish.",
            "Madrid is a great place to practise Spanish; try staying with a host family.",
        ),
        (
            "My Spanish tutor says my pronunciation of the rolled r is improving.",
            "Rolling the r in Spanish takes practice; keep going.",
        ),
        (
            "I watched a Spanish film without subtitles and understood half of it.",
            "Understanding half a Spanish film without subtitles is real progress.",
        ),
    ],
}


def topic_items(topic: str, start: float, rounds: int = 1) -> list[dict]:
    items = []
    k = 0
    for r in range(rounds):
        for u, a in TOPICS[topic]:
            suffix = "" if r == 0 else f" (again, round {r + 1})"
            items.append({"user_text": u + suffix, "assistant_text": a, "timestamp": start + k * 600.0})
            k += 1
    return items


def fill_store(store, *, rounds: int = 2, promote: bool = True) -> dict[str, int]:
    """Four conversations, one per topic (12 pages each); returns topic -> conversation id."""
    convs = {}
    base = 1_700_000_000.0
    for i, topic in enumerate(TOPICS):
        cid = store.conversations.create_conversation(f"About {topic}", created_at=base + i * 86400)
        store.intake.add_pages(cid, topic_items(topic, base + i * 86400, rounds))
        convs[topic] = cid
    if promote:
        store.jobs.run_pending(allow_llm=False)
    return convs


def random_items(n: int, dim: int, start: float = 1_600_000_000.0, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        v = rng.normal(size=dim).astype(np.float32)
        out.append(
            {
                "user_text": f"user line {i} about item{i % 37} and thing{i % 11}",
                "assistant_text": f"assistant reply {i}",
                "timestamp": start + i * 60.0,
                "embedding": v / np.linalg.norm(v),
            }
        )
    return out


@pytest.fixture
def ctx(mnemo_dirs, embedder):
    """An AppContext on temp folders that shares the session's real ONNX embedder."""
    from app.context import AppContext

    c = AppContext.create()
    c._embedder = embedder
    c.settings.memory["stm_capacity"] = 3  # small STM: most test pages reach mid-term memory
    return c


@pytest.fixture
def store(ctx):
    s = ctx.open_store()
    yield s
    s.close()


@pytest.fixture
def filled(store):
    return fill_store(store)


@pytest.fixture
def panel_factory(qtbot, ctx):
    """Open the inspector as a window of its own; closes it (and its worker) after the test."""
    from ui.inspector import InspectorWindow

    windows = []

    def make(tab: str | None = None):
        w = InspectorWindow(ctx)
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        p = w.panel
        assert p.wait_idle()
        if tab:
            p.show_tab(tab)
            assert p.wait_idle()
        return p

    yield make
    for w in windows:
        w.panel.shutdown()


def settle(panel, timeout: float = 20.0) -> None:
    """Wait until the panel's worker delivered everything (and debounced refreshes fired)."""
    deadline = time.monotonic() + timeout
    assert panel.wait_idle(timeout)
    while panel._refresh_timer.isActive() or panel._poll_soon.isActive():
        if time.monotonic() > deadline:
            raise AssertionError("the inspector did not settle")
        panel.worker.wait_idle(0.05)
    assert panel.wait_idle(timeout)


def load_all(model, panel) -> list:
    """Every record of a lazy model, in row order (small stores)."""
    for row in range(model.rowCount()):
        model.record(row)
        if row % model.BLOCK == 0:
            panel.wait_idle()
    panel.wait_idle()
    recs = [model.peek(r) for r in range(model.rowCount())]
    assert None not in recs
    return recs


@contextmanager
def model_tester(*models):
    """Run QAbstractItemModelTester on each model for the whole block; fail on any of its reports."""
    messages: list[str] = []

    def handler(mode, context, message):
        messages.append(message)

    prev = qInstallMessageHandler(handler)
    testers = []
    try:
        for m in models:
            testers.append(QAbstractItemModelTester(m, QAbstractItemModelTester.FailureReportingMode.Warning))
        yield testers
    finally:
        qInstallMessageHandler(prev)
    fails = [m for m in messages if "FAIL" in m]
    assert not fails, "QAbstractItemModelTester: " + "\n".join(fails[:10])
