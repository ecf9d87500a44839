"""LoRA adapters (models.lora, LlamaCppChatModel.set_adapters) with the bundled GGUF through llama.cpp:
an adapter written here changes the greedy reply and taking it off brings the reply back; adapters for
another model and damaged files are refused with one line and the model goes on working."""

from __future__ import annotations

import pytest

from models import lora
from models.llama_cpp_backend import LlamaCppChatModel
from models.resolve import default_gguf_path
from tests.adapter_files import bundled_adapter, other_arch_adapter, wrong_shape_adapter

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def model():
    m = LlamaCppChatModel(n_ctx=512, seed=1, n_threads=1, temperature=0.0, max_tokens=20)
    yield m
    m.close()


def _reply(m: LlamaCppChatModel) -> str:
    return "".join(m.stream(QUESTION, max_tokens=20, temperature=0.0))


def test_written_adapter_reads_back(tmp_path):
    path = bundled_adapter(tmp_path / "style.gguf")
    info = lora.check_fits(path, default_gguf_path())
    assert (info.architecture, info.rank, info.targets, info.alpha) == ("llama", 4, 10, 4.0)
    assert info.base_model == "SmolLM2 135M"
    assert info.layers == tuple(range(0, 30, 3))
    assert path.stat().st_size < 300_000


def test_adapter_changes_output_and_comes_off(model, tmp_path):
    plain = _reply(model)
    model.set_adapters([(bundled_adapter(tmp_path / "a.gguf"), 1.0)])
    adapted = _reply(model)
    assert adapted != plain
    assert model.state_key()["adapters"][0][-1] == 1.0  # saved prompt states name the adapter
    model.set_adapters([(tmp_path / "a.gguf", 0.0)])  # scale 0: as without it
    assert _reply(model) == plain
    model.set_adapters([])
    assert _reply(model) == plain
    assert "adapters" not in model.state_key()  # the key of states saved without adapters is unchanged


def test_two_adapters_at_once(model, tmp_path):
    a = bundled_adapter(tmp_path / "a.gguf", seed=3)
    b = bundled_adapter(tmp_path / "b.gguf", seed=4, std=0.3)
    model.set_adapters([(a, 1.0)])
    one = _reply(model)
    model.set_adapters([(a, 1.0), (b, 1.0)])
    assert len(model.adapters) == 2
    assert _reply(model) != one
    model.set_adapters([])


def test_adapter_for_wider_model_refused(model, tmp_path):
    plain = _reply(model)
    path = wrong_shape_adapter(tmp_path / "wide.gguf")
    with pytest.raises(lora.AdapterError) as exc:
        model.set_adapters([(path, 1.0)])
    message = str(exc.value)
    assert "\n" not in message
    assert "wide.gguf" in message and "SmolLM2 360M" in message and "2560x960" in message and "1536x576" in message
    assert model.adapters == ()
    assert _reply(model) == plain


def test_adapter_for_other_architecture_refused(model, tmp_path):
    with pytest.raises(lora.AdapterError, match=r"made for Qwen2.5 0.5B \(qwen2\), not for .* \(llama\)"):
        model.set_adapters([(other_arch_adapter(tmp_path / "qwen.gguf"), 1.0)])
    assert _reply(model)


@pytest.mark.parametrize(
    "damage",
    ["truncated", "flipped_magic", "empty", "model_file", "huge_count", "half_pair"],
)
def test_damaged_adapter_refused(model, tmp_path, damage):
    good = bundled_adapter(tmp_path / "good.gguf").read_bytes()
    bad = tmp_path / f"{damage}.gguf"
    if damage == "truncated":
        bad.write_bytes(good[: len(good) // 2])
    elif damage == "flipped_magic":
        bad.write_bytes(b"GGUX" + good[4:])
    elif damage == "empty":
        bad.write_bytes(b"")
    elif damage == "model_file":
        bad = default_gguf_path()  # a model, not an adapter
    elif damage == "huge_count":
        bad.write_bytes(good[:8] + (2**62).to_bytes(8, "little") + good[16:])
    else:
        import numpy as np

        lora.write_lora_gguf(
            bad,
            {"blk.0.ffn_down.weight": (np.zeros((4, 1536)), np.zeros((576, 4)))},
            architecture="llama",
            alpha=4,
            name="x",
        )
        data = bad.read_bytes().replace(b"ffn_down.weight.lora_b", b"ffn_down.weight.lora_c")
        bad.write_bytes(data)
    with pytest.raises(lora.AdapterError) as exc:
        model.set_adapters([(bad, 1.0)])
    assert "\n" not in str(exc.value) and bad.name in str(exc.value)
    assert model.adapters == ()
    assert _reply(model)
