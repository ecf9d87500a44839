"""Benchmark: does the assistant stay itself over a long chat, or start reciting its earlier replies?

A chat of one message after another is where a small local model degrades: each reply it wrote is in
the next prompt, and the bundled 135M model copies whole paragraphs of them back ("As a mermaid, Leo
has always loved playing the violin…" in four replies running), so replies grow with recycled text.
Single messages (tests.bench.reply_quality) never show it. This sends one scripted chat of statements
and, later, questions about them, through the real `ChatAgent` (memory on, the app's sampling
defaults), a few seeds, and prints JSON:

- `copied_sentence_rate`: reply sentences (4+ words of letters) said before, word for word, in an
  earlier reply of the same chat; `replies_copying_rate`: replies holding at least one;
- `recall_hit_rate`: the questions at the end whose reply names what was said earlier in the chat;
- `stopped_repeating_rate`, medians of completion tokens (overall and per turn) and seconds per reply.

    python -m tests.bench.long_chat [--seeds 3] [--first-seed 7000] [--chat tune|held-out] [--max-tokens 512]
        [--self-repeat-penalty P] [--recall-own-after N] [--off RULE,RULE] [--no-guard] [--show]

`--off` switches quoting rules off by name (`app.chat.prompting.QUOTING_RULES`), for the ablation.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

# (message, words of which the reply should name one, or None)
CHAT = [
    ("Hi! I adopted a beagle called Pepper last week.", None),
    ("My sister Ana moved to Lisbon in June.", None),
    ("I'm allergic to shellfish, so no shrimp for me.", None),
    ("I started working as a pharmacist at a hospital.", None),
    ("We're flying to Reykjavik for our honeymoon in February.", None),
    ("My son Leo just turned four.", None),
    ("I've been learning to play the violin for two years.", None),
    ("My car is a red 2015 Honda Civic.", None),
    ("What is my dog called?", ("pepper",)),
    ("Where does my sister live now?", ("lisbon",)),
    ("What am I allergic to?", ("shellfish", "shrimp")),
    ("Which instrument am I learning?", ("violin",)),
]
# written after the defaults were chosen on CHAT, to check them on other words (`--chat held-out`)
HELD_OUT = [
    ("Good morning! I just got back from a week of hiking in the Dolomites.", None),
    ("My brother Tomasz is a firefighter in Gdansk.", None),
    ("I can't eat gluten, I have coeliac disease.", None),
    ("I teach chemistry at a secondary school.", None),
    ("Our cat Miso knocked a plant off the shelf again.", None),
    ("I'm training for a 10k race in May.", None),
    ("My favourite band is Radiohead.", None),
    ("We painted the kitchen yellow last weekend.", None),
    ("What is my cat's name?", ("miso",)),
    ("What does my brother do?", ("firefighter", "fire")),
    ("Which subject do I teach?", ("chemistry",)),
    ("What colour is our kitchen now?", ("yellow",)),
]
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD = re.compile(r"[^\W\d_]{2,}")


def sentences(text: str) -> list[str]:
    """Normalised sentences of 4+ words of letters (shorter ones repeat innocently: "Thank you!")."""
    out = []
    for s in _SENTENCE.findall(text):
        words = _WORD.findall(s.lower())
        if len(words) >= 4:
            out.append(" ".join(words))
    return out


def copied(reply: str, earlier: list[str]) -> tuple[int, int]:
    """(sentences of `reply`, those said word for word in one of the `earlier` replies)."""
    seen = {s for e in earlier for s in sentences(e)}
    own = sentences(reply)
    return len(own), sum(s in seen for s in own)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=7000, help="seeds are FIRST, FIRST+1, …")
    parser.add_argument("--max-tokens", type=int, default=None, help="default: the app's (512)")
    parser.add_argument("--no-guard", action="store_true", help="the agent's repetition guard off")
    parser.add_argument(
        "--self-repeat-penalty",
        type=float,
        default=None,
        help="LlamaCppConfig.self_repeat_penalty (0: off; default: the app's)",
    )
    parser.add_argument(
        "--recall-own-after",
        type=int,
        default=None,
        help="MemoryParams.quoting.recall_own_after (99: the chat's own pages never quoted)",
    )
    parser.add_argument(
        "--off", default="", help="quoting rules switched off, comma-separated (app.chat.prompting.QUOTING_RULES)"
    )
    parser.add_argument(
        "--chat",
        choices=("tune", "held-out"),
        default="tune",
        help="which scripted chat (held-out: written after the defaults were chosen)",
    )
    parser.add_argument("--show", action="store_true", help="print every reply")
    args = parser.parse_args(argv)
    chat = CHAT if args.chat == "tune" else HELD_OUT

    from app.chat.agent import ChatAgent
    from app.chat.prompting import switched_off
    from app.settings import ChatModelSettings
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel
    from tests.bench.agent_overhead import _median

    d = ChatModelSettings()
    max_tokens = args.max_tokens or d.max_tokens
    emb = OnnxEmbedder()
    model = LlamaCppChatModel(
        n_ctx=d.n_ctx,
        max_tokens=max_tokens,
        temperature=d.temperature,
        top_p=d.top_p,
        min_p=d.min_p,
        repeat_penalty=d.repeat_penalty,
        seed=0,
    )
    if args.self_repeat_penalty is not None:
        model.config.self_repeat_penalty = args.self_repeat_penalty
    params = MemoryParams()
    if args.recall_own_after is not None:
        params.quoting.recall_own_after = args.recall_own_after
    rows = []
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:  # a fresh memory per seed: the chat is the user's first
            store = MemoryStore.open(
                Path(tmp) / "bench.sqlite3",
                emb.embed,
                embed_model_id=emb.model_id,
                dim=emb.dim,
                params=params,
                embed_tokens=emb.embed_with_tokens,
            )
            agent = ChatAgent(
                store, model, reply_reserve=d.reply_reserve, max_tokens=max_tokens, repetition_guard=not args.no_guard
            )
            agent.quoting_off = switched_off(filter(None, args.off.split(",")))
            model.set_seed(args.first_seed + seed)
            cid = agent.new_conversation()
            earlier: list[str] = []
            for turn, (text, expect) in enumerate(chat):
                t0 = time.perf_counter()
                result = agent.send(cid, text)
                seconds = time.perf_counter() - t0
                store.jobs.run_pending(allow_llm=False)  # the app's memory jobs between turns
                n, c = copied(result.text, earlier)
                rows.append(
                    {
                        "seed": seed,
                        "turn": turn,
                        "message": text,
                        "reply": result.text,
                        "seconds": seconds,
                        "tokens": result.stats["completion_tokens"],
                        "sentences": n,
                        "copied": c,
                        "guarded": result.stats.get("finish_reason") == "repetition",
                        "recall_hit": None if expect is None else any(w in result.text.lower() for w in expect),
                    }
                )
                earlier.append(result.text)
                if args.show:
                    print(f"--- [{seed}] {text}\n{result.text}\n", flush=True)
            store.close()
    model.close()
    total = sum(r["sentences"] for r in rows)
    later = [r for r in rows if r["turn"] > 0]
    recall = [r["recall_hit"] for r in rows if r["recall_hit"] is not None]
    out = {
        "benchmark": "long_chat",
        "chat": args.chat,
        "model": model.model_id,
        "seeds": args.seeds,
        "turns": len(chat),
        "max_tokens": max_tokens,
        "repetition_guard": not args.no_guard,
        "self_repeat_penalty": model.config.self_repeat_penalty,
        "recall_own_after": params.quoting.recall_own_after,
        "quoting_off": sorted(filter(None, args.off.split(","))),
        "copied_sentence_rate": round(sum(r["copied"] for r in rows) / total, 3) if total else 0.0,
        "replies_copying_rate": round(sum(r["copied"] > 0 for r in later) / len(later), 3),
        "recall_hit_rate": round(sum(recall) / len(recall), 3) if recall else None,
        "stopped_repeating_rate": round(sum(r["guarded"] for r in rows) / len(rows), 3),
        "completion_tokens_p50": _median([r["tokens"] for r in rows]),
        "completion_tokens_p50_by_turn": [
            _median([r["tokens"] for r in rows if r["turn"] == t]) for t in range(len(chat))
        ],
        "seconds_per_reply_p50": _median([r["seconds"] for r in rows]),
    }
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
