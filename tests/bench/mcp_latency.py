"""Benchmark: an MCP search round trip against the same retrieval in-process, at 10k pages.

    python -m tests.bench.mcp_latency [--pages 10000] [--queries 40] [--rebuild] [--cache DIR]

Builds (once, cached under /tmp like tests.bench.inspector_scale, whose builder it uses) a store of N
pages, then starts `mnemo mcp` on it as a subprocess and talks to it with the official SDK's stdio
client. Each query is timed twice, alternately, so both sides see the same load: in this process,
`MemoryStore.retrieve` with the search tool's budget (10 pages, 10 facts; the query embedded for
real, no visits recorded); and over MCP, a `search_memory` call from send to parsed result (the
server embeds and retrieves the same way, then the result crosses JSON-RPC on a pipe). Both stores
have their page matrix loaded first, and a few warm-up queries run on each side.

Prints one JSON object: the medians and 95th percentiles of both, the ratio of the medians with its
target (≤ 1.5), and the server's own retrieval time as it reported it, so the protocol's share is
visible. Wall-clock figures depend on what else runs: the load average is in the JSON too.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the app sets it (see tests/bench/retrieval.py)

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

TARGET_RATIO = 1.5
QUERIES = [
    "What did we say about the garden and the tomatoes?",
    "my guitar practice",
    "Which hotel did I book for the holiday?",
    "coffee and breakfast on the weekend",
    "the project deadline and my manager",
    "When is the doctor appointment?",
    "recipes with pasta and cheese",
    "learning japanese grammar verbs",
    "the puppy and the park",
    "museum visit and the painting",
]


def _percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def _measure(ctx, data: Path, config: Path, queries: list[str], warm: int) -> dict:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp_types import Implementation

    from memory_core import RetrievalBudget

    repo = Path(__file__).resolve().parents[2]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "--data-dir", str(data), "--config-dir", str(config), "mcp"],
        cwd=str(repo),
        env={"OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(repo)},
    )
    store = ctx.open_store()
    store.retrieval.warm_up()
    budget = RetrievalBudget(pages=10, knowledge=10)
    local_ms, mcp_ms, server_ms = [], [], []
    with open(os.devnull, "w") as quiet:
        async with Client(
            stdio_client(params, errlog=quiet), client_info=Implementation(name="mcp_latency", version="1")
        ) as client:
            for i, q in enumerate([*queries[:warm], *queries]):
                t0 = time.perf_counter()
                store.retrieve(q, None, budget, record_visits=False)
                t1 = time.perf_counter()
                result = await client.call_tool("search_memory", {"query": q, "limit": 10})
                t2 = time.perf_counter()
                if result.is_error:
                    raise RuntimeError(result.content[0].text)
                if i >= warm:
                    local_ms.append((t1 - t0) * 1000)
                    mcp_ms.append((t2 - t1) * 1000)
                    server_ms.append(float(result.structured_content["timings_ms"]["total"]))
    store.close()
    return {"in_process_ms": local_ms, "mcp_ms": mcp_ms, "server_retrieval_ms": server_ms}


def main(argv: list[str] | None = None) -> int:
    import anyio

    from tests.bench.inspector_scale import _paths, open_ctx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=40, help="timed queries (the list of ten, repeated)")
    ap.add_argument("--warm", type=int, default=3, help="untimed queries first, on both sides")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--cache", default=os.environ.get("MNEMO_BENCH_CACHE", "/tmp/mnemo-bench-inspector"))
    args = ap.parse_args(argv)
    ctx, build_s = open_ctx(Path(args.cache), args.pages, args.rebuild)
    data, config, _ = _paths(Path(args.cache), args.pages)
    queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
    times = anyio.run(_measure, ctx, data, config, queries, args.warm)
    local, remote = statistics.median(times["in_process_ms"]), statistics.median(times["mcp_ms"])
    out: dict = {
        "benchmark": "mcp_latency",
        "store_pages": args.pages,
        "store_build_s": build_s,
        "queries": len(queries),
        "in_process_retrieval_p50_ms": round(local, 2),
        "in_process_retrieval_p95_ms": round(_percentile(times["in_process_ms"], 0.95), 2),
        "mcp_search_p50_ms": round(remote, 2),
        "mcp_search_p95_ms": round(_percentile(times["mcp_ms"], 0.95), 2),
        "mcp_server_retrieval_p50_ms": round(statistics.median(times["server_retrieval_ms"]), 2),
        "ratio_p50": round(remote / local, 3),
        "target_ratio": TARGET_RATIO,
    }
    try:
        out["machine"] = {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}
    except OSError:  # pragma: no cover - no getloadavg on this platform
        pass
    out["ok"] = out["ratio_p50"] <= TARGET_RATIO
    print(json.dumps(out, indent=2))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
