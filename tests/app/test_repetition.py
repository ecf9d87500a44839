"""The repetition guard: loops are caught however the stream is chunked; ordinary text and code are not."""

from __future__ import annotations

import pytest

from app.chat.repetition import RepetitionGuard


def feed_all(text: str, step: int) -> RepetitionGuard:
    guard = RepetitionGuard()
    for i in range(0, len(text), step):
        if guard.feed(text[i : i + step]):
            break
    return guard


@pytest.mark.parametrize("step", [1, 3, 40, 10_000])
def test_a_repeated_sentence_is_stopped_at_its_third_time_keeping_one_copy(step):
    text = (
        "Bien. Espero puedo hacerlo, puedo hacerlo.\nEspero puedo hacerlo, puedo hacerlo.\n"
        "Espero puedo hacerlo, puedo hacerlo.\nNo puedo encontrar."
    )
    guard = feed_all(text, step)
    assert guard.looping
    assert guard.kept() == "Bien. Espero puedo hacerlo, puedo hacerlo."


def test_interleaved_sentences_keep_one_round_of_the_loop():
    guard = feed_all("I am here to help you. I love the story you wrote. " * 3, 5)
    assert guard.looping
    assert guard.kept() == "I am here to help you. I love the story you wrote."


def test_a_stanza_sung_over_and_over_keeps_the_first_one():
    stanza = "The sea is calm tonight,\nA gentle breeze on the shore,\nA gentle breeze on the shore,\nThe sea is calm tonight.\n\n"
    guard = feed_all(stanza * 4, 2)
    assert guard.looping
    assert guard.kept() == stanza.strip()


def test_a_chorus_after_each_new_verse_is_a_song_not_a_loop():
    chorus = "Row the boat along the stream,\nlife is only such a dream.\n"
    song = "".join(
        f"Verse {n}: we sail past the {place} today.\n" + chorus
        for n, place in enumerate(["harbour", "lighthouse", "old mill", "bridge"], 1)
    )
    guard = feed_all(song, 3)
    assert not guard.looping and guard.kept() == song


@pytest.mark.parametrize("step", [1, 7])
def test_a_loop_that_never_ends_a_sentence_is_caught_by_its_period(step):
    text = "No puedo encontrar la vida que le dara, pero" + " la vida que le dara, pero" * 5
    guard = feed_all(text, step)
    assert guard.looping
    kept = guard.kept()
    assert kept.startswith("No puedo encontrar la vida que le dara, pero")
    assert kept.count("la vida que le dara") <= 2 and text.startswith(kept)
    assert text[len(kept)] == " "  # cut between words


@pytest.mark.parametrize(
    "text",
    [
        "Mix the flour and water. Let it rest for an hour. Bake it at 220 degrees. Enjoy the bread!",
        "| Day | Task |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n| Mon | Run |\n",
        "Numbers: 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.",
        "```python\ntotal = total + step\ntotal = total + step\ntotal = total + step\nprint(total)\n```\nThat adds it up.",
        "=" * 80 + "\nA heading in a box\n" + "=" * 80,
    ],
)
def test_ordinary_replies_code_and_separators_are_not_loops(text):
    guard = feed_all(text, 4)
    assert not guard.looping
    assert guard.kept() == text
