"""The quoted pages' notation written back by the model (app.chat.quoted_turns), fed as a stream would be."""

from __future__ import annotations

import pytest

from app.chat.quoted_turns import HOLD_LABELLED, QuotedPage, QuotedTurnFilter, asks_for_dialogue, recited_side

PAGES = [
    QuotedPage("On Friday I made a mushroom risotto.", "Sounds delicious."),
    QuotedPage("My first dog was a beagle called Pepper.", "Beagles are so friendly."),
]


def run(text: str, size: int, active: bool = True, quoted=()) -> tuple[str, QuotedTurnFilter]:
    """Feed `text` in chunks of `size` characters, as a tokenizer would (a label or a header split
    anywhere); stop where the filter ends the reply, as the agent does."""
    f = QuotedTurnFilter(active=active, quoted=quoted)
    shown = []
    for i in range(0, len(text), size):
        shown.append(f.feed(text[i : i + size]))
        if f.ended:
            break
    shown.append(f.rest())
    return "".join(shown), f


CASES = [
    # a label opening the reply goes; the answer after it stays; the turn it writes next ends the reply
    (
        "User: My first dog was a beagle called Pepper.\nAssistant: Beagles are so friendly.",
        "My first dog was a beagle called Pepper.\n",
        True,
    ),
    ("Assistant: Porto.", "Porto.", False),
    ("(user) Leeds, as a nurse.\n(assistant) Demanding work.", "Leeds, as a nurse.\n", True),  # as facts are quoted
    ("(laughs) A user manual.", "(laughs) A user manual.", False),
    ("  user :   Kyoto and Osaka.", "Kyoto and Osaka.", False),
    # after content, a label ends the reply: nobody said what follows
    (
        "Sister: She works as a nurse in Leeds.\nUser: What is your job?\nAssistant: I'm a nurse.",
        "Sister: She works as a nurse in Leeds.\n",
        True,
    ),
    # a line ending in ":" announces one quoted line: it stays without its label; the next ends the reply
    (
        "Here's what you told me:\n\nUser: I'm an engineer.\nAssistant: Sounds rewarding!",
        "Here's what you told me:\n\nI'm an engineer.\n",
        True,
    ),
    # copied headers go, alone on their line; the same words inside a sentence stay
    (
        "I can't remember.\n\nLater conversations:\n[2023-11-15 08:49] (page 7)\nUser: How was the risotto?",
        "I can't remember.\n\n",
        True,
    ),
    (
        "Mr. Okafor.\nEarlier conversations:\n[2023-11-15 07:48]\n(page 16)\nKnown facts:\nThat is all.",
        "Mr. Okafor.\nThat is all.",
        False,
    ),
    (
        "Earlier conversations: you told me about Pepper.\n[link](http://x) on (page 3)\nUsers: many.",
        "Earlier conversations: you told me about Pepper.\n[link](http://x) on (page 3)\nUsers: many.",
        False,
    ),
    # code passes whole, labels and all
    (
        "Like this:\n```\nUser: hi\nAssistant: hello\n```\nDone.",
        "Like this:\n```\nUser: hi\nAssistant: hello\n```\nDone.",
        False,
    ),
    # a word that only begins like a label is shown once it is clear
    ("Username and password.\nAssistance is near.", "Username and password.\nAssistance is near.", False),
    ("us", "us", False),
]


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
@pytest.mark.parametrize("text,shown,ended", CASES)
def test_the_notation_goes_and_the_words_stay_however_the_stream_is_split(text, shown, ended, size):
    out, f = run(text, size)
    assert out == shown
    assert f.ended is ended


RECITALS = [
    # the model's non-answer, then the page that holds the answer: shown as the page's own words
    (
        "I'm sorry, I can't remember the recipe.\nUser: On Friday I made a mushroom risotto.\nAssistant: Sounds delicious.\n"
        "User: Did you like it?",
        "I'm sorry, I can't remember the recipe.\nYou said: “On Friday I made a mushroom risotto.”\n"
        "I replied: “Sounds delicious.”\n",
        True,
    ),
    # a close recitation opening the reply: the page's words, not the model's version of them
    (
        "User: You're right, I made a mushroom risotto on Friday.",
        "You said: “On Friday I made a mushroom risotto.”",
        False,
    ),
    (
        "Assistant: my first dog was a beagle called Pepper!\nThat is all.",  # attributed as the page has it
        "You said: “My first dog was a beagle called Pepper.”\nThat is all.",
        False,
    ),
    # words the pages do not hold are no recitation
    (
        "User: I'm making a mushroom risotto.\nAssistant: Sounds delicious.",
        "I'm making a mushroom risotto.\nI replied: “Sounds delicious.”",
        False,
    ),
    ("Maybe.\nUser: My first dog was a poodle called Rex.", "Maybe.\n", True),
    ("(user) My first dog was a beagle called Pepper.", "You said: “My first dog was a beagle called Pepper.”", False),
]


@pytest.mark.parametrize("size", [1, 4, 1000])
@pytest.mark.parametrize("text,shown,ended", RECITALS)
def test_a_recited_page_is_shown_as_its_own_words_and_attributed_as_it_was_said(text, shown, ended, size):
    out, f = run(text, size, quoted=PAGES)
    assert out == shown
    assert f.ended is ended


@pytest.mark.parametrize(
    "source,said",
    [
        (None, "I replied"),
        ("chatgpt", "ChatGPT replied"),
        ("claude", "Claude replied"),
        ("locomo", "In an imported conversation"),
    ],
)
def test_a_recitation_says_who_said_it_by_where_the_page_came_from(source, said):
    page = QuotedPage("Which lens should I buy?", "A 35 mm prime suits street photography best.", source)
    out, _ = run("Assistant: A 35 mm prime suits street photography best!", 3, quoted=[page])
    assert out == f"{said}: “A 35 mm prime suits street photography best.”"


def test_a_long_labelled_line_is_decided_on_its_start_and_not_held_to_its_end():
    long = "User: " + "Once upon a time there was a long story. " * 20
    f = QuotedTurnFilter(quoted=PAGES)
    shown = f.feed(long[: HOLD_LABELLED + 10])
    assert shown.startswith("Once upon a time") and f.labels_removed == 1
    assert f.feed(long[HOLD_LABELLED + 10 :]) == long[HOLD_LABELLED + 10 :]
    recital = "User: On Friday I made a mushroom risotto." + " It was so good" * 20 + "\nMore."
    out, f = run(recital, 5, quoted=PAGES)
    assert out == "You said: “On Friday I made a mushroom risotto.”\nMore."  # the rest of that line goes


def test_a_recitation_is_matched_on_words_both_ways():
    assert recited_side("On Friday I made a mushroom risotto", PAGES) == (
        "You said",
        "On Friday I made a mushroom risotto.",
    )
    assert recited_side("risotto", PAGES) is None  # holds too little of the side
    assert (
        recited_side("On Friday I made a mushroom risotto with my aunt Clara in her old kitchen in Porto", PAGES)
        is None
    )  # says too much besides
    assert recited_side("", PAGES) is None and recited_side("Sounds delicious", []) is None


def test_what_was_taken_out_is_counted():
    _, f = run("User: Pepper.\n[2023-11-15 08:49] (page 7)\nEarlier conversations:\nYes.", 4)
    assert (f.labels_removed, f.headers_removed, f.recitations, f.ended) == (1, 2, 0, False)
    assert f.removed == 3


def test_an_inactive_filter_passes_everything_at_once():
    text = "User: hi\nAssistant: hello\n[2023-11-15 08:49] (page 7)"
    out, f = run(text, 5, active=False)
    assert out == text and not f.removed


def test_only_the_start_of_a_line_is_held_back():
    f = QuotedTurnFilter()
    assert f.feed("The answer is Pepper") == "The answer is Pepper"  # decided at its first letter
    assert f.feed(".\nU") == ".\n"  # "U" may begin "User:"
    assert f.feed("nder the bed") == "Under the bed"
    assert f.feed("\n[20") == "\n"  # "[" may begin a page header
    assert f.feed("23] was a year") == ""  # still may be one, for up to 40 characters
    assert f.feed(" of many things, all of them good") == "[2023] was a year of many things, all of them good"


@pytest.mark.parametrize(
    "message,asks",
    [
        ("Write a dialogue between a user and an assistant about tea.", True),
        ("Can you draft a short script for a skit?", True),
        ("Role-play a job interview with me", True),
        ("Where did my grandmother grow up?", False),
        ("What did we talk about in our last conversation?", False),
    ],
)
def test_a_message_asking_for_a_dialogue_keeps_its_labels(message, asks):
    assert asks_for_dialogue(message) is asks
