"""Benchmark: time to first token and tokens/s through the ChatAgent vs raw llama-cpp-python.

Both sides run the bundled GGUF in their own llama.cpp instance (so neither reuses the
other's KV cache) on the same composed prompts; the ratio is the agent's overhead
(retrieval, prompt composition, database writes). Prints JSON.

    python -m tests.bench.agent_overhead [--turns 6] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

QUESTIONS = [
    "What did I say about my garden last week?",
    "Can you remind me what my sister does for a living?",
    "Summarise what we talked about regarding my trip to Japan.",
    "Which book did I say I was reading?",
    "What is my favourite kind of music?",
    "What did I cook for dinner on Friday?",
    "How is my training for the marathon going?",
    "What was the name of my first dog?",
]
FILLER = [
    ("I planted tomatoes and basil in the garden.", "Lovely, they grow well together."),
    ("My sister works as a nurse in Leeds.", "That is demanding work."),
    ("We are planning a trip to Kyoto and Osaka in spring.", "Cherry blossom season is beautiful."),
    ("I'm reading 'The Name of the Rose'.", "A classic mystery in a monastery."),
    ("I love jazz, especially Bill Evans.", "His trio recordings are wonderful."),
    ("On Friday I made a mushroom risotto.", "Sounds delicious."),
    ("I ran 25 km today as marathon training.", "Great progress!"),
    ("My first dog was a beagle called Pepper.", "Beagles are so friendly."),
]


def _history(store, exchanges) -> int:
    """An earlier conversation whose (user, assistant) `exchanges` are memory pages, an hour apart."""
    cid = store.conversations.create_conversation("history")
    store.intake.add_pages(
        cid,
        [
            {"user_text": u, "assistant_text": a, "timestamp": 1_700_000_000 + i * 3600}
            for i, (u, a) in enumerate(exchanges)
        ],
    )
    return cid


def _median(xs):
    return round(statistics.median(xs), 4) if xs else None


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args(argv)

    from app.chat.agent import ChatAgent
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel

    emb = OnnxEmbedder()
    agent_model = LlamaCppChatModel(n_ctx=4096, max_tokens=args.max_tokens, temperature=0.0, seed=1)
    raw_model = LlamaCppChatModel(n_ctx=4096, max_tokens=args.max_tokens, temperature=0.0, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore.open(
            Path(tmp) / "bench.sqlite3",
            emb.embed,
            embed_model_id=emb.model_id,
            dim=emb.dim,
            params=MemoryParams.from_flat(stm_capacity=2),
            embed_tokens=emb.embed_with_tokens,
        )
        _history(store, FILLER * 4)
        agent = ChatAgent(store, agent_model, reply_reserve=512, max_tokens=args.max_tokens)
        rows = []
        for i in range(args.turns):
            q = QUESTIONS[i % len(QUESTIONS)]
            cid = agent.new_conversation()
            t0 = time.perf_counter()
            first = []
            result = agent.send(cid, q, on_token=lambda c, first=first: first or first.append(time.perf_counter()))
            agent_total = time.perf_counter() - t0
            agent_ttft = first[0] - t0 if first else None
            agent_tokens = result.stats["completion_tokens"]

            # raw llama-cpp-python on the exact same messages
            llm = raw_model._llm
            t0 = time.perf_counter()
            raw_first, raw_tokens = None, 0
            for chunk in llm.create_chat_completion(
                messages=result.prompt.messages, max_tokens=args.max_tokens, temperature=0.0, stream=True
            ):
                if chunk["choices"][0].get("delta", {}).get("content"):
                    raw_tokens += 1
                    raw_first = raw_first or time.perf_counter()
            raw_total = time.perf_counter() - t0
            rows.append(
                {
                    "prompt_tokens": result.stats["prompt_tokens"],
                    "agent_ttft_s": agent_ttft,
                    "raw_ttft_s": raw_first - t0 if raw_first else None,
                    "agent_tok_s": agent_tokens / (agent_total - agent_ttft)
                    if agent_ttft and agent_tokens > 1
                    else None,
                    "raw_tok_s": raw_tokens / (raw_total - (raw_first - t0)) if raw_first and raw_tokens > 1 else None,
                    "retrieve_ms": result.stats["retrieve_ms"],
                    "compose_ms": result.stats["compose_ms"],
                }
            )
            store.jobs.run_pending(allow_llm=False)
        store.close()

    def col(k):
        return [r[k] for r in rows if r[k] is not None]

    out = {
        "benchmark": "agent_overhead",
        "turns": len(rows),
        "max_tokens": args.max_tokens,
        "median_prompt_tokens": _median(col("prompt_tokens")),
        "agent_ttft_s_p50": _median(col("agent_ttft_s")),
        "raw_ttft_s_p50": _median(col("raw_ttft_s")),
        "agent_tok_s_p50": _median(col("agent_tok_s")),
        "raw_tok_s_p50": _median(col("raw_tok_s")),
        "retrieve_ms_p50": _median(col("retrieve_ms")),
        "compose_ms_p50": _median(col("compose_ms")),
    }
    if out["agent_ttft_s_p50"] and out["raw_ttft_s_p50"]:
        out["ttft_ratio_agent_over_raw"] = round(out["agent_ttft_s_p50"] / out["raw_ttft_s_p50"], 3)
    if out["agent_tok_s_p50"] and out["raw_tok_s_p50"]:
        out["tok_s_ratio_agent_over_raw"] = round(out["agent_tok_s_p50"] / out["raw_tok_s_p50"], 3)
    print(json.dumps(out, indent=2))
    agent_model.close()
    raw_model.close()
    return out


if __name__ == "__main__":
    main()
