"""llama.cpp's saved state of the prompt prefix in its KV cache: what makes it valid, save, restore.

The state is taken with llama.cpp's sequence-state API (`llama_state_seq_get_data` /
`llama_state_seq_set_data`, sequence 0, the one llama-cpp-python decodes into): the KV cells of the
prefix and nothing else. `Llama.save_state()` holds the same KV bytes inside the whole context's
state, but its `LlamaState` also copies the sampler's score buffer (n_batch × n_vocab floats: 100 MB
for the bundled model, whatever the prompt's length, and unused unless `logits_all`), so it is no
format to keep on disk (docs/decisions/0019-activation-memory-saved-to-disk.md). After a restore the
Python side is set as `Llama.load_state` sets it: the token ids, `n_tokens`, and `_requires_eval`
(the last logits are not there, so generation evaluates at least one token).

A restore is checked, not assumed: llama.cpp has had releases where loading a state silently left
the cache empty, so the sequence's last position must be the prefix's last token afterwards, and
`tokens_evaluated` (llama.cpp's own performance counters) lets a test see that a reply after a
restore evaluated only the rest of its prompt.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SEQ = 0  # llama-cpp-python decodes every prompt into sequence 0
_HASHED = 1 << 20  # bytes read from each end of the model file for its identity


def state_key(llm: Any, model_path: Path, n_gpu_layers: int) -> dict[str, Any]:
    """What a saved state is only valid with: the llama.cpp build, the model file (path, size,
    mtime and a hash of its first and last MiB, so a file replaced in place under the same name is
    another model), and every load setting that shapes or fills the KV cache."""
    import llama_cpp

    info = os.stat(model_path)
    digest = hashlib.blake2b(digest_size=16)
    with open(model_path, "rb") as f:
        digest.update(f.read(_HASHED))
        if info.st_size > 2 * _HASHED:
            f.seek(-_HASHED, os.SEEK_END)
            digest.update(f.read(_HASHED))
    cp = llm.context_params
    settings = {
        name: _plain(getattr(cp, name))
        for name in (
            "n_ctx",
            "n_batch",
            "n_ubatch",
            "n_seq_max",
            "type_k",
            "type_v",
            "flash_attn_type",
            "rope_scaling_type",
            "rope_freq_base",
            "rope_freq_scale",
            "yarn_ext_factor",
            "yarn_attn_factor",
            "yarn_beta_fast",
            "yarn_beta_slow",
            "yarn_orig_ctx",
            "offload_kqv",
            "swa_full",
            "kv_unified",
        )
        if hasattr(cp, name)
    }
    return {
        "llama_cpp": llama_cpp.__version__,
        "model": str(model_path.resolve()),
        "model_size": info.st_size,
        "model_mtime_ns": info.st_mtime_ns,
        "model_hash": digest.hexdigest(),
        "n_ctx_effective": int(llm.n_ctx()),
        "n_gpu_layers": int(n_gpu_layers),
        **settings,
    }


def _plain(value: Any) -> Any:
    """A context parameter as JSON keeps it (floats rounded: they come from C floats)."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return round(value, 6)
    return str(value)


def save_prefix(llm: Any, n_tokens: int):
    """The state of the first `n_tokens` of the cache (a ctypes byte array, no copy made here), or
    None when llama.cpp gives none. Cells past `n_tokens` are dropped first: the Python side's
    `n_tokens` may be below what the cache still holds, and those cells are not of this prefix."""
    import llama_cpp.llama_cpp as lc

    if n_tokens <= 0 or llm.n_tokens < n_tokens:
        return None
    llm.n_tokens = n_tokens
    llm._ctx.kv_cache_seq_rm(-1, n_tokens, -1)
    ctx = llm._ctx.ctx
    size = int(lc.llama_state_seq_get_size(ctx, SEQ))
    if size <= 0:
        return None
    buf = (ctypes.c_uint8 * size)()
    written = int(lc.llama_state_seq_get_data(ctx, buf, size, SEQ))
    if written <= 0 or written > size:
        return None
    return (ctypes.c_uint8 * written).from_buffer(buf) if written < size else buf


def restore_prefix(llm: Any, payload: bytearray, tokens: Sequence[int]) -> bool:
    """Load a state saved by `save_prefix` for exactly `tokens`; True when the cache now holds them.
    On any failure the cache is left empty (a half-read state is never used)."""
    import llama_cpp.llama_cpp as lc

    n = len(tokens)
    ctx = llm._ctx.ctx
    llm._ctx.kv_cache_seq_rm(-1, 0, -1)
    llm.n_tokens = 0
    llm._requires_eval = True
    src = (ctypes.c_uint8 * len(payload)).from_buffer(payload)
    read = int(lc.llama_state_seq_set_data(ctx, src, len(payload), SEQ))
    mem = lc.llama_get_memory(ctx)
    last = int(lc.llama_memory_seq_pos_max(mem, SEQ)) if mem is not None else -1
    if read != len(payload) or last != n - 1:
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        return False
    llm.input_ids[:n] = tokens
    llm.n_tokens = n
    llm._requires_eval = True
    return True


def tokens_evaluated(llm: Any) -> int:
    """How many tokens this context has evaluated since it was made (llama.cpp's performance
    counters, prompt batches and single tokens alike), after waiting for work in flight."""
    import llama_cpp.llama_cpp as lc

    ctx = llm._ctx.ctx
    lc.llama_synchronize(ctx)
    perf = lc.llama_perf_context(ctx)
    return int(perf.n_p_eval) + int(perf.n_eval)
