"""First-person sentences as facts about their subject (memory_core.persona.third_person)."""

from __future__ import annotations

import pytest

from memory_core.persona.third_person import as_first_person, third_person


@pytest.mark.parametrize(
    ("said", "subject", "fact"),
    [
        ("I moved to Lyon last month.", "The user", "The user moved to Lyon last month."),
        ("I love painting with my kids!", "Caroline", "Caroline loves painting with their kids."),
        (
            "I'm hiking with some buddies this weekend.",
            "The user",
            "The user is hiking with some buddies this weekend.",
        ),
        ("I've been learning the violin.", "The user", "The user has been learning the violin."),
        ("I try to run every day", "Tim", "Tim tries to run every day."),
        ("My sister is a nurse.", "The user", "The user's sister is a nurse."),
        ("Last weekend I joined a pottery class.", "The user", "Last weekend the user joined a pottery class."),
        ("Dance gives me an escape.", "The user", "Dance gives the user an escape."),
        ("Rex and I walk by the lake.", "The user", "Rex and the user walk by the lake."),
        ("I really enjoy jazz.", "The user", "The user really enjoys jazz."),
    ],
)
def test_a_statement_about_oneself_becomes_a_fact_about_the_subject(said, subject, fact):
    assert third_person(said, subject) == fact


def test_a_fact_reads_back_as_said_for_comparing_two_facts():
    assert as_first_person("The user lives in Porto.", "The user") == "I live in Porto."
    assert as_first_person("The user's locker code is 4312", "The user") == "My locker code is 4312"
    assert as_first_person("Caroline moved to Sweden.", "Caroline") == "I moved to Sweden."
    assert as_first_person("Melanie moved to Sweden.", "Caroline") == "Melanie moved to Sweden."
