"""`mnemo memory distill`'s parts: memory turned into questions and answers (a real store), and a LoRA
trained for the bundled GGUF with transformers + peft on the CPU, written as a GGUF adapter that
llama.cpp loads (only where the [train] extra is installed; CI installs it). Tiny: a few steps."""

from __future__ import annotations

import pytest

from app.parametric import distill
from models.chat import CancelToken
from models.lora import check_fits
from models.resolve import default_gguf_path

needs_train = pytest.mark.skipif(
    bool(distill.missing_packages()), reason='needs the [train] extra: pip install "mnemo[train]"'
)


def test_facts_become_questions():
    pairs = distill.pairs_from_fact("My sister's name is Clara.", "fact 1")
    assert ("What is my sister's name?", "Your sister's name is Clara.") in [(p.question, p.answer) for p in pairs]
    where = distill.pairs_from_fact("I live in Lisbon", "fact 2")
    assert where[0].question == "Where do I live?" and where[0].answer == "You live in Lisbon."
    drive = distill.pairs_from_fact("I drive a green Volvo.", "fact 3")
    assert "Which volvo do I drive?" in [p.question for p in drive]
    assert distill.second_person("I told my brother I'm moving") == "You told your brother you're moving"
    assert distill.second_person("I was born in Montreal") == "You were born in Montreal"


def test_collect_pairs_from_store(store):
    store.persona.add_knowledge("user", "My dog is called Biscuit.")
    store.persona.add_knowledge("user", "I work at a bakery in Porto.")
    pairs = distill.collect_pairs(store)
    assert len({p.source for p in pairs}) == 2 and all(p.source.startswith("fact ") for p in pairs)
    assert any(p.answer == "You work at a bakery in Porto." for p in pairs)


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setattr(distill, "missing_packages", lambda: ["peft"])
    with pytest.raises(distill.DistillError, match=r'needs peft: pip install "mnemo\[train\]"'):
        distill.train_adapter(default_gguf_path(), [distill.QAPair("q", "a", "x")], "/nonexistent/out.gguf")


PAIRS = [p for fact in ("My sister's name is Clara.", "I live in Lisbon.") for p in distill.pairs_from_fact(fact, "f")]
TINY = dict(steps=4, batch=4, rank=4, alpha=8, threads=2, learning_rate=3e-3)


@needs_train
def test_distill_trains_an_adapter_llama_cpp_loads(tmp_path, chat_model):
    steps = []
    result = distill.train_adapter(
        default_gguf_path(),
        PAIRS,
        tmp_path / "memory.gguf",
        distill.DistillConfig(**TINY),
        progress=lambda s, n, loss: steps.append((s, n, loss)),
    )
    assert [s for s, _, _ in steps] == [1, 2, 3, 4] and steps[0][1] == 4
    assert result.last_loss < result.first_loss  # it learned something
    info = check_fits(result.path, default_gguf_path())
    assert info.rank == 4 and info.targets == 30 * len(distill.TARGETS) and info.alpha == 8.0
    question = [{"role": "user", "content": "Where do I live?"}]
    plain = "".join(chat_model.stream(question, max_tokens=12, temperature=0.0))
    try:
        chat_model.set_adapters([(result.path, 1.0)])
        adapted = "".join(chat_model.stream(question, max_tokens=12, temperature=0.0))
    finally:
        chat_model.set_adapters([])
    assert adapted != plain


@needs_train
def test_distill_cancel_keeps_nothing(tmp_path):
    cancel = CancelToken()

    def progress(step, steps, loss):
        if step == 1:
            cancel.cancel()

    out = tmp_path / "memory.gguf"
    with pytest.raises(distill.DistillCancelled):
        distill.train_adapter(
            default_gguf_path(), PAIRS, out, distill.DistillConfig(**TINY), progress=progress, cancel=cancel
        )
    assert not out.exists() and list(tmp_path.iterdir()) == []


@needs_train
def test_cli_distill_shows_progress_and_keeps_the_adapter(mnemo_dirs):
    import json

    from app.parametric import adapters as ad
    from tests.app.test_cli_commands import mnemo

    mnemo(mnemo_dirs, "memory", "add", "fact", "My sister's name is Clara.")
    out = mnemo(mnemo_dirs, "memory", "distill", "--steps", "2", "--rank", "2", "--threads", "2")
    assert "Learning from 4 questions and answers drawn from memory, 2 steps" in out.stdout
    assert "step 1/2" in out.stdout and "step 2/2" in out.stdout and "Trained adapter memory-" in out.stdout
    rows = json.loads(mnemo(mnemo_dirs, "memory", "adapters", "list", "--json").stdout)
    assert len(rows) == 1 and rows[0]["new_chats"] and rows[0]["problem"] is None
    assert rows[0]["source"].startswith(ad.DISTILLED) and rows[0]["base_model"] == "smollm2 135M"
