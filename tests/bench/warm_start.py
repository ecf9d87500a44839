"""Benchmark: the first reply after opening a long chat, with and without warming the prompt cache.

    python -m tests.bench.warm_start [--exchanges 8] [--runs 3]

When a conversation is opened (or the app starts, or a reply ends), the window lets the model
process the prompt's stable beginning (system prompt, persona, dialogue) while the user reads or
types (`ChatAgent.warm`, on the LLM thread, in chunks a chat turn interrupts). This measures, on the
bundled model through the real agent and store, the time to first token of one question asked in
a chat of `--exchanges` long exchanges right after a fresh start (nothing cached: the KV cache is
reset before each run), cold vs after warming. Runs alternate; prints JSON with the medians, the
ratio, and how long warming took (the user's reading/typing time it needs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tests.bench.prompt_cache import _chat


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)

    from app.chat.agent import ChatAgent
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel

    emb = OnnxEmbedder()
    model = LlamaCppChatModel(n_ctx=4096, max_tokens=8, seed=1, temperature=0.0)
    runs: dict[str, list[dict]] = {"cold": [], "warmed": []}
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as tmp:
        store = MemoryStore.open(
            os.path.join(tmp, "m.db"),
            emb.embed,
            embed_model_id=emb.model_id,
            dim=emb.dim,
            params=MemoryParams(),
            embed_tokens=emb.embed_with_tokens,
        )
        cid = _chat(store, args.exchanges)
        leaf = store.conversations.list_messages(cid)[-1].id
        agent = ChatAgent(store, model, max_tokens=8)
        for i in range(args.runs):
            for mode in ("cold", "warmed"):
                model._llm.reset()  # a fresh start: nothing of this chat is cached
                warm_s, warmed = 0.0, 0
                if mode == "warmed":
                    t0 = time.perf_counter()
                    warmed = agent.warm(cid, leaf_id=leaf)
                    warm_s = time.perf_counter() - t0
                r = agent.send(cid, f"Question {i}: what did we say about mulch?", parent_id=leaf)
                runs[mode].append(
                    {
                        "prompt_tokens": r.stats["prompt_tokens"],
                        "cached_prompt_tokens": r.stats["cached_prompt_tokens"],
                        "ttft_s": round(r.stats["time_to_first_token_s"], 3),
                        "warm_tokens": warmed,
                        "warm_s": round(warm_s, 2),
                    }
                )
        store.close()
    model.close()
    cold = statistics.median(r["ttft_s"] for r in runs["cold"])
    warm = statistics.median(r["ttft_s"] for r in runs["warmed"])
    result = {
        "benchmark": "warm_start",
        "exchanges": args.exchanges,
        "model": model.model_id,
        "ttft_s_median_cold": cold,
        "ttft_s_median_warmed": warm,
        "ratio_cold_over_warmed": round(cold / warm, 1) if warm else None,
        "warm_s_median": statistics.median(r["warm_s"] for r in runs["warmed"]),
        "runs": runs,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
