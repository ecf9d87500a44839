"""Which chat messages ask Mnemo to remember something, and what the fact is (app.remember)."""
import pytest

from app.remember import remember_request


@pytest.mark.parametrize("message, fact", [
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
])
def test_a_request_to_remember_gives_its_fact(message, fact):
    assert remember_request(message) == fact


@pytest.mark.parametrize("message", [
    "Remember when we went hiking?",          # a question about the past
    "Remember that epic block in Game 7 of the '16 Finals? He chased him down.",
    "Remember me?",
    "Don't forget to buy milk",               # a reminder: Mnemo does not schedule
    "I remember my first dog.",               # not a request
    "Do you remember my cat?",
    "remembering is hard",
    "remember",
    "Remember that",
    "Remember that " + "very " * 80 + "long",   # too long to be one fact
    "",
])
def test_other_messages_are_not_requests(message):
    assert remember_request(message) is None
