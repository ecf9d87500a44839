"""`mnemo bench [NAME…]`: run the benchmarks in tests/bench (each prints JSON) from a source checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands._common import fail

if TYPE_CHECKING:
    import argparse

    from app.commands._common import SubParsers
    from app.context import AppContext

BENCHMARKS = [
    "retrieval",
    "ingest",
    "agent_overhead",
    "reply_quality",
    "long_chat",
    "quote_floor",
    "prompt_cache",
    "warm_start",
    "ui_latency",
    "app_startup",
    "inspector_scale",
    "fault_injection",
    "mcp_latency",
    "forget_cost",
    "activation",
    "cube_roundtrip",
    "whose_memory",
    "spaces",
    "distill",
    "vector_scale",
    "million_pages",
    "space_merge",
]


def _bench_dir() -> Path | None:
    here = Path(__file__).resolve().parents[2] / "tests" / "bench"
    return here if here.is_dir() else None


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    bench_dir = _bench_dir()
    if bench_dir is None:
        return fail("the benchmarks live in tests/bench of a source checkout; run mnemo from one (pip install -e .)")
    names = args.names or [n for n in BENCHMARKS if (bench_dir / f"{n}.py").exists()]
    unknown = [n for n in names if not (bench_dir / f"{n}.py").exists()]
    if unknown:
        return fail(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(BENCHMARKS)}")
    status = 0
    for name in names:
        print(f"== {name}", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", f"tests.bench.{name}", *args.extra]
        status |= subprocess.call(cmd, cwd=bench_dir.parents[1])
    return 1 if status else 0


def register(sub: SubParsers) -> None:
    p = sub.add_parser(
        "bench",
        help="run the benchmarks (retrieval, ingest, agent_overhead, reply_quality, long_chat, quote_floor, prompt_cache, warm_start, ui_latency, app_startup, inspector_scale, fault_injection, mcp_latency, forget_cost, activation, cube_roundtrip, whose_memory, spaces, distill, vector_scale, million_pages, space_merge; inspector_scale builds a 100k-page store the first time, million_pages a million-page one each run)",
    )
    p.add_argument("names", nargs="*", help="which ones (default: all)")
    p.add_argument("--extra", nargs="*", default=[], help="arguments passed to each benchmark")
    p.set_defaults(func=run)
