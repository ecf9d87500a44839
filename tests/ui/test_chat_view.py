"""The chat view on its own (real widgets, offscreen): opening a long conversation builds the newest
messages at once and the older ones in small batches, without losing order, place or state."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ui import plain
from ui.chat_view import FIRST_RENDER, MAX_RENDERED, ChatView


@dataclass
class Msg:  # the fields of memory_core.Message that the view reads
    id: int
    role: str
    content: str
    status: str = "complete"
    meta: dict = field(default_factory=dict)


def _chat(n: int, start: int = 0) -> list[Msg]:
    return [
        Msg(
            i,
            "user" if i % 2 == 0 else "assistant",
            f"Question {i} about drought?" if i % 2 == 0 else f"Answer {i}: mulch and shade. " * 8,
        )
        for i in range(start, start + n)
    ]


@pytest.fixture
def view(qtbot):
    v = ChatView()
    qtbot.addWidget(v)
    v.resize(800, 600)
    v.show()
    return v


def _ids(view) -> list[int]:
    return [w.message_id for w in view.messages()]


def test_the_newest_messages_show_at_once_and_the_older_ones_follow_in_order(view, qtbot):
    msgs = _chat(MAX_RENDERED + 10)
    view.set_messages(msgs)
    assert _ids(view) == [m.id for m in msgs[-FIRST_RENDER:]]  # what is on screen, built now
    assert view.earlier_button.isVisible() and view.earlier_button.text() == "Show 10 earlier messages"
    qtbot.waitUntil(lambda: len(view.messages()) == MAX_RENDERED, timeout=10_000)
    assert _ids(view) == [m.id for m in msgs[-MAX_RENDERED:]]
    bar = view.scroll_area.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=5_000)  # still at the newest message
    view.earlier_button.click()
    assert _ids(view) == [m.id for m in msgs]


def test_revealing_or_showing_earlier_builds_what_is_still_waiting(view, qtbot):
    msgs = _chat(MAX_RENDERED + 4)
    view.set_messages(msgs)
    old = msgs[MAX_RENDERED // 2 + 4]  # rendered later, not yet
    assert view.widget_of(old.id) is None
    assert view.reveal(old.id) is not None and _ids(view) == [m.id for m in msgs[-MAX_RENDERED:]]
    view.set_messages(msgs)
    view.earlier_button.click()  # before the batches ran
    assert _ids(view) == [m.id for m in msgs]


def test_opening_another_chat_stops_the_batches_of_the_previous_one(view, qtbot):
    view.set_messages(_chat(40))
    short = _chat(3, start=100)
    view.set_messages(short)
    qtbot.wait(300)
    assert _ids(view) == [100, 101, 102]
    view.set_messages(_chat(40))
    view.clear()  # a new chat
    qtbot.wait(300)
    assert view.messages() == [] and view.is_empty


def test_messages_built_later_follow_the_busy_state(view, qtbot):
    msgs = _chat(30)
    view.set_messages(msgs)
    view.set_busy(True)  # a reply started meanwhile
    qtbot.waitUntil(lambda: len(view.messages()) == 30, timeout=10_000)
    replies = [w for w in view.messages() if w.role == "assistant"]
    assert all(not w.regenerate_button.isEnabled() for w in replies)
    view.set_busy(False)
    assert all(w.regenerate_button.isEnabled() for w in replies)


def test_an_imported_dialogue_shows_its_speakers_names(view, qtbot):
    """A LoCoMo dialogue is stored as "Name: text" (the name helps recall); the view shows the name as
    the author and the text without it. A widget reused for an ordinary chat says You / Mnemo again."""
    view.set_messages(
        [
            Msg(1, "user", "Caroline: I went to a support group yesterday.", meta={"speaker": "Caroline"}),
            Msg(2, "assistant", "Melanie: That's great!", meta={"speaker": "Melanie"}),
        ]
    )
    qtbot.waitUntil(lambda: len(view.messages()) == 2)
    first, second = view.messages()
    assert first.role_label.text() == "Caroline" and second.role_label.text() == "Melanie"
    assert first.body.toPlainText().strip() == "I went to a support group yesterday."
    assert first.text == "Caroline: I went to a support group yesterday."  # copy and edit keep what is stored
    view.set_messages(
        [Msg(3, "user", "Melanie: not the speaker", meta={"speaker": "Caroline"}), Msg(4, "assistant", "Hello")]
    )
    qtbot.waitUntil(lambda: [w.message_id for w in view.messages()] == [3, 4])
    first, second = view.messages()
    assert first.role_label.text() == "You" and second.role_label.text() == "Mnemo"
    assert first.body.toPlainText().strip() == "Melanie: not the speaker"


def test_a_reply_says_what_its_message_asked_to_remember(view, qtbot):
    stats = {
        "completion_tokens": 12,
        "remembered": {"kind": "knowledge", "id": 7, "text": "I'm vegetarian", "outcome": "added"},
    }
    view.set_messages(
        [Msg(1, "user", "Remember that I'm vegetarian."), Msg(2, "assistant", "Noted!", meta={"stats": stats})]
    )
    qtbot.waitUntil(lambda: len(view.messages()) == 2)
    reply = view.messages()[1]
    assert reply.stats_label.text() == "<a href='remembered:knowledge:7'>remembered as fact 7</a> · 12 tokens"
    assert reply.stats_label.toolTip() == plain.tip("Kept in memory: I'm vegetarian")
    shown = []
    view.rememberedRequested.connect(lambda kind, iid: shown.append((kind, iid)))
    reply.stats_label.linkActivated.emit("remembered:knowledge:7")  # a click on the link
    assert shown == [("knowledge", 7)]
    stats["remembered"] = {**stats["remembered"], "outcome": "confirmed"}
    view.set_messages(
        [Msg(3, "user", "Remember that I'm vegetarian."), Msg(4, "assistant", "Yes.", meta={"stats": stats})]
    )
    qtbot.waitUntil(lambda: [w.message_id for w in view.messages()] == [3, 4])
    assert "already remembered (fact 7)</a>" in view.messages()[1].stats_label.text()
    # a message that asked to forget: what went, in words (nothing to link to any more)
    forgot = {"completion_tokens": 5, "forgot": {"what": "my <b>code</b>", "facts": [[7, "my code"]], "pages": 2}}
    view.set_messages([Msg(5, "user", "Forget my <b>code</b>."), Msg(6, "assistant", "Done.", meta={"stats": forgot})])
    qtbot.waitUntil(lambda: [w.message_id for w in view.messages()] == [5, 6])
    assert view.messages()[1].stats_label.text() == "forgot 1 fact and 2 pages · 5 tokens"
    assert view.messages()[1].stats_label.toolTip() == plain.tip("Forgotten on request: “my <b>code</b>”")


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_html_in_a_message_shows_as_text_and_hides_nothing_after_it(view, qtbot, role):
    """Qt's Markdown reader took `<div>` as HTML and dropped it and every word after it."""
    text = (
        "Use the <div> element, not <span>, for blocks; a < b stays.\n\n"
        "Inline `<b>` keeps its code, and so does a block:\n\n```html\n<p>hi</p>\n```\n\n"
        "See <https://example.com> and the end.\n<memory>"
    )
    view.set_messages([Msg(1, role, text)])
    qtbot.waitUntil(lambda: len(view.messages()) == 1)
    shown = view.messages()[0].body.toPlainText()
    for part in (
        "Use the <div> element, not <span>, for blocks; a < b stays.",
        "Inline <b> keeps its code",
        "<p>hi</p>",
        "https://example.com",
        "and the end.",
        "<memory>",
    ):
        assert part in shown
    assert "\\" not in shown
    assert view.messages()[0].text == text  # copy and edit keep what is stored


def test_a_tooltip_shows_its_text_as_written():
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setHtml(plain.tip("a <memory> tag & more\nand a second line"))
    assert doc.toPlainText() == "a <memory> tag & more\nand a second line" and plain.tip("") == ""
