"""`--lifecycle` (app.evaluation.lifecycle): when each question is asked, the replays on a real store and
embedder (per session and at the end of life, with and without the lifecycle), the comparison with the static
run, and its table."""

from __future__ import annotations

import json

import pytest

from app.evaluation.lifecycle import RUNS, LifecycleEval, compare_with_static, format_lifecycle, question_session
from app.evaluation.locomo import LocomoEval, Question, load_samples, spread_limit
from memory_core import MemoryParams


def _q(evidence: list[str]) -> Question:
    return Question("conv-x", 0, "When?", 2, "May", evidence, evidence)


def test_a_question_waits_for_its_latest_evidence():
    assert question_session(_q(["D1:3", "D4:2", "D2:9"]), last=9) == 4
    assert question_session(_q([]), last=9) == 9  # no evidence: after the last session
    assert question_session(_q(["junk"]), last=7) == 7


def _session(n: int, lines: list[tuple[str, str]]) -> list[dict]:
    return [{"speaker": who, "dia_id": f"D{n}:{i + 1}", "text": text} for i, (who, text) in enumerate(lines)]


# three sessions on unrelated topics, so the pages make several segments and a mid-term memory of one segment
# must archive some
LIFE = [
    {
        "sample_id": "life-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:00 pm on 1 March, 2023",
            "session_1": _session(
                1,
                [
                    ("Ann", "I adopted a beagle puppy named Biscuit last week."),
                    ("Bob", "Congrats! Beagles love long walks in the park."),
                    ("Ann", "My sister Clara lives in Lisbon and visits in April."),
                    ("Bob", "Lisbon is lovely in spring, the trams are fun."),
                ],
            ),
            "session_2_date_time": "9:00 am on 20 May, 2023",
            "session_2": _session(
                2,
                [
                    ("Bob", "I finished the Berlin marathon in four hours."),
                    ("Ann", "Amazing! How long did you train for the race?"),
                    ("Bob", "Six months of running, mostly early mornings."),
                    ("Ann", "I started a pottery class on Tuesdays, my first bowl cracked."),
                ],
            ),
            "session_3_date_time": "6:00 pm on 2 July, 2023",
            "session_3": _session(
                3,
                [
                    ("Ann", "We booked a trip to Japan for October, Kyoto and Osaka."),
                    ("Bob", "Try the ramen in Osaka, and the temples in Kyoto."),
                    ("Ann", "My laptop broke, so I bought a new one with more memory."),
                    ("Bob", "Back up your files this time!"),
                ],
            ),
        },
        "qa": [
            {"question": "What is the name of Ann's dog?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
            {"question": "Where does Ann's sister live?", "answer": "Lisbon", "evidence": ["D1:3"], "category": 4},
            {"question": "How long did Bob run the marathon?", "answer": "4h", "evidence": ["D2:1"], "category": 4},
            {"question": "What class did Ann start?", "answer": "pottery", "evidence": ["D2:4"], "category": 4},
            {"question": "Where is Ann travelling in October?", "answer": "Japan", "evidence": ["D3:1"], "category": 4},
            {"question": "What is Ann's favourite movie?", "evidence": [], "category": 5, "adversarial_answer": "x"},
        ],
    }
]


@pytest.fixture
def life_sample(tmp_path):
    p = tmp_path / "life.json"
    p.write_text(json.dumps(LIFE), encoding="utf-8")
    samples, _ = load_samples(p)
    return samples


def _params() -> MemoryParams:
    params = MemoryParams()
    params.tiers.stm_capacity = 1  # the pages go on to mid-term memory, where segments and archiving are
    return params


def test_both_replays_on_a_real_store(life_sample, embedder):
    """The lifecycle replay archives, visits and promotes; the replay without it does none of that; and each
    question is measured four ways, the end of life against the static run question by question."""
    ks = (1, 3, 50)
    static = LocomoEval(embedder, memory_params=_params(), retrievers=["mnemo"], ks=ks, progress=False)
    report = static.run(life_sample)
    chosen = spread_limit(life_sample, None)
    life = LifecycleEval(embedder, memory_params=_params(), ks=ks, mtm_capacity=1, log=lambda m: None).run(
        life_sample, chosen, report["per_question"]
    )
    st = life["samples"]["life-1"]
    assert st["archived_segments"] > 0 and st["mtm_segments"] == 1 and st["archived_pages"] > 0
    assert st["visits"] > 0
    plain = st["no_lifecycle"]
    assert plain["archived_segments"] == 0 and plain["visits"] == 0 and plain["promotions"] == 0
    assert life["mtm_capacity"] == 1 and life["mtm_capacity_no_lifecycle"] == MemoryParams().tiers.mtm_capacity
    rows = {r["qa_index"]: r for r in life["per_question"]}
    assert len(rows) == 6 and all(set(r["recall"]) == set(RUNS) for r in rows.values())
    assert [rows[i]["asked_after_session"] for i in range(6)] == [1, 1, 2, 2, 3, 3]
    # at the end, the evidence of some question lies in an archived segment, and the page says so
    tiers = {e: where["tier"] for r in rows.values() for e, where in r["evidence_at_end"].items()}
    assert set(tiers) == {"D1:1", "D1:3", "D2:1", "D2:4", "D3:1"} and "archive" in tiers.values()
    # replaying session by session with the static settings builds the static store: at the end of its life
    # every question's recall is the static run's
    static_rows = {r["qa_index"]: r["recall"]["mnemo"] for r in report["per_question"]}
    assert all(rows[i]["recall"]["end_of_life_no_lifecycle"] == static_rows[i] for i in rows)
    # the figures summarise the rows, and the comparison counts what each question lost or gained
    for run in RUNS:
        mean = 100.0 * sum(r["recall"][run]["3"] for r in rows.values()) / 6
        assert life["runs"][run]["k3"]["overall_1_5"] == pytest.approx(mean, abs=0.01)
    assert life["recall"] == life["runs"]["session"]
    vs = life["vs_static"]
    assert vs["questions"] == 6
    lost = sum(1 for i in rows if rows[i]["recall"]["end_of_life"]["3"] < static_rows[i]["3"])
    assert vs["by_k"]["k3"]["lost"] == lost
    assert len(rows[0]["retrieved_end_of_life"]) <= 50 and "D1:1" in rows[0]["retrieved_end_of_life"]
    text = "\n".join(format_lifecycle(life, report["retrieval"]["mnemo"], list(ks)))
    assert "end of life, lifecycle" in text and "per session, none" in text and "life-1:" in text


def test_a_question_that_lost_its_evidence_is_shown_with_where_it_was():
    def life_row(i: int, end: float, turns: list[str]) -> dict:
        recall = {"10": end}
        return {
            "sample_id": "c",
            "qa_index": i,
            "question": f"q{i}",
            "category": 4,
            "evidence": ["D1:1"],
            "recall": {"end_of_life": recall, "end_of_life_no_lifecycle": {"10": 1.0}},
            "retrieved_end_of_life": turns,
            "evidence_at_end": {"D1:1": {"page_id": 7, "tier": "archive", "segment_id": 3}},
        }

    rows = [life_row(0, 0.0, ["D2:1", "D2:2"]), life_row(1, 1.0, ["D1:1"]), life_row(2, 1.0, ["D1:1"])]
    static = [
        {"sample_id": "c", "qa_index": i, "recall": {"mnemo": {"10": r}}, "retrieved": {"mnemo": t}}
        for i, r, t in ((0, 1.0, ["D3:1", "D1:1"]), (1, 1.0, ["D1:1"]), (2, 0.0, ["D9:9"]))
    ]
    vs = compare_with_static(rows, static, [10])
    assert vs is not None and vs["by_k"]["k10"] == {"lost": 1, "gained": 1, "mean_change_points": 0.0}
    (lost,) = vs["lost"]
    assert lost["qa_index"] == 0 and lost["evidence"]["D1:1"]["tier"] == "archive"
    assert lost["evidence"]["D1:1"]["static_rank"] == 2 and lost["evidence"]["D1:1"]["end_of_life_rank"] is None
    assert compare_with_static(rows, [], [10]) is None


def test_the_table_sets_every_figure_beside_static():
    by_k = {"k10": {"overall_1_5": 80.0, "overall_1_4": 78.0}}

    def fig(v: float) -> dict:
        return {"k10": {"overall_1_5": v, "overall_1_4": None}}

    life = {
        "mtm_capacity": 20,
        "recall": fig(84.0),
        "runs": {
            "session": fig(84.0),
            "session_no_lifecycle": fig(84.5),
            "end_of_life": fig(79.5),
            "end_of_life_no_lifecycle": fig(80.0),
        },
        "vs_static": {"questions": 9, "by_k": {"k10": {"lost": 2, "gained": 1, "mean_change_points": -0.5}}},
        "samples": {
            "conv-x": {
                "archived_segments": 3,
                "archived_pages": 30,
                "pages": 50,
                "mtm_segments": 20,
                "promotions": 2,
                "visits": 9,
                "no_lifecycle": {"archived_segments": 0, "visits": 0},
            }
        },
    }
    text = "\n".join(format_lifecycle(life, by_k, [10]))
    assert "static                     1-5     80.0" in text
    assert "end of life, lifecycle     1-5     79.5" in text and "end of life, none          1-5     80.0" in text
    assert "per session, lifecycle     1-5     84.0" in text and "per session, none          1-5     84.5" in text
    assert "end of life, lifecycle     1-4      -" in text  # no figure for categories 1-4
    assert "R@10 -0.5 points (2 lost, 1 gained)" in text
    assert "3 segments archived (30 of 50 pages)" in text and "none: 0 archived, 0 visits" in text
    assert "mtm_capacity 20" in text
