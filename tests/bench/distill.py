"""Benchmark: memory into parameters. 20 facts told in chat, then closed-book answers to 20 questions
about them (no retrieval, no Mnemo system prompt: the question alone, the bundled model, greedy),
with the adapter `mnemo memory distill` trains off (before) and on (after).

    python -m tests.bench.distill [--steps 80] [--threads 2] [--rank 8]

Each fact is told as a chat message ("Remember that my sister's name is Clara.") through the real
chat turn (app.operations.chats.send, the bundled SmolLM2-135M), which keeps it in the persona; distilling
then reads the memory (app.parametric.distill.collect_pairs) and trains on the CPU (the [train] extra). The
questions are worded as a person would ask them, not always as the distiller words its own (e.g.
"What is my dog's name?" for "My dog is called Biscuit"; "What instrument does my brother play?"
matches no rule of the distiller's). Score: the share of answers holding the fact's key word (a whole
word, any case). Prints JSON: facts held, pairs, steps, training time, before/after scores, each answer.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

FACTS = [
    ("My sister's name is Clara.", "What is my sister's name?", "clara"),
    ("My dog is called Biscuit.", "What is my dog's name?", "biscuit"),
    ("I live in Lisbon.", "Where do I live?", "lisbon"),
    ("I drive a green Volvo.", "What car do I drive?", "volvo"),
    ("My favourite colour is teal.", "What is my favourite colour?", "teal"),
    ("I work as a pharmacist.", "What is my job?", "pharmacist"),
    ("My brother plays the trumpet.", "What instrument does my brother play?", "trumpet"),
    ("I was born in Montreal.", "Where was I born?", "montreal"),
    ("My partner is called Sam.", "What is my partner called?", "sam"),
    ("I am allergic to peanuts.", "What am I allergic to?", "peanuts?"),
    ("My cat is named Pixel.", "What is my cat's name?", "pixel"),
    ("I speak Finnish.", "What language do I speak?", "finnish"),
    ("My birthday is on March 3rd.", "When is my birthday?", "march"),
    ("I play the cello.", "What instrument do I play?", "cello"),
    ("My favourite food is ramen.", "What is my favourite food?", "ramen"),
    ("I grew up in Nairobi.", "Where did I grow up?", "nairobi"),
    ("My son is called Tomas.", "What is my son's name?", "tomas"),
    ("I drink oolong tea every morning.", "What tea do I drink?", "oolong"),
    ("My flat is on Baker Street.", "What street is my flat on?", "baker"),
    ("I collect vintage stamps.", "What do I collect?", "stamps?"),
]


def _answers(model) -> list[str]:
    return [
        "".join(model.stream([{"role": "user", "content": q}], max_tokens=24, temperature=0.0)) for _, q, _ in FACTS
    ]


def _score(answers: list[str]) -> float:
    hits = [bool(re.search(rf"\b{key}\b", a, re.IGNORECASE)) for a, (_, _, key) in zip(answers, FACTS, strict=True)]
    return sum(hits) / len(hits)


def _tell(ctx, store) -> int:
    from app.chat.session import ChatSession
    from app.operations import chats as operations

    session = ChatSession()
    model = ctx.chat_model()
    for fact, _, _ in FACTS:
        operations.send(session, store, model, f"Remember that {fact[0].lower()}{fact[1:]}")
    return len(store.persona.list_knowledge("user"))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rank", type=int, default=8)
    args = ap.parse_args(argv)
    from app.context import AppContext
    from app.parametric import distill
    from models.llama_cpp_backend import LlamaCppChatModel
    from models.resolve import default_gguf_path

    with tempfile.TemporaryDirectory(prefix="mnemo-bench-distill-") as tmp:
        ctx = AppContext.create(Path(tmp) / "config", Path(tmp) / "data")
        ctx.settings.chat.max_tokens = 12
        store = ctx.open_store()
        t = time.perf_counter()
        held = _tell(ctx, store)
        tell_s = time.perf_counter() - t
        config = distill.DistillConfig(steps=args.steps, threads=args.threads, rank=args.rank)
        pairs = distill.collect_pairs(store, config)
        store.close()
        ctx.reset_chat_model()
        result = distill.train_adapter(default_gguf_path(), pairs, Path(tmp) / "memory.gguf", config)
        model = LlamaCppChatModel(n_ctx=1024, seed=1, temperature=0.0, n_threads=args.threads)
        before = _answers(model)
        model.set_adapters([(result.path, 1.0)])
        after = _answers(model)
        model.close()
        size = result.path.stat().st_size
    out = {
        "facts_told": len(FACTS),
        "facts_held": held,
        "telling_s": round(tell_s, 1),
        "pairs": result.pairs,
        "steps": result.steps,
        "rank": args.rank,
        "threads": args.threads,
        "training_s": round(result.seconds, 1),
        "loss": [round(result.first_loss, 3), round(result.last_loss, 4)],
        "adapter_bytes": size,
        "before": _score(before),
        "after": _score(after),
        "answers": [
            {"q": q, "key": key, "before": b, "after": a}
            for (_, q, key), b, a in zip(FACTS, before, after, strict=True)
        ],
    }
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return out


if __name__ == "__main__":
    main()
