"""Benchmark: questions about the user ("Where do I live?") over the user's own chats and long imported
dialogues between other people (issue 35, "Whose memory").

The memory holds what a person would have after a while: the user's own short chats in the app (each a
few exchanges, some of them facts the user states about themselves, "I moved to Lisbon last year",
among questions to the assistant), written with the store's API the way the app writes a chat (messages,
then each exchange's `add_page` job), and two long LoCoMo-style dialogues between two other people,
imported through the importer (`mnemo ingest FILE --others`: their pages carry `people.me = None`). The
dialogues are generated here from templates, seeded, on the same subjects as the user's facts (where
they live, their work, pets, family, sport, food), so their lines compete on the same words; they are not
LoCoMo's, whose dev file is kept for evaluation.

For each question about the user, the answer is the page where the user said it. The benchmark prints
JSON: the share of questions whose answer page is among the first 3 pages recalled, with the rule
"others" (memory_core.recall.ranking.weigh_others: other people's pages weigh less for a question in the first
person) off ("before") and on ("after"), per set; TUNE chose OTHERS_WEIGHT, HELD_OUT was written after
it. A third row imports the same dialogues as if the user were their first speaker (`--as-user`): they
are then the user's, and the rule leaves them alone.

    python -m tests.bench.whose_memory [--dialogues N] [--sessions N] [--seed S] [--top K] [--verbose]
    mnemo bench whose_memory
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

# (what the user said about themselves, the assistant's reply, a question asking for it)
TUNE = [
    ("I moved to Lisbon last year.", "Lisbon is lovely! How are you settling in?", "Where do I live?"),
    (
        "I work as a nurse at a children's hospital.",
        "That's demanding and rewarding work.",
        "What do I do for a living?",
    ),
    (
        "I'm training for the Berlin marathon in September.",
        "Good luck with the long runs!",
        "What race am I training for?",
    ),
    ("My dog is a greyhound called Biscuit.", "Greyhounds are such gentle dogs.", "What's my dog's name?"),
    (
        "My brother Tiago is getting married in June.",
        "Congratulations to him!",
        "Who in my family is getting married?",
    ),
    ("I'm learning to play the cello.", "The cello has a beautiful sound.", "Which instrument am I learning?"),
    ("I'm allergic to peanuts.", "I'll remember that for recipes.", "What am I allergic to?"),
    ("My favourite food is grilled sardines.", "A Portuguese classic!", "What's my favourite dish?"),
    ("I ride an old blue Vespa to work.", "Scooters are handy in traffic.", "How do I get to work?"),
    ("I grew up in a small town near Porto.", "The north of Portugal is beautiful.", "Where did I grow up?"),
    ("I've been vegetarian for five years.", "Good to know for meal ideas.", "Do I eat meat?"),
    ("My partner Sam is a carpenter.", "Working with wood is a great craft.", "What does my partner do?"),
]
HELD_OUT = [
    ("I'm reading War and Peace at the moment.", "A long but rewarding book.", "What book am I reading?"),
    ("I have two kids, Rita and Joel.", "Lovely names!", "What are my children called?"),
    ("I speak Portuguese, English and some French.", "That's useful when travelling.", "Which languages do I speak?"),
    ("My birthday is on the 3rd of March.", "I'll keep that in mind.", "When is my birthday?"),
    ("I'm saving up for a trip to Japan next spring.", "Cherry blossom season!", "Where am I planning to travel?"),
    (
        "I hate the cold, winter makes me miserable.",
        "Lisbon's winters are mild at least.",
        "Which season do I dislike?",
    ),
    ("I play five-a-side football on Tuesdays.", "A good way to keep fit.", "What sport do I play every week?"),
    ("My flat has a balcony full of tomato plants.", "Homegrown tomatoes taste best.", "What do I grow at home?"),
    ("My mum lives in Coimbra.", "Coimbra is a lovely university town.", "Where does my mother live?"),
    ("I studied architecture at university.", "A creative field.", "What did I study?"),
]
# the user's other messages: questions to the assistant, as people ask them between their own news
FILLER = [
    ("Can you give me a quick risotto recipe?", "Toast arborio rice, add stock ladle by ladle, finish with butter."),
    ("How do I remove a coffee stain from a shirt?", "Blot it, rinse with cold water, then use a little detergent."),
    ("What's a good name for a book club?", "How about 'Chapter and Verse'?"),
    ("Explain what a mortgage is in two sentences.", "A loan to buy a home, repaid over years with interest."),
    ("Suggest a stretching routine after running.", "Calves, hamstrings and quads, 30 seconds each."),
    ("What's the capital of Australia?", "Canberra."),
    ("Write a haiku about rain.", "Soft rain on the roof / the street forgets its footsteps / puddles hold the sky"),
    ("How long should I boil an egg?", "About 7 minutes for a jammy yolk."),
]

# the dialogues' people, and what they talk about: each speaker has a life of their own, told over sessions
PEOPLE = [("Joanna", "Nate"), ("Grace", "Omar"), ("Helen", "Marcus")]
CITIES = ["Denver", "Seattle", "Austin", "Boston", "Chicago", "Portland", "Toronto", "Dublin", "Madrid", "Oslo"]
PLACES = ["near the river", "downtown", "by the park", "in a quiet suburb", "close to the old market", "on a hill"]
JOBS = ["graphic designer", "teacher", "accountant", "chef", "paramedic", "software developer", "pharmacist"]
PETS = [("dog", "Max"), ("cat", "Luna"), ("dog", "Bella"), ("turtle", "Shelly"), ("cat", "Oscar")]
RACES = ["a half marathon", "a 10k charity run", "a triathlon", "the city marathon", "a trail race"]
INSTRUMENTS = ["guitar", "piano", "drums", "violin", "ukulele"]
FOODS = ["sushi", "lasagna", "tacos", "ramen", "curry", "paella"]
FAMILY = ["sister", "cousin", "brother", "best friend", "aunt"]
STATEMENTS = [
    "I live {place} in {city} now, and I really love living there.",
    "We moved to {city} a few years ago; living {place} suits me.",
    "My new flat is {place}, the best place I've lived in so far.",
    "I've been working as a {job} for a while, and my job keeps me busy.",
    "Work has been hectic, being a {job} is harder than people think.",
    "My {pet} {pet_name} keeps me company when I get home from work.",
    "I took {pet_name}, my {pet}, to the vet yesterday; my pet is fine.",
    "I'm training for {race}, I run every morning before work.",
    "I signed up for {race}, so my weekends are all about running.",
    "I started learning the {instrument} last month, it's hard but fun.",
    "My favourite food has to be {food}, I could eat it every day.",
    "My {family} is getting married next summer, I'm so excited.",
    "I went back to the town where I grew up, it hadn't changed at all.",
    "I'm trying to eat less meat these days, mostly for my health.",
    "I drive to work every day, the traffic in {city} is terrible.",
    "I've been reading a lot lately, mostly mystery novels.",
    "My partner and I are planning a trip abroad next year.",
    "I can't stand winter, the cold gets to me.",
    "I play basketball with friends every week.",
    "I'm growing herbs on my windowsill, basil and mint.",
    "I'm allergic to cats, which is a shame because they're cute.",
    "My birthday party last weekend was so much fun.",
    "My kids started at a new school this year.",
    "I studied biology at college before I changed careers.",
]
REPLIES = [
    "That's great, {other}! How does it feel?",
    "Wow, {other}, I had no idea. Tell me more.",
    "That sounds amazing, I'm happy for you.",
    "Oh nice! I've always wanted to try that.",
    "Really? That must be a big change for you.",
    "I love that for you, {other}.",
]


def _life(rng: random.Random) -> dict[str, str]:
    pet, pet_name = rng.choice(PETS)
    return {
        "city": rng.choice(CITIES),
        "place": rng.choice(PLACES),
        "job": rng.choice(JOBS),
        "pet": pet,
        "pet_name": pet_name,
        "race": rng.choice(RACES),
        "instrument": rng.choice(INSTRUMENTS),
        "food": rng.choice(FOODS),
        "family": rng.choice(FAMILY),
    }


def make_dialogue(index: int, sessions: int, seed: int) -> dict:
    """One LoCoMo-style sample: two named people over `sessions` sessions, each speaker telling their
    news from the templates and answering the other's."""
    rng = random.Random(seed * 1000 + index)
    a, b = PEOPLE[index % len(PEOPLE)]
    lives = {a: _life(rng), b: _life(rng)}
    conv: dict = {"speaker_a": a, "speaker_b": b}
    for s in range(1, sessions + 1):
        turns = []
        for t in range(rng.randint(12, 20)):
            speaker = (a, b)[t % 2]
            other = b if speaker == a else a
            if t % 4 < 2 or rng.random() < 0.3:
                text = rng.choice(STATEMENTS).format(**lives[speaker])
            else:
                text = rng.choice(REPLIES).format(other=other) + " " + rng.choice(STATEMENTS).format(**lives[speaker])
            turns.append({"speaker": speaker, "dia_id": f"D{s}:{t + 1}", "text": text})
        conv[f"session_{s}"] = turns
        conv[f"session_{s}_date_time"] = f"{1 + s % 12}:{10 + s % 40:02d} pm on {1 + s % 27} May, 2023"
    return {"sample_id": f"whose-{index + 1}", "qa": [], "conversation": conv}


def write_own_chats(store, facts, start: float) -> dict[str, int]:
    """The user's own chats, as the app writes them: messages, then each exchange's `add_page` job.
    A chat of 4 exchanges (3 facts and a question to the assistant) a day; {statement: page id}."""
    from app.chat.turn_memory import queue_exchange_page

    filler = iter(FILLER * 4)
    exchanges: list[tuple[str, str]] = []
    for i in range(0, len(facts), 3):
        chunk = [(u, r) for u, r, _ in facts[i : i + 3]]
        exchanges += [*chunk[:2], next(filler), *chunk[2:]]
    for n in range(0, len(exchanges), 4):
        day = start + (n // 4) * 86400
        cid = store.conversations.create_conversation(f"chat {n // 4 + 1}", created_at=day)
        parent = None
        for k, (said, reply) in enumerate(exchanges[n : n + 4]):
            t = day + k * 120
            uid = store.conversations.add_message(cid, "user", said, parent_id=parent, created_at=t)
            aid = store.conversations.add_message(cid, "assistant", reply, parent_id=uid, created_at=t + 5)
            parent = aid
            (user,) = [m for m in store.conversations.list_messages(cid) if m.id == uid]
            queue_exchange_page(store, cid, user, aid, reply)
    store.jobs.run_pending(allow_llm=False)
    pages = store.pages.list_pages(limit=100_000)
    return {p.user_text: p.id for p in pages if p.conversation_id is not None and p.meta.get("people") is None}


def import_dialogues(store, path: Path, as_user: bool) -> int:
    """The dialogues through the importer, as `mnemo ingest FILE --others` (or `--as-user` their first
    speaker) writes them; the pages written."""
    from app.importers import load, write_all
    from app.importers.people import assign, dialogues

    parsed = load(path)
    for conv in dialogues(parsed):
        assign([conv], conv.people.user_side if as_user and conv.people else None)
    return write_all(store, parsed, path=str(path)).pages_written


def measure(store, facts, page_of: dict[str, int], top: int, off=()) -> dict:
    found, misses = 0, []
    for statement, _, question in facts:
        got = [h.page.id for h in store.retrieve(question, None, record_visits=False, off=off).pages]
        rank = got.index(page_of[statement]) + 1 if page_of[statement] in got else None
        if rank is not None and rank <= top:
            found += 1
        else:
            misses.append({"question": question, "rank": rank})
    return {"in_top": f"{found}/{len(facts)}", "share": round(found / len(facts), 3), "misses": misses}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dialogues", type=int, default=2, help="imported dialogues of other people (default 2)")
    parser.add_argument("--sessions", type=int, default=20, help="sessions per dialogue (default 20)")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--top", type=int, default=3, help="the answer must be among this many pages (default 3)")
    parser.add_argument("--verbose", action="store_true", help="list the questions missed")
    args = parser.parse_args(argv)

    from memory_core import MemoryStore
    from memory_core.recall.ranking import OTHERS_WEIGHT
    from models.embedder import OnnxEmbedder

    emb = OnnxEmbedder()
    report: dict = {"others_weight": OTHERS_WEIGHT, "top": args.top}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "dialogues.json"
        data.write_text(json.dumps([make_dialogue(i, args.sessions, args.seed) for i in range(args.dialogues)]))
        for imported_as in ("others", "first speaker"):
            store = MemoryStore.open(
                Path(tmp) / f"{imported_as}.sqlite3",
                emb.embed,
                embed_model_id=emb.model_id,
                dim=emb.dim,
                embed_tokens=emb.embed_with_tokens,
            )
            try:
                dialogue_pages = import_dialogues(store, data, as_user=imported_as != "others")
                page_of = write_own_chats(store, TUNE + HELD_OUT, start=1_730_000_000.0)
                report["memory"] = {"own_pages": len(page_of), "dialogue_pages": dialogue_pages}
                for name, facts in (("tune", TUNE), ("held_out", HELD_OUT)):
                    rows = {
                        "before (rule off)": measure(store, facts, page_of, args.top, off=("others",)),
                        "after (rule on)": measure(store, facts, page_of, args.top),
                    }
                    if not args.verbose:
                        for r in rows.values():
                            r.pop("misses")
                    report.setdefault(f"dialogues imported as {imported_as}", {})[name] = rows
            finally:
                store.close()
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
