"""`--lifecycle` (app.evaluation.lifecycle): when each question is asked, and its table."""

from __future__ import annotations

from app.evaluation.lifecycle import format_lifecycle, question_session
from app.evaluation.locomo import Question


def _q(evidence: list[str]) -> Question:
    return Question("conv-x", 0, "When?", 2, "May", evidence, evidence)


def test_a_question_waits_for_its_latest_evidence():
    assert question_session(_q(["D1:3", "D4:2", "D2:9"]), last=9) == 4
    assert question_session(_q([]), last=9) == 9  # no evidence: after the last session
    assert question_session(_q(["junk"]), last=7) == 7


def test_the_table_sets_lifecycle_beside_static():
    by_k = {"k10": {"overall_1_5": 80.0, "overall_1_4": 78.0}}
    life = {
        "mtm_capacity": 20,
        "recall": {"k10": {"overall_1_5": 79.5, "overall_1_4": None}},
        "samples": {"conv-x": {"archived_segments": 3, "mtm_segments": 20, "promotions": 2, "visits": 9}},
    }
    text = "\n".join(format_lifecycle(life, by_k, [10]))
    assert "static         1-5     80.0" in text and "lifecycle      1-5     79.5" in text
    assert "3 segments archived" in text and "mtm_capacity 20" in text
