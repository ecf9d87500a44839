"""Benchmark: time to first token in a long chat, with recalled memory placed after the dialogue
(the composer's layout) vs before it (the first design's layout), through the real agent.

    python -m tests.bench.prompt_cache [--exchanges 8] [--questions 4]

A conversation of `--exchanges` long exchanges is written to a fresh store (no model time),
30 pages of other memories are imported, then `--questions` questions are asked in that chat
with each layout, alternating, on one loaded model. llama.cpp reuses the KV cache of the
longest common prefix with its previous prompt: when what is recalled (different for every
question) comes after the dialogue, the dialogue stays cached. Prints JSON: the prompt size
and time to first token of each question, and the median of questions 2.. per layout (the
first question of a run pays for the whole prompt either way).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

CITIES = [
    ("Lisbon", "May"),
    ("Kyoto", "April"),
    ("Oslo", "June"),
    ("Lima", "March"),
    ("Cairo", "July"),
    ("Quito", "August"),
]
QUESTIONS = [
    "Where did I travel in spring?",
    "What food did I like in Kyoto?",
    "Tell me about Oslo.",
    "Which city was in July?",
    "Did I enjoy Lima?",
    "What about Quito in August?",
]


def _chat(store, n_exchanges: int) -> int:
    cid = store.conversations.create_conversation("long chat")
    for i in range(n_exchanges):
        store.conversations.add_message(cid, "user", f"Question {i}: how do gardens handle drought in region {i}?")
        store.conversations.add_message(
            cid,
            "assistant",
            "Gardens adapt to drought with mulch, deep watering, native plants and shade. " * 6 + f"That is point {i}.",
        )
    return cid


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=8)
    ap.add_argument("--questions", type=int, default=4)
    args = ap.parse_args(argv)

    from app.chat.agent import ChatAgent
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel

    emb = OnnxEmbedder()
    model = LlamaCppChatModel(n_ctx=4096, max_tokens=24, seed=1, temperature=0.0)
    result: dict = {"benchmark": "prompt_cache", "exchanges": args.exchanges, "model": model.model_id, "layouts": {}}
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as tmp:
        for layout, at_end in (("recall_after_dialogue", True), ("recall_before_dialogue", False)):
            store = MemoryStore.open(
                os.path.join(tmp, f"{layout}.db"),
                emb.embed,
                embed_model_id=emb.model_id,
                dim=emb.dim,
                params=MemoryParams(),
                embed_tokens=emb.embed_with_tokens,
            )
            other = store.conversations.create_conversation("trips")
            store.intake.add_pages(
                other,
                [
                    {
                        "user_text": f"I went to {c} in {m} and loved the food there.",
                        "assistant_text": f"{c} sounds wonderful!",
                    }
                    for c, m in CITIES * 5
                ],
            )
            cid = _chat(store, args.exchanges)
            agent = ChatAgent(store, model, max_tokens=24)
            agent._recall_at_end = at_end
            turns = []
            for q in QUESTIONS[: args.questions]:
                r = agent.send(cid, q)
                turns.append(
                    {"prompt_tokens": r.stats["prompt_tokens"], "ttft_s": round(r.stats["time_to_first_token_s"], 3)}
                )
            store.close()
            later = [t["ttft_s"] for t in turns[1:]] or [turns[0]["ttft_s"]]
            result["layouts"][layout] = {
                "turns": turns,
                "ttft_s_median_after_first": round(statistics.median(later), 3),
            }
    a = result["layouts"]["recall_after_dialogue"]["ttft_s_median_after_first"]
    b = result["layouts"]["recall_before_dialogue"]["ttft_s_median_after_first"]
    result["speedup_after_over_before"] = round(b / a, 2) if a else None
    model.close()
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
