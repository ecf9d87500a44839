"""The import dialog's "Who are you?" step (issue 35): a dialogue between two named people is read, then
the dialog asks which speaker, if either, is the user before anything is written; the pages record the
answer. Real widgets offscreen, the real store and embedder; grabs in /tmp/whose/ for the screenshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SHOTS = Path("/tmp/whose")


def _dialogue(sample_id="d-1", a="Caroline", b="Melanie") -> dict:
    return {
        "sample_id": sample_id,
        "qa": [],
        "conversation": {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": a, "dia_id": "D1:1", "text": "I went to the support group yesterday."},
                {"speaker": b, "dia_id": "D1:2", "text": "I painted a lake at sunrise."},
                {"speaker": a, "dia_id": "D1:3", "text": "I moved to a flat near the park."},
                {"speaker": b, "dia_id": "D1:4", "text": "My kids loved the camping trip."},
            ],
        },
    }


@pytest.fixture
def ctx(mnemo_dirs, embedder):
    from app.context import AppContext

    c = AppContext.create()
    c._embedder = embedder
    return c


def _people(ctx) -> list[dict]:
    s = ctx.open_store()
    try:
        return [p.meta.get("people") for p in s.pages.list_pages(limit=100)]
    finally:
        s.close()


def _dialog(qtbot, ctx, path):
    from ui.import_dialog import ImportDialog

    dlg = ImportDialog(ctx, path)
    qtbot.addWidget(dlg)
    dlg.show()
    dlg.start()
    qtbot.waitUntil(lambda: dlg.who.isVisible(), timeout=30_000)
    return dlg


def test_who_are_you_is_asked_and_the_answer_recorded(qtbot, ctx, tmp_path):
    path = tmp_path / "dialogue.json"
    path.write_text(json.dumps([_dialogue()]))
    dlg = _dialog(qtbot, ctx, path)
    labels = [b.text() for b in dlg.who.options]
    assert labels == ["I am Caroline", "I am Melanie", "Neither — these are other people"]
    assert "Caroline and Melanie" in dlg.who.question.text()
    assert dlg.job.phase == "asking" and _people(ctx) == []  # nothing written before the answer
    assert dlg.import_button.isVisible() and not dlg.import_button.isEnabled()  # an answer first
    SHOTS.mkdir(parents=True, exist_ok=True)
    dlg.resize(560, dlg.sizeHint().height())
    assert dlg.grab().save(str(SHOTS / "import-who-are-you.png"))
    dlg.who.options[1].click()  # "I am Melanie"
    assert dlg.import_button.isEnabled()
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000) as sig:
        dlg.import_button.click()
    job = sig.args[0]
    assert job.phase == "done" and job.report.pages_written == 2
    assert "1 conversation(s) imported" in dlg.status.text() and dlg.close_button.isVisible()
    assert not dlg.import_button.isVisible() and not dlg.who.isVisible()
    assert dlg.status.text().endswith("You are Melanie in it.")
    assert _people(ctx) == [{"user_side": "Caroline", "assistant_side": "Melanie", "me": "Melanie"}] * 2
    qtbot.waitUntil(lambda: dlg.rect().contains(dlg.close_button.geometry().translated(dlg.buttons.pos())))
    assert dlg.grab().save(str(SHOTS / "import-who-are-you-done.png"))


def test_neither_and_cancel(qtbot, ctx, tmp_path):
    """Neither: other people's conversation. Cancel at the question: nothing imported, said so."""
    path = tmp_path / "two.json"
    path.write_text(json.dumps([_dialogue(), _dialogue("d-2", "Jon", "Gina")]))
    dlg = _dialog(qtbot, ctx, path)
    assert [b.text() for b in dlg.who.options][-1] == "Neither — these are other people"
    assert len(dlg.who.options) == 5 and "2 conversations between named people" in dlg.who.question.text()
    with qtbot.waitSignal(dlg.finished_import, timeout=10_000):
        dlg.reject()  # Esc at the question
    assert dlg.job.phase == "cancelled" and dlg.status.text() == "Cancelled. Nothing was imported."
    assert _people(ctx) == []
    dlg.accept()

    again = _dialog(qtbot, ctx, path)
    again.who.options[-1].click()
    assert again.who.me is None and again.who.answered
    with qtbot.waitSignal(again.finished_import, timeout=60_000):
        again.import_button.click()
    assert again.job.phase == "done" and "Remembered as other people's conversation." in again.status.text()
    people = _people(ctx)
    assert len(people) == 4 and {p["me"] for p in people} == {None}


def test_an_own_export_is_imported_without_the_question(qtbot, ctx):
    from ui.import_dialog import ImportDialog

    fixture = Path(__file__).parents[1] / "app" / "fixtures" / "chatgpt_conversations.json"
    dlg = ImportDialog(ctx, fixture)
    qtbot.addWidget(dlg)
    dlg.show()
    with qtbot.waitSignal(dlg.finished_import, timeout=60_000):
        dlg.start()
    assert dlg.job.phase == "done" and not dlg.who.isVisible() and not dlg.import_button.isVisible()
    assert _people(ctx) and all(p is None for p in _people(ctx))


def test_the_help_says_a_dialogue_asks_who_you_are():
    from ui.import_help import EXPORT_HELP

    assert "asks whether you are one of them" in EXPORT_HELP
