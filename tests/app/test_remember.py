"""Which chat messages ask Mnemo to remember something, and what the fact is (app.operations.remember)."""

import pytest

from app.operations.remember import remember_request


@pytest.mark.parametrize(
    "message, fact",
    [
        ("Remember that I'm allergic to peanuts.", "I'm allergic to peanuts"),
        ("Please remember, I'm vegetarian.", "I'm vegetarian"),
        ("Remember this: my locker code is 4312.", "my locker code is 4312"),
        ("Can you remember that my mother's name is Ana?", "my mother's name is Ana"),
        ("Hey Mnemo, don't forget that Sam's birthday is on 3 May, thanks!", "Sam's birthday is on 3 May"),
        ("Keep in mind that I have two kids.", "I have two kids"),
        ("Make a note that the plumber comes Tuesday", "the plumber comes Tuesday"),
        ("Remember my wifi password is hunter2 please", "my wifi password is hunter2"),
        ("Remember it is my turn to cook on Fridays", "it is my turn to cook on Fridays"),
        # only the first sentence: the question after it is answered as usual
        ("Remember that I'm vegetarian. What should I cook tonight?", "I'm vegetarian"),
        # the request opens the last sentence
        ("What should I cook tonight? Remember that I'm vegetarian.", "I'm vegetarian"),
        # the request ends the message and points back at what came before it
        ("I am allergic to peanuts, so please remember that.", "I am allergic to peanuts"),
        ("My locker code is 4312. Don't forget it!", "My locker code is 4312"),
        ("I have two kids - keep that in mind", "I have two kids"),
        ("I'm vegetarian so remember that", "I'm vegetarian"),
        ("We went to Rome in 2019. Can you remember that?", "We went to Rome in 2019"),
        ("My wifi password is hunter2 (remember that)", "My wifi password is hunter2"),
        ("I am vegan.  Please note that down, thanks!", "I am vegan"),
        (
            "My sister Ana lives in Lisbon. She works as a nurse. Remember that.",
            "My sister Ana lives in Lisbon. She works as a nurse",
        ),
        ("Thanks! By the way, my son is called Leo, remember that.", "my son is called Leo"),
        ("Also: I hate cilantro - keep that in mind please", "I hate cilantro"),
    ],
)
def test_a_request_to_remember_gives_its_fact(message, fact):
    assert remember_request(message) == fact


@pytest.mark.parametrize(
    "message",
    [
        "Remember when we went hiking?",  # a question about the past
        "Remember that epic block in Game 7 of the '16 Finals? He chased him down.",
        "Remember me?",
        "Don't forget to buy milk",  # a reminder: Mnemo does not schedule
        "I remember my first dog.",  # not a request
        "Do you remember my cat?",
        "remembering is hard",
        "remember",
        "Remember that",
        "Remember that " + "very " * 80 + "long",  # too long to be one fact
        "",
        "I want you to remember that",  # no clause ends before the request
        "We went to Rome in 2019. Remember that?",  # asks whether Mnemo recalls it
        "Do you remember that?",
        "What is my dog called? Remember that.",  # a question is not a fact
        "Great. Remember that.",  # nothing said before it
        "Keep that in mind",
        "I know you remember that, right?",
        "I remember that.",
        "word " * 150 + ". Remember that I like tea.",  # a long paste ending in a request is not one
    ],
)
def test_other_messages_are_not_requests(message):
    assert remember_request(message) is None


@pytest.mark.parametrize(
    "message, what",
    [
        ("Forget that my locker code is 4312.", "my locker code is 4312"),
        ("Please forget what I said about my sister.", "my sister"),
        ("Can you stop remembering that I smoke?", "I smoke"),
        ("Forget my locker code, thanks", "my locker code"),
        ("Hey Mnemo, forget that I live in Porto. What is the weather?", "I live in Porto"),
        ("Don't remember that I was in hospital", "I was in hospital"),
    ],
)
def test_a_request_to_forget_names_what(message, what):
    from app.operations.remember import forget_request

    assert forget_request(message) == what


@pytest.mark.parametrize(
    "message",
    [
        "Forget it.",
        "forget about it",
        "Forget everything!",  # nothing named (wiping is the inspector's)
        "Don't forget to call Sam",
        "I forgot my keys",
        "forget me",
        "Forget what I just said",
        "Remember that my locker code is 4312.",
    ],
)
def test_not_a_request_to_forget(message):
    from app.operations.remember import forget_request

    assert forget_request(message) is None
