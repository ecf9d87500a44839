"""Pin, unpin and forget (app.operations.memory): what each did, in the words every front end shows."""

from __future__ import annotations

import pytest

from app.operations import memory as verbs


def _pages(store, n: int) -> list[int]:
    cid = store.conversations.create_conversation()
    return [store.intake.add_page(cid, f"My {w} is blue.", "Noted.") for w in ("car", "door", "kite")[:n]]


def test_pin_and_unpin_say_which_item(store):
    pid = _pages(store, 1)[0]
    done = verbs.pin(store, "page", pid)
    assert done.found and done.describe() == f"Page {pid} pinned."
    assert store.pages.get(pid).pinned
    assert verbs.pin(store, "page", pid, False).describe() == f"Page {pid} unpinned."
    assert not store.pages.get(pid).pinned
    fact = store.persona.add_knowledge("user", "I live in Lisbon.")
    assert fact is not None
    assert verbs.pin(store, "knowledge", fact).describe() == f"Fact {fact} pinned."


def test_pinning_what_memory_does_not_hold_says_so(store):
    done = verbs.pin(store, "trait", 999)
    assert not done.found and done.describe() == "Trait 999 is not in memory."


def test_forget_one_several_or_none(store):
    a, b, c = _pages(store, 3)
    assert verbs.forget(store, "page", a).describe() == f"Page {a} forgotten."
    done = verbs.forget(store, "page", [b, c])
    assert done.removed == 2 and done.describe() == "Forgot 2 pages."
    assert store.pages.count_pages() == 0
    assert verbs.forget(store, "page", [a]).describe() == f"Nothing forgotten: memory holds no page {a}."


def test_an_unknown_kind_is_refused(store):
    with pytest.raises(ValueError, match="kind must be one of"):
        verbs.pin(store, "chat", 1)
