"""Plain-text and Markdown transcripts: `User:` / `Assistant:` speaker lines.

A message starts at a speaker line (`User:`, `Assistant:`, also `Human:`/`AI:`, in any
case, optionally bold `**User:**`, a heading `## Assistant`, a list bullet or a quote
`>`), and continues over the following lines until the next speaker line; blank lines
inside are kept, trailing ones dropped. Speaker lines inside ``` code fences are text. A
speaker line may start with a bracketed time, `[2024-03-01 14:05] User: ...`; otherwise
turns are timed one second apart from the file's modification time. `System:` messages
are skipped. A reply marked as cut short, `Assistant (interrupted):` (also `stopped`, `failed`), keeps
that status. A `# Title` line before the first speaker line names the conversation (else
the file name). The whole file is one conversation, identified by a hash of its text, so
re-importing an unchanged file is a no-op.

When the file's first speaker line is timed and bold (`[2024-04-02T08:15:31Z] **User:** …`, what
Mnemo's chat export writes), only lines of that form start a message: a line such as "User: …"
quoted inside a message stays part of it, so an exported chat reads back exactly.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone

from app.importers.base import ImportFatalError, ImportIssue, ParsedConversation, ParseResult, Turn

SOURCE = "text"
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "system": "system"}
_WHO = "|".join(_ROLES)
# how a reply cut short is marked after its speaker, "**Assistant (interrupted):**" (app.operations.chat_export)
CUT_SHORT = ("interrupted", "stopped", "failed")
_SPEAKER = re.compile(
    r"^\s*(?:>\s*)?(?:[-*+]\s+)?"
    r"(?:\[(?P<ts>[^\]]{6,40})\]\s*)?"
    r"(?P<bold>\*\*|__)?\s*(?P<who>" + _WHO + r")\s*(?:\((?P<status>" + "|".join(CUT_SHORT) + r")\)\s*)?"
    r"(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*:|:)\s?(?P<rest>.*)$",
    re.IGNORECASE,
)
_HEADING_SPEAKER = re.compile(r"^\s*#{1,6}\s*(?P<who>" + _WHO + r")\s*:?\s*$", re.IGNORECASE)
_TITLE = re.compile(r"^\s*#\s+(?P<title>\S.*?)\s*$")


def parse_time(text: str) -> float | None:
    text = text.strip().replace("T", " ").rstrip("Z")
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return None


def looks_like_transcript(text: str) -> bool:
    return any(_SPEAKER.match(line) or _HEADING_SPEAKER.match(line) for line in text.splitlines()[:2000])


def _timed_bold(m: re.Match | None) -> bool:
    return bool(m and m.group("ts") and m.group("bold"))


def _speaker_lines_are_timed_bold(lines: list[str]) -> bool:
    """Whether the first speaker line outside a code fence is `[time] **Who:**` (Mnemo's export)."""
    in_fence = False
    for line in lines:
        if not in_fence:
            m = _SPEAKER.match(line)
            if m or _HEADING_SPEAKER.match(line):
                return _timed_bold(m)
        if line.strip().startswith("```"):
            in_fence = not in_fence
    return False


def parse_text(
    text: str, name: str = "transcript.txt", *, base_time: float = 0.0, title: str | None = None
) -> ParseResult:
    issues: list[ImportIssue] = []
    messages, found_title, preamble = _messages(text.splitlines(), name, issues)
    if not messages:
        raise ImportFatalError(f"{name}: not a transcript: no 'User:' or 'Assistant:' speaker lines found")
    if preamble:
        issues.append(
            ImportIssue(
                f"{name}: lines 1-{messages[0]['line'] - 1}",
                f"{preamble} line(s) of text before the first speaker line",
            )
        )
    turns = _turns(messages, name, base_time, issues)
    result = ParseResult(format=SOURCE, conversations=[], issues=issues, records_seen=1)
    if not turns:
        issues.append(ImportIssue(name, "no non-empty User or Assistant messages"))
        return result
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
    conv_title = title or found_title or name
    result.conversations.append(
        ParsedConversation(SOURCE, f"sha256:{digest}", conv_title, turns[0].timestamp, turns, position=name)
    )
    return result


def _messages(lines: list[str], name: str, issues: list[ImportIssue]) -> tuple[list[dict], str | None, int]:
    """The messages of a transcript ({role, line, ts, status, lines}), the `# Title` before the first, and
    how many other lines of text came before it."""
    strict = _speaker_lines_are_timed_bold(lines)
    messages: list[dict] = []
    preamble = 0
    found_title: str | None = None
    in_fence = False
    current: dict | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not in_fence:
            m = _SPEAKER.match(line)
            h = None if m else _HEADING_SPEAKER.match(line)
            if strict and not _timed_bold(m):
                m = h = None
            speaker = m or h
            if speaker is not None:
                current = _message(m, speaker, number, name, issues)
                messages.append(current)
                if m and m.group("rest").lstrip().startswith("```"):
                    in_fence = not in_fence
                continue
        if stripped.startswith("```"):
            in_fence = not in_fence
        if current is None:
            t = _TITLE.match(line)
            if t and found_title is None:
                found_title = t.group("title")
            elif stripped:
                preamble += 1
            continue
        current["lines"].append(line)
    return messages, found_title, preamble


def _message(m: re.Match | None, speaker: re.Match, number: int, name: str, issues: list[ImportIssue]) -> dict:
    """A message opened by speaker line `number` (`m`: its `_SPEAKER` match, None for a heading); an
    unreadable time is reported, and the message is timed as one without a time."""
    who = speaker.group("who").lower()
    ts = None
    if m and m.group("ts"):
        ts = parse_time(m.group("ts"))
        if ts is None:
            issues.append(
                ImportIssue(
                    f"{name}: line {number}",
                    f"unreadable time [{m.group('ts')}]; using the previous one",
                    skipped=False,
                )
            )
    status = (m.group("status") or "complete").lower() if m and _ROLES[who] == "assistant" else "complete"
    return {
        "role": _ROLES[who],
        "line": number,
        "ts": ts,
        "status": status,
        "lines": [m.group("rest")] if m else [],
    }


def _turns(messages: list[dict], name: str, base_time: float, issues: list[ImportIssue]) -> list[Turn]:
    """The turns of the messages: system messages and empty ones left out (an empty one reported); a turn
    without its own time comes a second after the one before."""
    turns: list[Turn] = []
    last_ts = base_time
    for msg in messages:
        body = "\n".join(msg["lines"]).strip("\n").rstrip()
        where = f"{name}: line {msg['line']}"
        if msg["role"] == "system":
            continue
        if not body.strip():
            issues.append(ImportIssue(where, f"empty {msg['role']} message"))
            continue
        ts = msg["ts"] if msg["ts"] is not None else (last_ts + 1.0 if turns else last_ts)
        last_ts = ts
        turns.append(Turn(msg["role"], body, ts, f"L{msg['line']}", meta={"line": msg["line"]}, status=msg["status"]))
    return turns
