"""Benchmark: the first reply after a restart, from a saved prompt state (activation memory) vs cold.

    python -m tests.bench.activation [--exchanges 10] [--traits 24] [--runs 5] [--threads N]

A chat of `--exchanges` long exchanges and a persona of `--traits` traits (system prompt + persona
about 500 tokens, the chat's prompt about 1.5-2k) are warmed once by a model with the profile's
activation cache on, which saves the chat's stable prompt beginning and the new-chat one to disk.
Then each run is a restart: a fresh model instance (an empty KV cache) answers one question, in the
chat and in a new chat, with the cache on ("restored": the state is loaded at that first reply, the
file read counted in its time) or off ("cold"); runs alternate. The time to first token is the
model's (from the prompt handed to it to the first token). llama.cpp's own counters say how many
tokens each reply evaluated, so a restore that silently did nothing would show. Prints JSON: medians,
the ratio restored / cold (target <= 0.15), disk bytes per cached token, what building cost.

`--threads N` sets llama.cpp's threads (default 0: the app's choice, all cores for a prompt). On a
machine whose cores other processes keep busy, ggml's threads wait for each other at every step and
a 25-token suffix took anywhere from 0.1 to 12 s; one thread (`--threads 1`) measures the model, not
the neighbours.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tests.bench.prompt_cache import _chat

TRAITS = [
    ("diet", "vegetarian for twelve years, eats eggs and cheese but never fish or meat"),
    ("hobby", "grows tomatoes, beans and courgettes on an allotment near the river every summer"),
    ("work", "works as a structural engineer on timber bridges for a small firm in Ghent"),
    ("family", "has two daughters, Ines who is nine and Lotte who is six, and a partner called Sam"),
    ("music", "plays the cello in an amateur orchestra that rehearses on Thursday evenings"),
    ("travel", "prefers trains to planes and has crossed Europe by night train three times"),
    ("reading", "reads Scandinavian crime novels and long histories of the Low Countries"),
    ("health", "has a mild pollen allergy in May and June and takes antihistamines then"),
    ("pets", "has an old tabby cat named Miso who sleeps on the radiator all winter"),
    ("language", "speaks Dutch at home, English at work and is learning Portuguese slowly"),
    ("sport", "swims two kilometres every Saturday morning at the municipal pool"),
    ("cooking", "bakes sourdough bread every weekend with a starter that is eight years old"),
    ("home", "lives in a narrow terraced house with a small courtyard garden and a shed"),
    ("values", "cares about repairing things instead of replacing them, and about quiet"),
    ("schedule", "wakes at six, works best before noon and avoids meetings after four"),
    ("tools", "uses a fountain pen, paper notebooks and a very old ThinkPad running Linux"),
    ("film", "likes slow films, especially Kiarostami, Ozu and Kelly Reichardt"),
    ("coffee", "drinks one espresso in the morning and only herbal tea after lunch"),
    ("learning", "is taking an evening course on soil science at the local university"),
    ("volunteering", "helps at a repair café once a month, mostly fixing bicycles and lamps"),
    ("fear", "is uneasy about heights and avoids ladders taller than two metres"),
    ("goal", "wants to build a timber footbridge over the allotment ditch this year"),
    ("car", "does not own a car and borrows a cargo bike from the neighbourhood share"),
    ("style", "likes short, practical answers with one clear recommendation first"),
]


def _reply(agent, cid: int, text: str, parent_id: int | None) -> dict:
    from models.llama_state import tokens_evaluated

    before = tokens_evaluated(agent.model._llm)
    r = agent.send(cid, text, parent_id=parent_id)
    return {
        "prompt_tokens": r.stats["prompt_tokens"],
        "cached_prompt_tokens": r.stats["cached_prompt_tokens"],
        "restored_prompt_tokens": r.stats.get("restored_prompt_tokens", 0),
        "evaluated_tokens": tokens_evaluated(agent.model._llm) - before,
        "ttft_s": round(r.stats["time_to_first_token_s"], 3),
        "reply": r.text,
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=10)
    ap.add_argument("--traits", type=int, default=len(TRAITS))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)

    from app.chat import activation_cache
    from app.chat.agent import ChatAgent
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel

    emb = OnnxEmbedder()

    def restart(data_dir: Path | None) -> LlamaCppChatModel:
        model = LlamaCppChatModel(n_ctx=4096, max_tokens=8, seed=1, temperature=0.0, n_threads=args.threads)
        if data_dir is not None:
            activation_cache.attach(model, data_dir)
        return model

    runs: dict[str, dict[str, list[dict]]] = {
        "chat": {"cold": [], "restored": []},
        "new_chat": {"cold": [], "restored": []},
    }
    with tempfile.TemporaryDirectory(prefix="mnemo-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        store = MemoryStore.open(
            os.path.join(tmp, "m.db"),
            emb.embed,
            embed_model_id=emb.model_id,
            dim=emb.dim,
            params=MemoryParams(),
            embed_tokens=emb.embed_with_tokens,
        )
        for dimension, value in TRAITS[: args.traits]:
            store.persona.add_trait(dimension, value)
        cid = _chat(store, args.exchanges)
        leaf = store.conversations.list_messages(cid)[-1].id

        model = restart(data_dir)  # the session before the restart: opening the chat warms and saves it
        t0 = time.perf_counter()
        warmed = ChatAgent(store, model, max_tokens=8).warm(cid, leaf_id=leaf)
        build_s = time.perf_counter() - t0
        model.close()
        cache = activation_cache.open_cache(data_dir)
        saved = activation_cache.summary(cache, store)

        for i in range(args.runs):
            for mode in ("cold", "restored"):
                model = restart(data_dir if mode == "restored" else None)
                agent = ChatAgent(store, model, max_tokens=8)
                runs["chat"][mode].append(_reply(agent, cid, f"Question {i}: what did we say about mulch?", leaf))
                model.close()
                model = restart(data_dir if mode == "restored" else None)
                agent = ChatAgent(store, model, max_tokens=8)
                new = agent.new_conversation()
                runs["new_chat"][mode].append(_reply(agent, new, f"Hello {i}: what should I cook tonight?", None))
                model.close()
        after = activation_cache.summary(cache, store)
        store.close()

    result: dict = {
        "benchmark": "activation",
        "model": model.model_id,
        "exchanges": args.exchanges,
        "traits": args.traits,
        "threads": args.threads or "auto",
        "saved_states": [{"slot": r.slot, "tokens": r.tokens, "bytes": r.size} for r in saved.rows],
        "disk_bytes_per_cached_token": round(saved.bytes_per_token or 0),
        "build_warm_s": round(build_s, 2),
        "build_warm_tokens": warmed,
        "hits": after.hits,
        "misses": after.misses,
    }
    for scenario, by_mode in runs.items():
        cold = statistics.median(r["ttft_s"] for r in by_mode["cold"])
        restored = statistics.median(r["ttft_s"] for r in by_mode["restored"])
        result[scenario] = {
            "prompt_tokens": statistics.median(r["prompt_tokens"] for r in by_mode["cold"]),
            "restored_prompt_tokens": statistics.median(r["restored_prompt_tokens"] for r in by_mode["restored"]),
            "evaluated_tokens_median_cold": statistics.median(r["evaluated_tokens"] for r in by_mode["cold"]),
            "evaluated_tokens_median_restored": statistics.median(r["evaluated_tokens"] for r in by_mode["restored"]),
            "ttft_s_median_cold": cold,
            "ttft_s_median_restored": restored,
            "ratio_restored_over_cold": round(restored / cold, 3) if cold else None,
            "same_replies": [r["reply"] for r in by_mode["cold"]] == [r["reply"] for r in by_mode["restored"]],
            "runs": by_mode,
        }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
