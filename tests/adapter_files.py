"""Small LoRA adapters written in a test, in llama.cpp's GGUF layout (models.lora.write_lora_gguf),
shaped for the bundled SmolLM2-135M (or deliberately not)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models import lora
from models.resolve import default_gguf_path


def bundled_adapter(path: Path, *, rank: int = 4, std: float = 0.2, seed: int = 0, every: int = 3) -> Path:
    """Random ffn_down LoRA on every `every`th layer of the bundled model: large enough to change its
    greedy output, ~170 kB. (How large depends on the llama.cpp build: one built on an AVX2 machine kept the
    greedy reply unchanged up to std 0.08 and changed it from 0.12; 0.2 leaves a margin.)"""
    header = lora.model_header(default_gguf_path())
    rng = np.random.default_rng(seed)
    n_layers = sum(1 for name in header.tensors if name.endswith(".ffn_down.weight"))
    pairs = {}
    for i in range(0, n_layers, every):
        n_in, n_out = header.tensors[f"blk.{i}.ffn_down.weight"].ne[:2]
        pairs[f"blk.{i}.ffn_down.weight"] = (rng.normal(0, std, (rank, n_in)), rng.normal(0, std, (n_out, rank)))
    return lora.write_lora_gguf(
        path, pairs, architecture="llama", alpha=rank, name=path.stem, meta={"mnemo.base_model": "SmolLM2 135M"}
    )


def wrong_shape_adapter(path: Path, width: int = 960) -> Path:
    """A llama adapter for a wider model (SmolLM2-360M's 960): the names fit, the shapes do not."""
    rng = np.random.default_rng(1)
    pairs = {"blk.0.ffn_down.weight": (rng.normal(0, 0.05, (4, 2560)), rng.normal(0, 0.05, (width, 4)))}
    return lora.write_lora_gguf(
        path, pairs, architecture="llama", alpha=4, name=path.stem, meta={"mnemo.base_model": "SmolLM2 360M"}
    )


def other_arch_adapter(path: Path) -> Path:
    """An adapter whose metadata says it is for another architecture (shapes as the bundled model's)."""
    rng = np.random.default_rng(2)
    pairs = {"blk.0.ffn_down.weight": (rng.normal(0, 0.05, (4, 1536)), rng.normal(0, 0.05, (576, 4)))}
    return lora.write_lora_gguf(
        path, pairs, architecture="qwen2", alpha=4, name=path.stem, meta={"mnemo.base_model": "Qwen2.5 0.5B"}
    )
