"""The LoCoMo harness end to end on a hand-written toy sample (real embedder and store),
the baselines, the question sampling and the QA scoring path (with a stub model)."""

import json

import pytest

from app.cli import main
from app.evaluation.baselines import BM25Turns, FlatDense, rrf_fuse
from app.evaluation.locomo import LocomoEval, format_tables, load_samples, spread_limit, write_json
from app.evaluation.qa import NOT_MENTIONED, clean_prediction

TOY = [
    {
        "sample_id": "toy-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:00 pm on 1 March, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle puppy named Biscuit last week."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Congrats! I just started learning the cello."},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "My sister Clara lives in Lisbon and visits in April."},
                {"speaker": "Bob", "dia_id": "D1:4", "text": "Nice. I am training for the Berlin marathon."},
            ],
            "session_2_date_time": "9:00 am on 20 May, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "Biscuit must be bigger now!"},
                {
                    "speaker": "Ann",
                    "dia_id": "D2:2",
                    "text": "He is! I also started a pottery class on Tuesdays.",
                    "blip_caption": "a photo of a clay bowl",
                },
                {"speaker": "Bob", "dia_id": "D2:3", "text": "I finished the marathon in four hours yesterday."},
                {"speaker": "Ann", "dia_id": "D2:4", "text": "Amazing, well done."},
            ],
            "session_3_date_time": "10:00 am on 1 June, 2023",
        },
        "qa": [
            {"question": "What is the name of Ann's dog?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument is Bob learning?", "answer": "cello", "evidence": ["D1:2"], "category": 4},
            {"question": "What class did Ann start?", "answer": "pottery", "evidence": ["D2:2"], "category": 4},
            {
                "question": "When did Bob run the marathon he trained for?",
                "answer": "19 May 2023",
                "evidence": ["D2:3; D1:4"],
                "category": 2,
            },
            {
                "question": "What is Ann's favourite movie?",
                "evidence": [],
                "category": 5,
                "adversarial_answer": "Titanic",
            },
            {
                "question": "Where does Ann's sister live?",
                "answer": "Lisbon; she visits in April",
                "evidence": ["(D1:3)"],
                "category": 3,
            },
            {"question": "broken", "category": 9},
        ],
    }
]


@pytest.fixture
def toy_path(tmp_path):
    p = tmp_path / "toy.json"
    p.write_text(json.dumps(TOY), encoding="utf-8")
    return p


def test_load_samples_normalises_evidence_and_skips_bad_questions(toy_path):
    samples, warnings = load_samples(toy_path)
    (s,) = samples
    assert s.speakers == ("Ann", "Bob") and s.conversation.n_turns == 8
    assert [q.evidence for q in s.questions] == [["D1:1"], ["D1:2"], ["D2:2"], ["D2:3", "D1:4"], [], ["D1:3"]]
    assert s.questions[5].gold == "Lisbon"
    assert any("qa 7: malformed question" in w for w in warnings)
    with pytest.raises(Exception, match="no sample"):
        load_samples(toy_path, ["conv-99"])


def test_spread_limit_takes_questions_round_robin(toy_path):
    samples, _ = load_samples(toy_path)
    a, b = samples[0], samples[0].__class__(**{**samples[0].__dict__, "sample_id": "toy-2"})
    chosen = spread_limit([a, b], 3)
    assert [len(v) for v in chosen.values()] == [2, 1]
    # evenly spaced over each sample's list (6 questions): 2 → positions 0 and 3, 1 → position 0
    assert [q.index for q in chosen["toy-1"]] == [0, 3] and [q.index for q in chosen["toy-2"]] == [0]
    assert spread_limit([a], None)["toy-1"] == a.questions
    assert len(spread_limit([a], 100)["toy-1"]) == 6


def test_baselines_rank_and_fuse(embedder):
    ids = ["t1", "t2", "t3"]
    texts = ["Ann: I adopted a beagle puppy.", "Bob: the cello is hard to learn.", "Ann: pottery class on Tuesdays."]
    dense = FlatDense(ids, texts, embedder.embed)
    assert dense.rank(embedder.embed(["Which musical instrument?"])[0])[0] == "t2"
    bm25 = BM25Turns(ids, texts)
    assert bm25.rank("When is the pottery class?")[0] == "t3"
    assert bm25.rank("puppies adopting")[0] == "t1"  # porter stemming
    assert bm25.rank("!!!") == []
    assert BM25Turns.match_query('say "hi" OR bye') == '"say" OR "hi" OR "or" OR "bye"'
    # RRF: a: 1/61 + 1/62, b: 1/62 + 1/61, c: 1/63 → a and b tie (first seen wins), then c
    assert rrf_fuse([["a", "b", "c"], ["b", "a"]]) == ["a", "b", "c"]
    assert rrf_fuse([["a"], ["c", "b"]], n=2) == ["a", "c"]
    bm25.close()


def test_retrieval_run_on_toy_sample(toy_path, embedder, tmp_path):
    samples, _ = load_samples(toy_path)
    runner = LocomoEval(embedder, ks=(1, 3, 50), progress=False)
    report = runner.run(samples, data_path=str(toy_path))
    assert report["questions"] == 6 and report["retrievers"] == ["mnemo", "flat-dense", "bm25", "hybrid"]
    for row in report["per_question"]:
        for name in report["retrievers"]:
            got = row["retrieved"][name]
            assert len(got) == len(set(got))
            if name != "bm25":  # budget 50 > 8 turns: every turn (BM25 only finds turns sharing a word)
                assert len(got) == 8
            r = row["recall"][name]
            assert r["1"] <= r["3"] <= r["50"] == 1.0
    adversarial = report["per_question"][4]
    assert adversarial["recall"]["bm25"]["1"] == 1.0  # no evidence counts 1.0
    for by_k in report["retrieval"].values():
        assert by_k["k50"]["overall_1_5"] == 100.0 and by_k["k50"]["n_1_4"] == 5
        assert by_k["k50"]["by_category"]["1"] is None
    assert report["timings"]["ingest_s"]["toy-1"] > 0
    assert report["timings"]["retrieval"]["mnemo"]["n"] == 6
    text = format_tables(report)
    assert "mnemo" in text and "hybrid" in text and "R@50" in text
    out = tmp_path / "r.json"
    write_json(report, out)
    assert json.loads(out.read_text())["per_question"][0]["question"] == "What is the name of Ann's dog?"


def test_turn_budget_counts_page_turns_for_mnemo(toy_path, embedder):
    samples, _ = load_samples(toy_path)
    report = LocomoEval(embedder, retrievers=["mnemo"], ks=(1, 3), progress=False).run(samples)
    for row in report["per_question"]:
        k3 = row["recall"]["mnemo"]
        assert set(k3) == {"1", "3"}
    # retrieved lists are filled to the largest budget (3): pages of two turns are cut to fit
    assert all(len(r["retrieved"]["mnemo"]) == 3 for r in report["per_question"])
    # a page's turns are ranked one side at a time: Bob's reply (D1:2) answers, and is first in the budget
    # before Ann's side of its page (D1:1), which a whole page would have handed first
    bob = report["per_question"][1]
    assert bob["question"] == "Which instrument is Bob learning?"
    assert bob["retrieved"]["mnemo"][0] == "D1:2" and bob["recall"]["mnemo"]["1"] == 1.0


def test_asked_before_measures_recall_after_a_question_was_asked_once(toy_path, embedder, mnemo_dirs, capsys):
    """--asked-before: each question is first asked in a chat of its own and gets a non-answer. That
    earlier asking is never recalled in place of the evidence (it would rank first: it is the question),
    and it is gone again before the next question."""
    samples, _ = load_samples(toy_path)
    plain = LocomoEval(embedder, retrievers=["mnemo"], ks=(2, 4), progress=False).run(samples)
    asked = LocomoEval(embedder, retrievers=["mnemo"], ks=(2, 4), progress=False, asked_before="same").run(samples)
    assert asked["asked_before"]["recalled"] == 0 and asked["asked_before"]["questions"] == 6
    assert all(r["asked_before"]["recalled"] is False for r in asked["per_question"])
    # the asking takes no place in the budget: the same turns fill it (the extra page counts in BM25's
    # document frequencies, so two close turns may swap places inside it)
    assert [set(r["retrieved"]["mnemo"]) for r in asked["per_question"]] == [
        set(r["retrieved"]["mnemo"]) for r in plain["per_question"]
    ]
    assert [r["recall"]["mnemo"]["4"] for r in asked["per_question"]] == [
        r["recall"]["mnemo"]["4"] for r in plain["per_question"]
    ]
    assert (
        main(
            [
                "eval",
                "locomo",
                "--data",
                str(toy_path),
                "--retriever",
                "mnemo",
                "--ks",
                "2",
                "--asked-before",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "that earlier asking recalled for 0 of 6 questions" in capsys.readouterr().out


def test_asked_before_all_asks_every_question_first(toy_path, embedder, mnemo_dirs, capsys):
    """--asked-before all: every question of a sample is asked (and gets a non-answer) before any is
    measured, so the other askings on the topic compete with the evidence; `asked_weight` keeps them
    under what was said."""
    from memory_core import MemoryParams

    samples, _ = load_samples(toy_path)
    runs = {
        w: LocomoEval(
            embedder,
            retrievers=["mnemo"],
            ks=(2, 10),
            progress=False,
            asked_before="all",
            memory_params=MemoryParams.from_flat(asked_weight=w),
        ).run(samples)
        for w in (1.0, 0.5)
    }
    for report in runs.values():
        assert report["asked_before"]["mode"] == "all" and report["asked_before"]["questions"] == 6
        assert all("askings_in_top_10" in r["asked_before"] for r in report["per_question"])
    assert runs[1.0]["asked_before"]["askings_in_top_10"] > runs[0.5]["asked_before"]["askings_in_top_10"]
    assert (
        main(
            [
                "eval",
                "locomo",
                "--data",
                str(toy_path),
                "--retriever",
                "mnemo",
                "--ks",
                "2",
                "--asked-before",
                "all",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "every question asked once before, each in a chat of its own" in capsys.readouterr().out


class StubModel:
    """Answers 'Biscuit' when the prompt mentions Biscuit, else the not-mentioned phrase."""

    model_id = "stub"
    n_ctx = 2048

    def count_tokens(self, text):
        return len(text.split())

    def count_messages_tokens(self, messages):
        return sum(self.count_tokens(m["content"]) + 4 for m in messages)

    def stream(self, messages, max_tokens=None, temperature=None, cancel=None):
        prompt = " ".join(m["content"] for m in messages)
        yield "Answer: Biscuit\nmore text" if "Biscuit" in prompt else f"{NOT_MENTIONED}."


def test_qa_modes_and_scores_with_stub_model(toy_path, embedder):
    samples, _ = load_samples(toy_path)
    runner = LocomoEval(embedder, retrievers=["bm25"], ks=(5,), qa_model=StubModel(), progress=False)
    report = runner.run(samples, limit=5)
    rows = report["per_question"]
    assert [r["category"] for r in rows] == [4, 4, 4, 2, 5]
    dog, adversarial = rows[0]["qa"], rows[4]["qa"]
    assert dog["memory"]["prediction"] == "Biscuit" and dog["memory"]["official_f1"] == 1.0
    assert dog["memory"]["amem_f1"] == 1.0 and dog["memory"]["bleu1"] == pytest.approx(1.0)
    assert dog["no-memory"]["official_f1"] == 0.0
    assert dog["full-context"]["official_f1"] == 1.0
    assert adversarial["no-memory"]["official_f1"] == 1.0 and adversarial["no-memory"]["amem_f1"] is None
    assert dog["memory"]["prompt_tokens"] > dog["no-memory"]["prompt_tokens"]
    assert dog["memory"]["pages"]  # the pages that went into the prompt are recorded
    qa = report["qa"]
    assert set(qa) == {"memory", "no-memory", "full-context"}
    assert qa["no-memory"]["official_f1"]["by_category"]["5"] == 100.0
    assert qa["full-context"]["official_f1"]["overall_1_4"] == 25.0  # only the dog question
    assert "LoCoMo QA with stub" in format_tables(report)


def test_clean_prediction():
    assert clean_prediction('\n  Answer: "Paris"\nbecause...') == "Paris"
    assert clean_prediction("Short answer: 7 May 2023") == "7 May 2023"
    assert clean_prediction("") == ""


def test_eval_cli(toy_path, tmp_path, mnemo_dirs, capsys):
    out = tmp_path / "report.json"
    rc = main(
        [
            "eval",
            "locomo",
            "--data",
            str(toy_path),
            "--retriever",
            "bm25,hybrid",
            "--ks",
            "1,5",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0 and "bm25" in text and "R@5" in text
    report = json.loads(out.read_text())
    assert report["retrievers"] == ["bm25", "hybrid"] and len(report["per_question"]) == 6
    assert main(["eval", "locomo", "--data", str(toy_path), "--retriever", "nope"]) == 2
    assert main(["eval", "locomo", "--data", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_qa_with_the_bundled_model(toy_path, embedder, chat_model):
    samples, _ = load_samples(toy_path)
    runner = LocomoEval(
        embedder, retrievers=["mnemo"], ks=(5,), qa_model=chat_model, progress=False, qa_modes=["memory", "no-memory"]
    )
    report = runner.run(samples, limit=2)
    for row in report["per_question"]:
        for mode in ("memory", "no-memory"):
            a = row["qa"][mode]
            assert isinstance(a["prediction"], str) and 0.0 <= a["official_f1"] <= 1.0
            assert a["prompt_tokens"] > 0 and a["seconds"] > 0
    assert report["qa"]["memory"]["prompt_tokens_mean"] > report["qa"]["no-memory"]["prompt_tokens_mean"]


def test_dev_split_questions(locomo_path):
    samples, warnings = load_samples(locomo_path)
    assert warnings == []
    assert [s.sample_id for s in samples] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    qs = [q for s in samples for q in s.questions]
    assert len(qs) == 999
    assert {c: sum(q.category == c for q in qs) for c in range(1, 6)} == {1: 142, 2: 156, 3: 46, 4: 418, 5: 237}
    by_raw = {tuple(q.evidence_raw): q.evidence for q in qs}
    assert by_raw[("D8:6; D9:17",)] == ["D8:6", "D9:17"]
    assert by_raw[("D1:18", "D", "D1:20")] == ["D1:18", "D1:20"]
    assert "D11:26" in next(q.evidence for q in qs if "D:11:26" in q.evidence_raw)
