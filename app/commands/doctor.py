"""`mnemo doctor`: versions, resolved model paths, data dir, and a timed embed + 5-token generation."""

from __future__ import annotations

import json
import platform
import time
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from types import ModuleType

    from app.commands._common import SubParsers
    from app.context import AppContext


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def collect(ctx: AppContext, *, run_models: bool = True) -> dict[str, Any]:
    """Gather the doctor report as a dict (also used by the self-test)."""
    import apsw
    import sqlite_vec

    from app import __version__

    report: dict[str, Any] = {
        "mnemo": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite (apsw)": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "sqlite-vec": _sqlite_vec_version(apsw, sqlite_vec),
        "onnxruntime": _version("onnxruntime"),
        "llama-cpp-python": _version("llama-cpp-python"),
        "llama.cpp extra buffers": _llama_extra_buffers(),
        "PySide6": _version("PySide6-Essentials"),
        "config dir": str(ctx.paths.config_dir),
        "data dir": str(ctx.paths.data_dir),
        "database": str(ctx.paths.db_file),
    }
    chat = ctx.settings.chat
    report["chat backend"] = chat.backend
    if not run_models:
        return report
    try:
        t0 = time.perf_counter()
        emb = ctx.embedder()
        report["embedder"] = f"{emb.model_path} (+ {emb.tokenizer_path})"
        report["embedder load ms"] = round((time.perf_counter() - t0) * 1000, 1)
        t0 = time.perf_counter()
        vec = emb.embed(["Mnemo remembers what matters."])
        report["embed one sentence ms"] = round((time.perf_counter() - t0) * 1000, 1)
        report["embedding dim"] = int(vec.shape[1])
    except Exception as exc:
        report["embedder error"] = str(exc)
    try:
        t0 = time.perf_counter()
        model = ctx.chat_model()
        report["chat model"] = str(getattr(model, "model_path", None) or getattr(model, "base_url", model.model_id))
        report["chat model load ms"] = round((time.perf_counter() - t0) * 1000, 1)
        t0 = time.perf_counter()
        text = "".join(model.stream([{"role": "user", "content": "Say hello."}], max_tokens=5, temperature=0.0))
        report["generate 5 tokens ms"] = round((time.perf_counter() - t0) * 1000, 1)
        report["generated"] = text
        report["generated tokens"] = model.last_stats.completion_tokens
    except Exception as exc:
        report["chat model error"] = str(exc)
    return report


def _llama_extra_buffers() -> str:
    try:
        from models import llama_runtime

        return llama_runtime.describe()
    except Exception as exc:
        return f"unknown ({exc})"


def _sqlite_vec_version(apsw: ModuleType, sqlite_vec: ModuleType) -> str:
    conn = apsw.Connection(":memory:")
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        return conn.execute("select vec_version()").fetchone()[0]
    except Exception as exc:
        return f"cannot load ({exc})"
    finally:
        conn.close()


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    report = collect(ctx, run_models=not args.no_models)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        width = max(len(k) for k in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    failed = any(k.endswith("error") for k in report)
    return 1 if failed else 0


def register(sub: SubParsers) -> None:
    p = sub.add_parser("doctor", help="print versions, model paths and a timed embed + generate")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--no-models", action="store_true", help="skip loading the models")
    p.set_defaults(func=run)
