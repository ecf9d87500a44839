"""llama.cpp off its AMX path where that crashes (models.llama_runtime): the decision, and the real
library in a child process, where a segfault fails one test instead of killing the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from models import llama_runtime as R

ROOT = Path(__file__).resolve().parents[2]
AMX_INFO = b"CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | OPENMP = 1 | REPACK = 1 | "
PLAIN_INFO = b"CPU : SSE3 = 1 | AVX2 = 1 | FMA = 1 | OPENMP = 1 | REPACK = 1 | "


def test_amx_build_turns_extra_buffers_off():
    keep, why = R.extra_buffers_wanted(AMX_INFO, None)
    assert keep is False and "AMX" in why


def test_build_without_amx_keeps_them():
    assert R.extra_buffers_wanted(PLAIN_INFO, None)[0] is True
    assert R.extra_buffers_wanted("AMX_INT8 = 0 | AVX2 = 1", None)[0] is True


def test_the_variable_overrides_either_way():
    assert R.extra_buffers_wanted(AMX_INFO, "1") == (True, f"{R.ENV}=1")
    assert R.extra_buffers_wanted(PLAIN_INFO, " 0 ") == (False, f"{R.ENV}=0")
    assert R.extra_buffers_wanted(AMX_INFO, "yes")[0] is False  # not 0/1: the automatic choice


def _child(code: str, env_value: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(R.ENV, None)
    if env_value is not None:
        env[R.ENV] = env_value
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_apply_sets_the_real_default_params():
    code = (
        "import json, llama_cpp.llama_cpp as lc\n"
        "from models import llama_runtime as R\n"
        "s = R.apply()\n"
        "print(json.dumps([s['extra_buffers'], lc.llama_model_default_params().use_extra_bufts]))\n"
    )
    for value, expect in (("0", False), ("1", True)):
        out = _child(code, value)
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout.strip().splitlines()[-1]) == [expect, expect]


def test_bundled_model_evaluates_a_prompt_in_a_child_process():
    # a prompt of many tokens is what took ggml's AMX matrix path and crashed (SIGSEGV, rc -11)
    code = (
        "from models.llama_cpp_backend import LlamaCppChatModel\n"
        "m = LlamaCppChatModel(n_ctx=1024, seed=1)\n"
        "msgs = [{'role': 'user', 'content': 'Tell me three facts about the moon, please. ' * 8}]\n"
        "print(m.prefill(msgs))\n"
        "print(repr(''.join(m.stream(msgs, max_tokens=8, temperature=0.0))))\n"
    )
    out = _child(code)
    assert out.returncode == 0, f"rc {out.returncode}: {out.stderr[-2000:]}"
    lines = out.stdout.strip().splitlines()
    assert int(lines[-2]) > 64 and len(lines[-1]) > 2
