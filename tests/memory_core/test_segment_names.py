"""A memory of several imported dialogues: no topic is named after a speaker. Each speaker's name is on too few of
the memory's pages for the rarity rule to leave it out, so the pages' `people` meta does."""

from __future__ import annotations

from memory_core import text as T

DIALOGUES = [
    ("Anna", "Bruno", ["garden tomatoes", "garden basil", "compost garden"]),
    ("Carla", "Dimitri", ["marathon training", "marathon pace", "running shoes marathon"]),
    ("Elena", "Farid", ["sourdough bread", "bread oven", "sourdough starter"]),
]


def _import(s, clock):
    for a, b, topics in DIALOGUES:
        cid = s.conversations.create_conversation(f"{a} and {b}")
        items = []
        for i in range(12):
            topic = topics[i % len(topics)]
            items.append(
                {
                    "user_text": f"{b}, I spent the morning on the {topic} again, {b}!",
                    "assistant_text": f"That is great, {a}. Tell me more about the {topic}, {a}.",
                    "timestamp": clock() + 60 * i,
                    "meta": {"people": {"user_side": a, "assistant_side": b, "me": None}},
                }
            )
        s.intake.add_pages(cid, items)


def test_no_topic_keyword_or_title_is_a_speakers_name(open_store, clock):
    s = open_store(stm_capacity=0)
    _import(s, clock)
    names = {w.lower() for a, b, _ in DIALOGUES for w in (a, b)}
    segments = s.segments.list_segments(limit=100)
    assert segments
    for seg in segments:
        assert not any(T.is_name(k.lower(), names) for k in seg.keywords), seg.keywords
        assert not any(w in names for w in T.words(seg.title)), seg.title
    # what the topics are about is still there
    assert any("garden" in seg.keywords or "marathon" in seg.keywords for seg in segments)
