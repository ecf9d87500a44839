"""Keep the prompt's quoting notation out of a streaming reply.

Recalled pages are quoted to the model as "[2023-11-15 04:48] (page 6)" / "User: …" / "Assistant: …"
under "Earlier conversations:", known facts as "- (user) …" under "Known facts:" (app.chat.prompting).
The bundled 135M model copies that notation back: in
`python -m tests.bench.reply_quality --recall-only --seeds 8 --first-seed 4000` 15 of 128 replies
began "User: My first dog was a beagle called Pepper." or wrote the dialogue on ("Assistant: Beagles
are so friendly." / "User: What is your job?"), and some quoted page headers. Every such reply was to
a message for which pages had been quoted; none of the small talk did it.

So, while pages or facts are quoted, the reply is filtered line by line as it streams:

- a line that opens with a role label and says what a quoted page says (it holds nearly all of a
  page side's words, and most of its own words are the side's) is a recitation: it is shown as the
  page's own words, with who said them: 'You said: “On Friday I made a mushroom risotto.”', 'I
  replied: “…”' ("ChatGPT replied", "Claude replied" for an imported chat; "In an imported
  conversation" for a transcript between other people). The model sometimes answers "I can't
  remember" and then recites the page that holds the answer; that recitation is worth keeping;
- any other role label that opens the reply is dropped ("User: The 2018 Berlin marathon." → "The
  2018 Berlin marathon."); the words after it are often the answer, so the line stays;
- any other role label on a later line ends the reply: from there the model writes turns nobody
  said. One exception: right after a line that ends with ":" ("Here's what you told me:") one
  labelled line is the quote it announces, so it stays, without its label;
- a line that is only a copied header ("[2023-11-15 04:48] (page 6)", "Earlier conversations:",
  "Later conversations:", "Known facts:") is dropped.

Only the start of a line is held back while it could still become a label or a header (a few
characters; up to 40 for a line that opens with "[" or "("), and a labelled line until it ends (up
to `HOLD_LABELLED` characters) so it can be compared with the pages. Lines inside a ``` code block
pass. A message that asks for a dialogue or a script (`asks_for_dialogue`) gets no filter: there
the labels are the content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.chat.prompting import FACTS_HEADING, PAGES_HEADING, ROLE_LABELS
from memory_core.text import content_words

LABELS = tuple(label.lower() for label in ROLE_LABELS)
HOLD_LABELLED = 240  # a labelled line longer than this is decided without the rest of it
# "User: …" as pages are quoted, "(user) …" as known facts are ("- (user) The user's sister is a nurse")
_LABEL = re.compile(r"(?:(?:user|assistant)[ \t]*:|\((?:user|assistant)\))[ \t]*", re.IGNORECASE)
# the prompt's headings, and the model's variations on the first ("Later conversations:")
_HEADER_WORDS = (
    PAGES_HEADING.lower(),
    "later conversations:",
    "previous conversations:",
    "recent conversations:",
    FACTS_HEADING.lower(),
)
_DATE_HEADER = re.compile(r"\[\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d)?)?\](?:[ \t]*\(page \d+\))?", re.IGNORECASE)
_PAGE_HEADER = re.compile(r"\(page \d+\)", re.IGNORECASE)
_HOLD_BRACKET = 40  # the longest start of a "[" or "(" line held back while it may be a header
_DIALOGUE = re.compile(r"\b(?:dialog(?:ue)?s?|scripts?|screenplays?|transcripts?|role-?play|skits?)\b", re.IGNORECASE)
RECITES_SIDE = 0.8  # a recitation holds this share of the page side's words (stop words aside)
RECITES_LINE = 0.6  # and this share of its own words are the side's


def asks_for_dialogue(message: str) -> bool:
    """The user asks for text in which role labels are the content ("Write a dialogue between …")."""
    return bool(_DIALOGUE.search(message))


# who said each side of a quoted page, by the source of its conversation (None: Mnemo's own chats)
_SAID_BY = {
    None: ("You said", "I replied"),
    "chatgpt": ("You said", "ChatGPT replied"),
    "claude": ("You said", "Claude replied"),
}
_SAID_IN_IMPORT = ("In an imported conversation", "In an imported conversation")  # a transcript, LoCoMo


@dataclass(frozen=True)
class QuotedPage:
    """A page quoted to the model: its two sides, and the source of its conversation (None: a chat in
    Mnemo; "chatgpt", "claude", "locomo", "text": imported), which says who said them."""

    user_text: str
    assistant_text: str
    source: str | None = None

    def said(self, role: str) -> str:
        user, assistant = _SAID_BY.get(self.source, _SAID_IN_IMPORT)
        return user if role == "user" else assistant


def recited_side(line: str, quoted: Sequence[QuotedPage]) -> tuple[str, str] | None:
    """Who said the page side that `line` recites ("You said", "ChatGPT replied", …) and its text, or
    None: the line holds nearly all of the side's words (RECITES_SIDE) and most of its words are the
    side's (RECITES_LINE), counting content words (memory_core.text). "My first dog was a poodle called Rex" recites no
    "… a beagle called Pepper"."""
    said = set(content_words(line))
    best, best_share = None, 0.0
    for page in quoted:
        for role, text in (("user", page.user_text), ("assistant", page.assistant_text)):
            side = set(content_words(text or ""))
            if not said or not side:
                continue
            common = len(said & side)
            share = common / len(side)
            if share >= RECITES_SIDE and common / len(said) >= RECITES_LINE and share > best_share:
                best, best_share = (page.said(role), text.strip()), share
    return best


def _is_header(line: str) -> bool:
    s = line.strip()
    return bool(s) and (
        s.lower() in _HEADER_WORDS or bool(_DATE_HEADER.fullmatch(s)) or bool(_PAGE_HEADER.fullmatch(s))
    )


def _may_become_marker(start: str) -> bool:
    """`start` (a line's beginning, without its leading blanks) could still grow into a label or header."""
    low = start.lower()
    if any(word.startswith(low.rstrip(" \t")) for word in LABELS) or any(
        word.startswith(low) for word in _HEADER_WORDS + ("```",)
    ):
        return True
    if any(low.startswith(word) for word in _HEADER_WORDS):  # a header, unless more words follow
        return len(low) <= max(map(len, _HEADER_WORDS)) + 2
    return low.startswith(("[", "(")) and len(low) <= _HOLD_BRACKET


class QuotedTurnFilter:
    """Feed it the reply's chunks; it returns what can be shown now. `ended` turns true where the reply
    starts writing a further turn: the caller stops the stream there (the words before it stay).
    `quoted`: the pages quoted to the model."""

    def __init__(self, active: bool = True, quoted: Sequence[QuotedPage] = ()):
        self.active = active
        self.quoted = list(quoted)
        self.ended = False
        self.labels_removed = 0
        self.headers_removed = 0
        self.recitations = 0
        self._line = ""  # the held start of the current line
        self._passing = False  # the current line is decided: the rest of it passes
        self._dropping = False  # the rest of the current line goes (a recitation shown as the page's words)
        self._held_label = False  # the held line opens with a role label
        self._in_code = False
        self._said = False  # something other than blanks has been shown
        self._shown: list[str] = []  # the current line as shown so far
        self._last_line = ""  # the last non-blank line shown
        self._quote_kept = False  # the one labelled line an introduction ending in ":" may announce

    def feed(self, chunk: str) -> str:
        if not self.active:
            return chunk
        out: list[str] = []
        i = 0
        while i < len(chunk) and not self.ended:
            if self._passing or self._dropping:  # the rest of a decided line, up to its end, at once
                j = chunk.find("\n", i)
                end = len(chunk) if j < 0 else j + 1
                if self._passing:
                    out.append(self._note(chunk[i:end]))
                elif j >= 0:
                    out.append(self._note("\n"))
                if j >= 0:
                    self._passing = self._dropping = False
                i = end
                continue
            ch = chunk[i]
            i += 1
            self._line += ch
            if self._held_label and ch != "\n" and len(self._line) < HOLD_LABELLED:
                continue  # a labelled line: decided at its end
            out.append(self._decide(at_end=ch == "\n"))
        return "".join(out)

    def rest(self) -> str:
        """At the end of the stream: the held start of the last line, unless it was a marker."""
        if not self.active or self.ended or not self._line:
            return ""
        return self._decide(at_end=True)

    @property
    def removed(self) -> int:
        """Labels and headers taken out, recitations given their attribution."""
        return self.labels_removed + self.headers_removed + self.recitations

    def _decide(self, at_end: bool) -> str:
        """Look at the held start of a line; return what to show of it (maybe nothing yet)."""
        line = self._line
        body = line.lstrip(" \t")
        if self._in_code or body.startswith("```"):
            if body.startswith("```"):
                self._in_code = not self._in_code
            elif not at_end and "```".startswith(body):
                return ""  # it may close the block: wait
            return self._show(line, at_end)
        label = _LABEL.match(body)
        if label:
            if not at_end and len(body) < HOLD_LABELLED:
                self._held_label = True
                return ""  # the whole line, to compare it with the pages
            self._held_label = False
            return self._labelled(body[label.end() :], at_end)
        if at_end:
            if _is_header(line):
                self.headers_removed += 1
                self._line = ""
                return ""
            return self._show(line, at_end)
        if _may_become_marker(body):
            return ""
        return self._show(line, at_end)

    def _labelled(self, text: str, at_end: bool) -> str:
        """A line that opens with a role label, without the label (all of it, or its first
        HOLD_LABELLED characters)."""
        side = recited_side(text, self.quoted)
        eol = "\n" if text.endswith("\n") else ""
        if side is not None:
            self.recitations += 1
            self._line = ""
            shown = self._show(f"{side[0]}: “{side[1]}”{eol}", True)
            self._dropping = not at_end  # the page's words replace the rest of the model's line
            return shown
        if self._said and (self._quote_kept or not self._last_line.endswith(":")):
            self.ended = True  # the dialogue written on: nobody said what follows
            self._line = ""
            return ""
        self._quote_kept = self._said
        self.labels_removed += 1
        return self._show(text, at_end)

    def _show(self, text: str, at_end: bool) -> str:
        self._line = ""
        self._passing = not at_end
        return self._note(text)

    def _note(self, text: str) -> str:
        """Track what is shown: whether anything was said, and the last line said."""
        self._said = self._said or bool(text.strip())
        *ended, rest = text.split("\n")
        for piece in ended:
            line = ("".join(self._shown) + piece).strip()
            self._shown.clear()
            if line:
                self._last_line = line
        if rest:
            self._shown.append(rest)
        return text
