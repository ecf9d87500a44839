"""`python -m models.llama_server ARGS`: llama-cpp-python's OpenAI-compatible server (same ARGS as
`python -m llama_cpp.server`), loading its model the way Mnemo does (`models.llama_runtime`: off
llama.cpp's AMX path where that crashes)."""

from __future__ import annotations

import runpy

from models import llama_runtime


def main() -> None:
    llama_runtime.apply()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
