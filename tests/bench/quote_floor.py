"""Benchmark: which recalled pages are quoted to the model (app.chat.prompting.QuoteFloor), on memory
written the way people talk to an assistant, without LoCoMo's speaker names in every message.

Each statement below was said in one of several chats (4 exchanges each, a day apart); each question
asks for it in other words, mostly without a word in common ("What is the name of my dog?" / "I adopted
a beagle called Pepper"). Small talk should recall nothing. Two sets: TUNE chose the defaults,
HELD_OUT was written after them and checks them. For the score floor alone (`recall_min_score`, the
rule before QuoteFloor) and for the current rule, it prints JSON per set:

- `targets_quoted`: questions whose statement would be quoted in the prompt;
- `other_pages_quoted`: other pages quoted for those questions (their own match; a page ranked only for
  its dialogue neighbour is quoted by `quotable_pages`' rule, the same in both);
- `small_talk_recalling`: small-talk messages for which any page would be quoted, with the pages.

    python -m tests.bench.quote_floor [--min-similarity S] [--min-standout D] [--keyword-min-similarity K]
        [--ablate]

`--ablate` adds, for the current rule, a row per page-level quoting rule switched off
(`app.chat.prompting.QUOTING_RULES`; the turn-level ones choose no pages and are measured by reply_quality).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

# (statement, the assistant's reply, a question asking for it in other words)
TUNE = [
    (
        "Hi! I adopted a beagle called Pepper last week.",
        "Congratulations on your new companion! Beagles are cheerful and curious.",
        "What is the name of my dog?",
    ),
    (
        "My sister Ana moved to Lisbon in June.",
        "That's exciting for her, Lisbon is a beautiful city.",
        "Which city does my sibling live in now?",
    ),
    (
        "I'm allergic to shellfish, so no shrimp for me.",
        "Thanks for telling me, I'll keep that in mind for recipes.",
        "Is there any food I can't eat?",
    ),
    ("I started working as a pharmacist at a hospital.", "That sounds like a rewarding job.", "What's my profession?"),
    (
        "We're flying to Reykjavik for our honeymoon in February.",
        "How romantic! Iceland in winter is magical.",
        "Where are we going after the wedding?",
    ),
    ("My son Leo just turned four.", "Happy birthday to Leo! Four is a wonderful age.", "How old is my kid?"),
    (
        "I've been learning to play the violin for two years.",
        "Two years of practice is a great commitment.",
        "Which instrument am I studying?",
    ),
    ("My car is a red 2015 Honda Civic.", "The Civic is a reliable car.", "What vehicle do I drive?"),
    (
        "I usually go jogging every morning before work.",
        "A morning run is a great way to start the day.",
        "What exercise do I do early in the day?",
    ),
    (
        "My favourite book is One Hundred Years of Solitude.",
        "A masterpiece of magical realism.",
        "Which novel do I like best?",
    ),
    (
        "I can't stand cilantro, it tastes like soap to me.",
        "That's a common genetic trait actually.",
        "Which herb do I dislike?",
    ),
    (
        "My wife Priya is a software engineer at a bank.",
        "That's a demanding field.",
        "What does my spouse do for a living?",
    ),
    (
        "I grew up on a farm in rural Nebraska.",
        "Farm life must have taught you a lot.",
        "Where did I spend my childhood?",
    ),
    (
        "Our apartment is on the fifth floor and has no elevator.",
        "That's a lot of stairs every day!",
        "How high up do we live?",
    ),
    ("I'm vegetarian since 2019.", "Good to know for meal ideas.", "Do I eat meat?"),
    (
        "My dad is recovering from knee surgery.",
        "I hope his recovery goes smoothly.",
        "Which health issue is my father dealing with?",
    ),
    (
        "I speak Portuguese and a little Japanese.",
        "That's an interesting combination of languages.",
        "What languages do I know?",
    ),
    (
        "I'm training for a triathlon in August.",
        "That's a huge challenge, good luck with the training!",
        "What competition am I preparing for?",
    ),
    ("My laptop is a ThinkPad X1 Carbon.", "A solid machine for work.", "What computer do I use?"),
    (
        "I hate flying because of turbulence.",
        "Many people feel that way; it's very safe though.",
        "How do I feel about planes?",
    ),
    ("My best friend Tom lives in Glasgow.", "Scotland is lovely.", "Where is my closest pal based?"),
    ("I'm saving for a house deposit.", "That's a smart long-term goal.", "What am I putting money aside for?"),
    ("I take my tea with milk and two sugars.", "A classic way to drink it.", "How do I like my hot drink?"),
    ("My cat Miso is afraid of the vacuum cleaner.", "Many cats are, the noise scares them.", "What scares my pet?"),
    ("I studied marine biology at university.", "Fascinating field of study!", "What was my degree in?"),
    ("I have a dentist appointment on Thursday at 3 pm.", "I hope it goes well.", "When do I need to see the dentist?"),
    (
        "My grandmother taught me to knit when I was eight.",
        "What a lovely skill to learn from her.",
        "Who showed me how to knit?",
    ),
    ("I support Liverpool football club.", "You'll never walk alone!", "Which soccer team am I a fan of?"),
    ("I'm lactose intolerant.", "Thanks, I'll suggest dairy-free options.", "Can I drink regular milk?"),
    (
        "My brother runs a bakery in Montreal.",
        "Fresh bread every day, lucky him!",
        "What business does my brother own?",
    ),
    ("I play chess online most evenings.", "Chess is great for the mind.", "What game do I play at night?"),
    ("I broke my left wrist skiing last winter.", "Ouch, I hope it has healed well.", "Which bone did I fracture?"),
]
TUNE_SMALL_TALK = [
    "Hi!",
    "Thanks, that's helpful.",
    "How do I boil an egg?",
    "Give me three ideas for a rainy Sunday.",
    "What is the capital of Italy?",
    "I'm feeling a bit tired today.",
    "Good morning!",
    "Can you explain what a black hole is?",
    "Tell me a joke.",
    "What's 15 times 12?",
    "Write a haiku about autumn.",
    "ok",
    "How are you today?",
    "Translate 'hello' into French.",
    "What's the weather like on Mars?",
    "Recommend a good sci-fi movie.",
]
HELD_OUT = [
    (
        "I finally got my driving licence yesterday!",
        "Congratulations, that's a big milestone!",
        "Did I pass my road test?",
    ),
    (
        "My partner Lucas works night shifts as a paramedic.",
        "That must be a tough schedule.",
        "What is my boyfriend's job?",
    ),
    ("We have two rabbits named Pip and Clover.", "Rabbits are such sweet pets.", "What animals do we keep at home?"),
    ("I'm reading a biography of Marie Curie.", "She had a remarkable life.", "Which book am I in the middle of?"),
    ("My mum turns sixty next Saturday.", "Are you planning a party?", "Whose birthday is coming up soon?"),
    ("I was born in Krakow but raised in Chicago.", "Two very different cities!", "What is my hometown?"),
    (
        "I get migraines when I don't sleep enough.",
        "That sounds painful, I hope you can rest.",
        "What causes my headaches?",
    ),
    ("I'm a huge fan of Studio Ghibli films.", "They are beautiful movies.", "What kind of animation do I enjoy?"),
    (
        "My daughter is learning to swim at the local pool.",
        "Swimming is such a useful skill.",
        "What lessons is my girl taking?",
    ),
    ("I quit smoking three months ago.", "That's fantastic, well done!", "Do I still use cigarettes?"),
    (
        "Our kitchen renovation should be done by May.",
        "Exciting, a new kitchen!",
        "When will the building work at home finish?",
    ),
    (
        "I volunteer at an animal shelter on Sundays.",
        "That's very kind of you.",
        "What charity work do I do at the weekend?",
    ),
    ("My favourite dessert is tiramisu.", "A classic Italian treat.", "Which sweet dish do I love most?"),
    (
        "I've got a job interview at Google next week.",
        "Good luck, you'll do great!",
        "Which company am I meeting with for a position?",
    ),
    ("I'm afraid of heights.", "That's a very common fear.", "What phobia do I have?"),
    (
        "My grandfather was a fisherman in Norway.",
        "What a fascinating family history.",
        "What did my grandpa do for a living?",
    ),
]
HELD_OUT_SMALL_TALK = [
    "Hello there!",
    "Thank you so much!",
    "What's a good recipe for pancakes?",
    "Can you summarise the plot of Hamlet?",
    "Bye for now.",
    "Why is the sky blue?",
    "Suggest a name for a goldfish.",
    "I'm bored.",
    "What time zone is Tokyo in?",
    "Nice, thanks.",
]


def write_chats(store, items) -> None:
    """The statements of `items` as pages of chats of 4 exchanges each, a day apart."""
    for c in range(0, len(items), 4):
        cid = store.conversations.create_conversation(f"chat {c // 4 + 1}")
        store.intake.add_pages(
            cid,
            [
                {"user_text": u, "assistant_text": a, "timestamp": 1_700_000_000 + c * 86400 + i * 60}
                for i, (u, a, _) in enumerate(items[c : c + 4])
            ],
        )
    store.jobs.run_pending(allow_llm=False)


# the quoting rules that decide which pages are quoted (the others choose turns of them)
PAGE_RULES = ("score_floor", "keyword_closeness", "standout", "neighbour_exemption", "neighbours_as_answers")


def measure(store, floor, items, small_talk, off=()) -> dict:
    from app.chat.prompting import quoted_pages

    def quoted(query):
        return quoted_pages(store.retrieve(query, None, record_visits=False).pages, floor, off)

    targets = others = 0
    for statement, _, question in items:
        pages = quoted(question)
        targets += any(h.page.user_text == statement for h in pages)
        others += sum(h.page.user_text != statement for h in pages)
    recalling = {}
    for message in small_talk:
        pages = quoted(message)
        if pages:
            recalling[message] = [
                f"{h.page.user_text[:40]} (cos {h.similarity:.2f}, standout {h.standout:.2f})" for h in pages
            ]
    return {
        "targets_quoted": f"{targets}/{len(items)}",
        "other_pages_quoted": others,
        "small_talk_recalling": f"{len(recalling)}/{len(small_talk)}",
        "small_talk_pages": recalling,
    }


def main(argv=None) -> dict:
    from memory_core import MemoryParams

    d = MemoryParams().quoting
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-similarity", type=float, default=d.recall_min_similarity)
    parser.add_argument("--min-standout", type=float, default=d.recall_min_standout)
    parser.add_argument("--keyword-min-similarity", type=float, default=d.recall_keyword_min_similarity)
    parser.add_argument("--ablate", action="store_true", help="also each page-level quoting rule off in turn")
    args = parser.parse_args(argv)

    from app.chat.prompting import QuoteFloor
    from memory_core import MemoryStore
    from models.embedder import OnnxEmbedder

    emb = OnnxEmbedder()
    params = MemoryParams.from_flat(
        recall_min_similarity=args.min_similarity,
        recall_min_standout=args.min_standout,
        recall_keyword_min_similarity=args.keyword_min_similarity,
    )
    floors = {
        "score_floor_only": QuoteFloor(params.quoting.recall_min_score),
        "quote_floor": QuoteFloor.from_params(params),
    }
    report: dict = {
        "params": {
            k: params.get(k)
            for k in (
                "recall_min_score",
                "recall_keyword_min_similarity",
                "recall_min_similarity",
                "recall_min_standout",
            )
        }
    }
    for name, items, small_talk in (("tune", TUNE, TUNE_SMALL_TALK), ("held_out", HELD_OUT, HELD_OUT_SMALL_TALK)):
        with tempfile.TemporaryDirectory() as tmp:
            store = MemoryStore.open(
                Path(tmp) / "bench.sqlite3",
                emb.embed,
                embed_model_id=emb.model_id,
                dim=emb.dim,
                params=params,
                embed_tokens=emb.embed_with_tokens,
            )
            write_chats(store, items)
            report[name] = {floor: measure(store, f, items, small_talk) for floor, f in floors.items()}
            if args.ablate:
                for rule in PAGE_RULES:
                    report[name][f"{rule}_off"] = measure(store, floors["quote_floor"], items, small_talk, {rule})
            store.close()
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
