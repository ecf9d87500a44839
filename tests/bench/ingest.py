"""Benchmark: import throughput (turns/s) on the LLM-free bulk path, through `mnemo ingest`'s code.

Imports ../shared/data/locomo/locomo-dev.json (or --data FILE) into a fresh store and
prints JSON with turns, pages, seconds and turns/s.

    python -m tests.bench.ingest [--data FILE]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(DEFAULT))
    args = parser.parse_args(argv)
    if not Path(args.data).is_file():
        raise SystemExit(f"no data file at {args.data} (the LoCoMo dev split lives in ../shared/data/locomo)")

    from app.importers import load, write_all
    from memory_core import MemoryStore
    from models.embedder import OnnxEmbedder

    emb = OnnxEmbedder()
    t0 = time.perf_counter()
    parsed = load(args.data)
    parse_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.open(
            Path(tmp) / "ingest.sqlite3",
            emb.embed,
            embed_model_id=emb.model_id,
            dim=emb.dim,
            embed_tokens=emb.embed_with_tokens,
        )
        report = write_all(store, parsed, path=args.data)
        store.close()
    out = {
        "benchmark": "ingest",
        "data": Path(args.data).name,
        "conversations": len(report.outcomes),
        "turns": report.turns_written,
        "pages": report.pages_written,
        "parse_s": round(parse_s, 3),
        "write_s": round(report.seconds, 2),
        "turns_per_s": round(report.turns_written / report.seconds, 1) if report.seconds else None,
    }
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
