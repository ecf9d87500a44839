"""Whose memory an imported dialogue is: which of its two named speakers, if any, is the app's user.

A dialogue between two named people (LoCoMo JSON) is not the user's chat with an assistant: it may be
the user talking with someone, or two other people altogether. The importer keeps the two names as the
page's two sides (speaker_a the user side, speaker_b the assistant side, as `app.importers.locomo` maps
them) and the import is told, or asks, who the user is. Every page of such a dialogue then carries

    page.meta["people"] = {"user_side": A, "assistant_side": B, "me": A | B | None}

`me` names the app's user, None when the dialogue is between other people. Whichever side the user is
on, the sides stay as imported (`me` may name the assistant side), so a page's text and turns never
depend on the choice. Pages of the app's own chats and of the user's own ChatGPT or Claude exports carry
no "people": they are the user's own conversations.

A dialogue whose choice was never made (a caller that did not ask) is recorded as other people's: what
strangers said must never become "the user's".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.importers.base import OTHERS, ImportFatalError, ParsedConversation, ParseResult, People

__all__ = ["OTHERS", "Assignment", "People", "assign", "dialogues", "match_name", "pair", "speaker_names"]


def dialogues(parsed: ParseResult | Sequence[ParsedConversation]) -> list[ParsedConversation]:
    """The conversations of `parsed` between two named people."""
    convs = parsed.conversations if isinstance(parsed, ParseResult) else parsed
    return [c for c in convs if c.people is not None]


def speaker_names(convs: Sequence[ParsedConversation]) -> list[str]:
    """Every named speaker of these dialogues, in the order they first appear (user side first)."""
    names: list[str] = []
    for c in dialogues(convs):
        assert c.people is not None
        for name in (c.people.user_side, c.people.assistant_side):
            if name not in names:
                names.append(name)
    return names


def match_name(name: str, names: Sequence[str]) -> str | None:
    """The speaker `name` means: exactly, else the one equal to it ignoring case and outer spaces."""
    if name in names:
        return name
    folded = [n for n in names if n.strip().casefold() == name.strip().casefold()]
    return folded[0] if len(folded) == 1 else None


@dataclass
class Assignment:
    """What `assign` decided: the dialogues the user is in, and those of other people."""

    mine: list[ParsedConversation]
    others: list[ParsedConversation]


def assign(convs: Sequence[ParsedConversation], me: str | None, *, what: str = "this file") -> Assignment:
    """Record `me` (a speaker's name, or None: "these are other people") on every dialogue of `convs`.

    A dialogue that `me` is not a speaker of is other people's. A name that is nobody's in any of them
    raises ImportFatalError (one line; nothing is written), as does a choice for a file without a
    dialogue between named people."""
    named = dialogues(convs)
    if not named:
        raise ImportFatalError(
            f"{what} holds no dialogue between two named people (--as-user and --others are for those, "
            "such as LoCoMo JSON); your own chats need neither"
        )
    names = speaker_names(named)
    who = None
    if me is not None:
        who = match_name(me, names)
        if who is None:
            raise ImportFatalError(
                f"{me!r} is not a speaker in {what}; its speakers are {_listed(names)} "
                "(or use --others if you are neither)"
            )
    out = Assignment([], [])
    for c in named:
        assert c.people is not None
        mine = who in (c.people.user_side, c.people.assistant_side)
        c.people = c.people.with_me(who if mine else OTHERS)
        (out.mine if mine else out.others).append(c)
    return out


def _listed(names: Sequence[str]) -> str:
    shown = [repr(n) for n in names[:8]] + ([f"{len(names) - 8} more"] if len(names) > 8 else [])
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]


def pair(c: ParsedConversation) -> str:
    """'Caroline and Melanie' for a note."""
    assert c.people is not None
    return f"{c.people.user_side} and {c.people.assistant_side}"
