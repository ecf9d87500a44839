"""Keep llama.cpp off its AMX matrix path, which crashes the process on some CPUs.

A source build of llama-cpp-python (the only kind PyPI offers) compiles for the CPU it is built on.
On a CPU with AMX (Intel Xeon Sapphire Rapids and later) that includes ggml's AMX backend: at load,
the weights go into an "AMX" extra buffer type, and the first prompt of two or more tokens runs
`ggml_backend_amx_mul_mat`, which dies with SIGSEGV on some of these machines (seen here with the
bundled SmolLM2 Q4_1 in a VM whose CPU reports amx_int8; ggml-org/llama.cpp#20824, closed as stale
without a fix; DSPy's CI hit the same crash). A segfault takes the whole app down, the reply with it,
so it cannot be caught and reported like a bad model file.

llama.cpp's model parameter `use_extra_bufts` (default on) is what puts weights into extra buffer
types (AMX, and the CPU "repack" layouts). With it off the weights stay in ordinary CPU buffers and
every matrix product takes the AVX2/AVX-512 path. `apply()` turns it off when the loaded llama.cpp
was built with AMX, for every model this process loads; elsewhere nothing changes. Cost: no weight
repacking on such CPUs (the bundled Q4_1 model has no repacked layout anyway).

`MNEMO_LLAMA_EXTRA_BUFFERS=1` keeps the extra buffer types even with AMX (for a machine where that
path works), `=0` turns them off everywhere.

llama-cpp-python's `Llama` takes no such argument: it builds its parameters from
`llama_cpp.llama_cpp.llama_model_default_params()` and loads the model in the same constructor, so
`apply()` replaces that function (once, process-wide) with one that returns the defaults with
`use_extra_bufts` off. `python -m models.llama_server ARGS` starts llama-cpp-python's OpenAI-compatible
server with the same setting.
"""

from __future__ import annotations

import os
import threading

ENV = "MNEMO_LLAMA_EXTRA_BUFFERS"
_lock = threading.Lock()
_state: dict[str, object] = {}


def build_has_amx(system_info: bytes | str) -> bool:
    """Whether llama.cpp's system-info line says its CPU backend was built with AMX."""
    text = system_info.decode("utf-8", "replace") if isinstance(system_info, bytes) else system_info
    return "AMX_INT8 = 1" in text


def extra_buffers_wanted(system_info: bytes | str, env: str | None) -> tuple[bool, str]:
    """(keep llama.cpp's extra buffer types?, why) from its system info and the override variable."""
    if env is not None and env.strip() in ("0", "1"):
        keep = env.strip() == "1"
        return keep, f"{ENV}={env.strip()}"
    if build_has_amx(system_info):
        return False, "llama.cpp was built with AMX, whose matrix path crashes on some CPUs (llama.cpp#20824)"
    return True, "llama.cpp was built without AMX"


def apply() -> dict[str, object]:
    """Make every llama.cpp model this process loads from now on avoid the AMX path where needed.

    Idempotent and thread-safe; returns what was decided ({"extra_buffers": bool, "reason": str,
    "supported": bool}: `supported` is False for a llama-cpp-python too old to have the switch)."""
    with _lock:
        if _state:
            return dict(_state)
        import llama_cpp.llama_cpp as lc

        keep, reason = extra_buffers_wanted(lc.llama_print_system_info(), os.environ.get(ENV))
        supported = "use_extra_bufts" in {name for name, *_ in lc.llama_model_params._fields_}
        if not keep and supported:
            default_params = lc.llama_model_default_params

            def model_params_without_extra_buffers():
                params = default_params()
                params.use_extra_bufts = False
                return params

            lc.llama_model_default_params = model_params_without_extra_buffers
        _state.update(extra_buffers=keep or not supported, reason=reason, supported=supported)
        return dict(_state)


def describe() -> str:
    """One line for `mnemo doctor`."""
    state = apply()
    if state["extra_buffers"]:
        return (
            "on"
            + ("" if state["supported"] else " (this llama-cpp-python cannot turn them off)")
            + f": {state['reason']}"
        )
    return f"off: {state['reason']}"
