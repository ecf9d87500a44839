"""Benchmark: is what the chat model says through the agent usable? Runaway, loops, language, recall.

A tiny local model (the bundled SmolLM2-135M) sampled carelessly rambles: it can drift into
another language after one unlucky token and repeat a line until `max_tokens`. This runs typical
messages (small talk, statements, general questions, and 16 questions about an earlier
conversation of 16 exchanges, whose answers are in memory) through the real `ChatAgent`, a few
seeds each, and prints JSON:

- `runaway_rate`: replies that ran to `max_tokens`;
- `loop_rate`: replies in which a sentence or line occurs three times or more;
- `stopped_repeating_rate`: replies the agent's repetition guard cut short;
- `non_english_rate`: replies with more French/Spanish/German/Italian function words than English ones;
- `invented_turn_rate`: replies that write the dialogue on ("User: …", "(user) …" lines), as shown;
  `markup_rate`: replies that wrote the prompt's <memory> tags (the agent drops the tags);
  `quoting_rate`: replies in which the model wrote the quoted pages' notation back (role labels, page
  headers; `app.chat.quoted_turns` takes them out), `turn_cut_rate`: those ended where they began a turn
  nobody said;
- `recall_hit_rate`: questions about earlier talk whose reply names the remembered detail, overall
  and for the odd and even questions apart (`recall_hit_rate_halves`: tune a prompt on one half,
  check it on the other); `recall_hits`: per question, over the seeds;
- medians of completion tokens and seconds per reply.

    python -m tests.bench.reply_quality [--seeds 3] [--first-seed 1000] [--max-tokens 256] [--temperature T] [--top-p P]
        [--min-p P] [--repeat-penalty R] [--no-guard] [--recall-min-score S] [--recall-min-similarity S]
        [--recall-keyword-min-similarity S] [--model FILE.gguf] [--recall-only] [--show]
        [--asked-before] [--asked-weight W] [--reworded] [--off RULE,RULE]

`--off` switches quoting rules off by name (`app.chat.prompting.QUOTING_RULES`), for the ablation.

`--reworded` puts tests.bench.quote_floor's 48 statements in memory (12 chats) and asks its 48 questions
instead, each in other words than the statement ("What is the name of my dog?" / "I adopted a beagle
called Pepper"): whether the model names the detail once the right page may be quoted.

`--asked-before` first asks 16 other questions on the same topics ("What breed was my first dog?"),
each in a chat of its own, so their pages (the model's answers, right or wrong) compete with what was
said; `--asked-weight` sets `MemoryParams.ranking.asked_weight` (1.0: those pages at full score).

Sampling options default to the app's own defaults (`app.settings.ChatModelSettings`).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

# (message, words of which the reply should contain one when it uses memory, or None)
SMALL_TALK = [
    ("Hi!", None),
    ("Hi! My name is Dana, I keep bees on my roof in Lyon and my sister Ines is visiting next week.", None),
    ("Thanks, that's helpful.", None),
    ("How do I boil an egg?", None),
    ("Give me three ideas for a rainy Sunday.", None),
    ("What is the capital of Italy?", None),
    ("I'm feeling a bit tired today.", None),
]
# an earlier conversation (memory pages) and, in the same order, a question about each exchange
MEMORY = [
    ("My sister works as a nurse in Leeds.", "That is demanding work."),
    ("We are planning a trip to Kyoto and Osaka in spring.", "Cherry blossom season is beautiful."),
    ("I'm reading 'The Name of the Rose'.", "A classic mystery in a monastery."),
    ("On Friday I made a mushroom risotto.", "Sounds delicious."),
    ("My first dog was a beagle called Pepper.", "Beagles are so friendly."),
    ("I love jazz, especially Bill Evans.", "His trio recordings are wonderful."),
    ("My partner Sam is allergic to peanuts.", "Good to know, I will keep that in mind."),
    ("I work as a structural engineer at a company that builds bridges.", "That sounds like fascinating work."),
    ("My daughter Maya turns seven in March.", "Seven is a fun age!"),
    ("I'm learning the cello; my teacher is called Mr Okafor.", "The cello has a beautiful voice."),
    ("Our cat Biscuit likes to sleep in the laundry basket.", "Cats love warm laundry."),
    ("I drink my coffee black, no sugar.", "A purist!"),
    ("I ran the Berlin marathon last September.", "Congratulations, that is a big achievement."),
    ("My favourite film is Spirited Away.", "A Miyazaki masterpiece."),
    ("I'm saving up for a green electric bike.", "Electric bikes are great for commuting."),
    ("My grandmother grew up in Porto.", "Porto is a lovely city."),
]
RECALL = [
    ("What does my sister do for a living?", ("nurse",)),
    ("Where are we going on our trip in spring?", ("kyoto", "osaka")),
    ("Which book did I say I was reading?", ("rose",)),
    ("What did I cook on Friday?", ("risotto",)),
    ("What was the name of my first dog?", ("pepper",)),
    ("Which jazz musician do I like most?", ("evans",)),
    ("What is Sam allergic to?", ("peanut",)),
    ("What do I do for work?", ("engineer",)),
    ("How old will Maya be in March?", ("seven", "7")),
    ("Who teaches me the cello?", ("okafor",)),
    ("Where does Biscuit like to sleep?", ("laundry", "basket")),
    ("How do I take my coffee?", ("black",)),
    ("Which marathon did I run?", ("berlin",)),
    ("What is my favourite movie?", ("spirited",)),
    ("What am I saving money for?", ("bike",)),
    ("Where did my grandmother grow up?", ("porto",)),
]
# --reworded: the memory and questions of tests.bench.quote_floor (TUNE + HELD_OUT: 48 statements told in
# 12 chats, each asked for in other words, mostly without a word in common); what a reply must say, as a
# regular expression (case-insensitive), in the same order
REWORDED_EXPECT = [
    r"pepper",
    r"lisbon",
    r"shellfish|shrimp",
    r"pharmacist",
    r"reykjavik|iceland",
    r"\b(four|4)\b",
    r"violin",
    r"civic|honda",
    r"jog|\brun",
    r"solitude|hundred years",
    r"cilantro|coriander",
    r"software|engineer",
    r"nebraska|farm",
    r"fifth|\b5(th)?\b",
    r"vegetarian",
    r"knee",
    r"portuguese|japanese",
    r"triathlon",
    r"thinkpad",
    r"hate|turbulence",
    r"glasgow",
    r"house|deposit",
    r"milk|sugar",
    r"vacuum",
    r"marine|biology",
    r"thursday",
    r"grandm",
    r"liverpool",
    r"lactose",
    r"bakery",
    r"chess",
    r"wrist",
    r"licen[cs]e",
    r"paramedic",
    r"rabbit",
    r"curie",
    r"\b(mum|mom|mother)\b",
    r"krakow|chicago",
    r"sleep",
    r"ghibli",
    r"swim",
    r"\bquit|no longer|stopped",
    r"\bmay\b",
    r"shelter",
    r"tiramisu",
    r"google",
    r"height",
    r"fish",
]
# --asked-before: other questions on the same topics, asked first in chats of their own and answered by
# the model (right, wrong or "I don't know"); none asks what a RECALL question asks (T.repeats_question)
ASKED_BEFORE = [
    "Is my sister's job stressful?",
    "When are we travelling to Japan?",
    "Who wrote the book I'm reading?",
    "Did I enjoy my dinner on Friday?",
    "What breed was my first dog?",
    "What kind of music do I listen to?",
    "Does Sam have any food allergies?",
    "Is my job interesting?",
    "When is Maya's birthday?",
    "How long have I been playing the cello?",
    "What kind of pet is Biscuit?",
    "Do I put sugar in my coffee?",
    "What was my marathon time?",
    "Who directed my favourite film?",
    "What colour bike do I want?",
    "Where was my grandmother born?",
]
ENGLISH = set(
    "the a an to you i is and of in it that your for my be are with can this do have on not what me so "
    "as we was it's i'm you're there here how if but or at by from about some like just".split()
)
# function words of the languages the bundled model drifts into (none of them English words)
OTHER = (
    set(
        "le les des du une et est je tu vous il elle nous pas qui pour dans sur avec aux ce cette mais "
        "el los las del que y en una es por para con su se lo como más pero mi muy "
        "der die das und ist nicht ich du sie wir ein eine zu mit auf für von "
        "il che di non sono della per".split()
    )
    - ENGLISH
)
_WORD = re.compile(r"[a-zA-Z\u00C0-\u024F']+")
_UNIT = re.compile(r"[^.!?\n]+[.!?\n]?")


def not_english(text: str) -> bool:
    """More French/Spanish/German/Italian function words than English ones (all messages are English)."""
    words = [w.lower() for w in _WORD.findall(text)]
    return sum(w in OTHER for w in words) > sum(w in ENGLISH for w in words)


_TURN = re.compile(r"^\s*(?:\(?(?:user|assistant)\)?:?|you:|mnemo:)\s", re.IGNORECASE | re.MULTILINE)


def invents_turns(text: str) -> bool:
    """The reply writes the dialogue on: a line that opens as a turn ("User: …", "(user) …",
    "Assistant: …"), the way the prompt quotes recalled pages."""
    return bool(_TURN.search(text))


def _names(reply: str, expect) -> bool:
    """The reply names the remembered detail: one of the words of a tuple, or a match of a pattern."""
    if isinstance(expect, tuple):
        return any(w in reply.lower() for w in expect)
    return bool(expect.search(reply))


def max_repeats(text: str) -> int:
    """How often the most repeated sentence or line (of 3+ words) occurs."""
    units = [" ".join(u.lower().split()) for u in _UNIT.findall(text)]
    counts: dict[str, int] = {}
    for u in units:
        if len(u.split()) >= 3:
            counts[u] = counts.get(u, 0) + 1
    return max(counts.values(), default=0)


def main(argv=None) -> dict:
    from app.settings import ChatModelSettings

    d = ChatModelSettings()
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=1000, help="seeds are FIRST, FIRST+1, …")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=d.temperature)
    parser.add_argument("--top-p", type=float, default=d.top_p)
    parser.add_argument("--min-p", type=float, default=d.min_p)
    parser.add_argument("--repeat-penalty", type=float, default=d.repeat_penalty)
    parser.add_argument("--no-guard", action="store_true", help="let loops run (the agent's repetition guard off)")
    parser.add_argument(
        "--recall-min-score",
        type=float,
        default=None,
        help="pages under this score stay out of the prompt (default: MemoryParams')",
    )
    parser.add_argument(
        "--recall-min-similarity",
        type=float,
        default=None,
        help="MemoryParams.quoting.recall_min_similarity (a large value: no page quoted for its meaning alone)",
    )
    parser.add_argument(
        "--recall-keyword-min-similarity",
        type=float,
        default=None,
        help="MemoryParams.quoting.recall_keyword_min_similarity (-1: any page over the score floor)",
    )
    parser.add_argument("--model", default=None, help="a GGUF file (default: the bundled model)")
    parser.add_argument("--recall-only", action="store_true", help="only the questions about earlier talk")
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument(
        "--reworded",
        action="store_true",
        help="memory and questions of tests.bench.quote_floor (48 questions in other words)",
    )
    parser.add_argument(
        "--asked-before",
        action="store_true",
        help="first ask 16 other questions on the same topics, each in a chat of its own",
    )
    parser.add_argument(
        "--asked-weight",
        type=float,
        default=None,
        help="MemoryParams.ranking.asked_weight (default: the app's; 1.0 = askings at full score)",
    )
    parser.add_argument(
        "--off", default="", help="quoting rules switched off, comma-separated (app.chat.prompting.QUOTING_RULES)"
    )
    args = parser.parse_args(argv)

    from app.chat.agent import ChatAgent
    from app.chat.prompting import switched_off
    from memory_core import MemoryParams, MemoryStore
    from models.embedder import OnnxEmbedder
    from models.llama_cpp_backend import LlamaCppChatModel
    from tests.bench.agent_overhead import _history, _median

    emb = OnnxEmbedder()
    model = LlamaCppChatModel(
        model_path=args.model,
        n_ctx=4096,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        seed=0,
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        params = MemoryParams()
        if args.recall_min_score is not None:
            params.quoting.recall_min_score = args.recall_min_score
        if args.recall_min_similarity is not None:
            params.quoting.recall_min_similarity = args.recall_min_similarity
        if args.recall_keyword_min_similarity is not None:
            params.quoting.recall_keyword_min_similarity = args.recall_keyword_min_similarity
        if args.asked_weight is not None:
            params.ranking.asked_weight = args.asked_weight
        store = MemoryStore.open(
            Path(tmp) / "bench.sqlite3",
            emb.embed,
            embed_model_id=emb.model_id,
            dim=emb.dim,
            params=params,
            embed_tokens=emb.embed_with_tokens,
        )
        if args.reworded:
            from tests.bench.quote_floor import HELD_OUT, TUNE, write_chats

            write_chats(store, TUNE + HELD_OUT)
            asked = [(q, re.compile(e, re.IGNORECASE)) for (_, _, q), e in zip(TUNE + HELD_OUT, REWORDED_EXPECT)]
        else:
            _history(store, MEMORY)
            asked = RECALL
        agent = ChatAgent(
            store, model, reply_reserve=512, max_tokens=args.max_tokens, repetition_guard=not args.no_guard
        )
        agent.quoting_off = switched_off(filter(None, args.off.split(",")))
        if args.asked_before:
            model.set_seed(args.first_seed - 1)
            for text in ASKED_BEFORE:
                reply = agent.send(agent.new_conversation(), text).text
                if args.show:
                    print(f"--- [asked before] {text}\n{reply}\n", flush=True)
            store.jobs.run_pending(allow_llm=False)
        for seed in range(args.seeds):
            model.set_seed(args.first_seed + seed)
            for text, expect in asked if args.recall_only else SMALL_TALK + asked:
                cid = agent.new_conversation()  # each message alone, with memory but no dialogue
                t0 = time.perf_counter()
                result = agent.send(cid, text)
                seconds = time.perf_counter() - t0
                reply = result.text
                rows.append(
                    {
                        "message": text,
                        "seed": seed,
                        "reply": reply,
                        "seconds": seconds,
                        "tokens": result.stats["completion_tokens"],
                        "runaway": result.stats.get("finish_reason") == "length",
                        "guarded": result.stats.get("finish_reason") == "repetition",
                        "loop": max_repeats(reply) >= 3,
                        "non_english": not_english(reply),
                        "invented_turn": invents_turns(reply),
                        "markup": bool(result.stats.get("markup_removed")),
                        "quoting": bool(result.stats.get("quoting_removed"))
                        or result.stats.get("finish_reason") == "invented_turn",
                        "turn_cut": result.stats.get("finish_reason") == "invented_turn",
                        "recall_hit": None if expect is None else _names(reply, expect),
                    }
                )
                if args.show:
                    print(f"--- [{seed}] {text}\n{reply}\n", flush=True)
        store.close()
    model.close()

    def rate(k):
        return round(sum(bool(r[k]) for r in rows) / len(rows), 3)

    recall = [r["recall_hit"] for r in rows if r["recall_hit"] is not None]
    hits = {q: sum(bool(r["recall_hit"]) for r in rows if r["message"] == q) for q, _ in asked}
    halves = [[r["recall_hit"] for r in rows if r["message"] in [q for q, _ in asked[h::2]]] for h in (0, 1)]
    out = {
        "benchmark": "reply_quality",
        "model": model.model_id,
        "replies": len(rows),
        "max_tokens": args.max_tokens,
        "sampling": {
            "temperature": args.temperature,
            "top_p": args.top_p,
            "min_p": args.min_p,
            "repeat_penalty": args.repeat_penalty,
            "repetition_guard": not args.no_guard,
        },
        "recall_min_score": params.quoting.recall_min_score,
        "recall_min_similarity": params.quoting.recall_min_similarity,
        "recall_keyword_min_similarity": params.quoting.recall_keyword_min_similarity,
        "asked_weight": params.ranking.asked_weight,
        "asked_before": len(ASKED_BEFORE) if args.asked_before else 0,
        "quoting_off": sorted(agent.quoting_off),
        "runaway_rate": rate("runaway"),
        "loop_rate": rate("loop"),
        "stopped_repeating_rate": rate("guarded"),
        "non_english_rate": rate("non_english"),
        "invented_turn_rate": rate("invented_turn"),
        "markup_rate": rate("markup"),
        "quoting_rate": rate("quoting"),
        "turn_cut_rate": rate("turn_cut"),
        "recall_hit_rate": round(sum(recall) / len(recall), 3) if recall else None,
        "recall_hit_rate_halves": [round(sum(h) / len(h), 3) if h else None for h in halves],
        "recall_hits": hits,
        "completion_tokens_p50": _median([r["tokens"] for r in rows]),
        "seconds_per_reply_p50": _median([r["seconds"] for r in rows]),
    }
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
