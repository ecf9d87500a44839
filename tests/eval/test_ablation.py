"""`mnemo eval locomo --ablate`: the table's shape, and that switching a ranking stage off takes away
what that stage does (on a tiny synthetic conversation, real embedder and store)."""

import json

import pytest

from app.cli import main
from app.evaluation.locomo import LocomoEval, format_tables, load_samples
from app.importers.writer import write_conversation
from memory_core.recall.ranking import SWITCHABLE
from tests.eval.test_locomo_eval import TOY

# the harness's toy conversation, with a question that names a date (the "date" stage's part)
TINY = [
    dict(
        TOY[0],
        qa=[
            {"question": "What is the name of Ann's dog?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument is Bob learning?", "answer": "cello", "evidence": ["D1:2"], "category": 4},
            {"question": "What did Bob say on 20 May 2023?", "answer": "marathon", "evidence": ["D2:3"], "category": 2},
        ],
    )
]


@pytest.fixture
def tiny_path(tmp_path):
    p = tmp_path / "tiny.json"
    p.write_text(json.dumps(TINY), encoding="utf-8")
    return p


def test_ablation_table_has_a_row_per_stage_and_a_column_per_k(tiny_path, embedder):
    samples, _ = load_samples(tiny_path)
    report = LocomoEval(embedder, retrievers=["mnemo"], ks=(1, 3), progress=False, ablate=True).run(samples)
    ablation = report["ablation"]
    assert list(ablation) == ["none", *SWITCHABLE]
    for by_k in ablation.values():
        assert set(by_k) == {"k1", "k3"}
        assert all(0.0 <= by_k[k]["overall_1_5"] <= 100.0 for k in by_k)
    # with nothing off, the ablation's first row is the plain recall
    assert ablation["none"] == report["retrieval"]["mnemo"]
    for row in report["per_question"]:
        assert set(row["ablation"]) == set(SWITCHABLE)
    text = format_tables(report)
    table = text[text.index("stage off") :].splitlines()
    assert table[0].split() == ["stage", "off", "R@1", "R@3", "Δ@1", "Δ@3"]
    assert [line.split()[0] for line in table[2 : 3 + len(SWITCHABLE)]] == ["none", *SWITCHABLE]


def test_no_ablation_unless_asked(tiny_path, embedder):
    samples, _ = load_samples(tiny_path)
    report = LocomoEval(embedder, retrievers=["mnemo"], ks=(1,), progress=False).run(samples)
    assert report["ablation"] is None and "ablation" not in report["per_question"][0]
    assert "stage off" not in format_tables(report)


@pytest.fixture
def tiny_store(tiny_path, embedder, tmp_path):
    samples, _ = load_samples(tiny_path)
    runner = LocomoEval(embedder, retrievers=["mnemo"], progress=False)
    store = runner._open_store(tmp_path / "tiny.sqlite3")
    write_conversation(store, samples[0].conversation)
    yield store
    store.close()


def _by_id(retrieval):
    return {h.page.id: h for h in retrieval.pages}


@pytest.mark.parametrize(
    "stage, question, reason",
    [
        ("date", "What did Bob say on 20 May 2023?", "date named in the question"),
        ("keyword", "Which instrument is Bob learning?", "keyword match"),
        ("tokens", "Which instrument is Bob learning?", "word by word"),
    ],
)
def test_switching_a_stage_off_takes_its_part_away(tiny_store, stage, question, reason):
    on = tiny_store.retrieve(question, record_visits=False)
    off = tiny_store.retrieve(question, record_visits=False, off=(stage,))
    with_it = {pid for pid, h in _by_id(on).items() if reason in h.reason}
    assert with_it, f"no page ranked by {stage} with every stage on"
    assert not any(reason in h.reason for h in off.pages)
    # the pages it ranked score lower without it
    for pid, h in _by_id(off).items():
        if pid in with_it:
            assert h.score < _by_id(on)[pid].score


def test_sides_off_ranks_whole_pages(tiny_store):
    q = "Which instrument is Bob learning?"
    assert any(s.side != "page" for s in tiny_store.retrieve(q, record_visits=False).sides)
    assert all(s.side == "page" for s in tiny_store.retrieve(q, record_visits=False, off=("sides",)).sides)


def test_dense_off_leaves_the_dense_term_out(tiny_store):
    q = "Which instrument is Bob learning?"
    on, off = tiny_store.retrieve(q, record_visits=False), tiny_store.retrieve(q, record_visits=False, off=("dense",))
    shared = set(_by_id(on)) & set(_by_id(off))
    assert shared
    for pid in shared:
        h_on, h_off = _by_id(on)[pid], _by_id(off)[pid]
        if h_on.inherited_from is None and h_off.inherited_from is None and h_on.similarity > 0:
            assert h_off.score < h_on.score


def test_eval_cli_ablate(tiny_path, mnemo_dirs, capsys):
    assert main(["eval", "locomo", "--data", str(tiny_path), "--ks", "1,3", "--ablate", "--no-progress", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert list(summary["ablation"]) == ["none", *SWITCHABLE]
    assert summary["retrievers"][0] == "mnemo"
