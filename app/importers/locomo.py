"""LoCoMo benchmark JSON (a list of samples, or one sample) as conversations.

speaker_a is on the pages' user side and speaker_b on their assistant side; which of them, if either,
is the app's user is recorded apart (`ParsedConversation.people`, app.importers.people: other people
until the import is told otherwise), so the sides never change with that choice. Each turn's text is
prefixed with its speaker's name ("Caroline: ..."): a LoCoMo dialogue is between two named people and its
questions name them, so the name is part of what was said; the message meta keeps the
speaker and the dia_id too. An image turn gets " [shares a photo: <blip_caption>]" after
its text. `session_N_date_time` ("1:56 pm on 8 May, 2023", read as UTC) is the time of
the session's first turn; later turns follow `TURN_SPACING_S` seconds apart so their order
is kept. Sessions are the `session_N` keys (some samples have extra date keys without a
session); a page never spans two sessions.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from datetime import datetime
from typing import Any

from app.importers.base import ImportFatalError, ImportIssue, ParsedConversation, ParseResult, People, Turn

SOURCE = "locomo"
TURN_SPACING_S = 10.0
_SESSION_KEY = re.compile(r"session_(\d+)$")
_DATE_FORMATS = (
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
    "%I:%M %p on %B %d, %Y",
    "%H:%M on %d %B, %Y",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
)


def looks_like_locomo(data: Any) -> bool:
    samples = data if isinstance(data, list) else [data]
    return any(isinstance(s, dict) and isinstance(s.get("conversation"), dict) for s in samples[:20])


def parse_locomo_datetime(text: object) -> float | None:
    """ "1:56 pm on 8 May, 2023" → Unix seconds (the naive time read as UTC); None if unreadable."""
    if not isinstance(text, str):
        return None
    cleaned = " ".join(text.strip().split())
    for fmt in _DATE_FORMATS:
        try:
            dt = datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
        return float(calendar.timegm(dt.timetuple()))
    return None


def turn_text(turn: dict, with_name: bool = True) -> str:
    """The text a LoCoMo turn is imported as (baselines index exactly this text too)."""
    text = turn.get("text")
    text = text.strip() if isinstance(text, str) else ""
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares a photo: {caption.strip()}]".strip()
    speaker = turn.get("speaker")
    if with_name and isinstance(speaker, str) and speaker and text:
        text = f"{speaker}: {text}"
    return text


def session_keys(conversation: dict) -> list[tuple[int, str]]:
    keys = []
    for key in conversation:
        m = _SESSION_KEY.match(key)
        if m:
            keys.append((int(m.group(1)), key))
    return sorted(keys)


def parse_locomo(data: Any, name: str = "locomo.json", *, speaker_names: bool = True) -> ParseResult:
    samples = [data] if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise ImportFatalError(
            f"{name}: not LoCoMo data: expected a JSON list of samples, found a JSON {type(data).__name__}"
        )
    if samples and not looks_like_locomo(samples):
        raise ImportFatalError(f"{name}: not LoCoMo data: no sample has a 'conversation' object")
    result = ParseResult(format=SOURCE, conversations=[], records_seen=len(samples))
    for index, sample in enumerate(samples):
        conv = _parse_sample(sample, index, name, result.issues, speaker_names)
        if conv is not None:
            result.conversations.append(conv)
    return result


def _parse_sample(
    sample: Any, index: int, name: str, issues: list[ImportIssue], names: bool
) -> ParsedConversation | None:
    where = f"{name}: sample {index + 1}"
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        issues.append(ImportIssue(where, "has no 'conversation' object"))
        return None
    sid = sample.get("sample_id")
    if isinstance(sid, str) and sid:
        where = f"{where} ({sid})"
    conv = sample["conversation"]
    a, b = conv.get("speaker_a"), conv.get("speaker_b")
    if not (isinstance(a, str) and a and isinstance(b, str) and b) or a == b:
        issues.append(ImportIssue(where, "needs two different speakers 'speaker_a' and 'speaker_b'"))
        return None
    roles = {a: "user", b: "assistant"}

    sessions = session_keys(conv)
    starts = _session_starts(conv, sessions, where, issues)
    turns: list[Turn] = []
    seen_ids: set[str] = set()
    for (num, key), start in zip(sessions, starts):
        items = conv[key]
        swhere = f"{where}, {key}"
        if not isinstance(items, list):
            issues.append(ImportIssue(swhere, f"is a JSON {type(items).__name__}, not a list of turns"))
            continue
        for i, item in enumerate(items):
            turn = _session_turn(item, i, num, start, swhere, roles, names, seen_ids, issues)
            if turn is not None:
                turns.append(turn)
    if not turns:
        issues.append(ImportIssue(where, "has no dialogue turns"))
        return None
    if not (isinstance(sid, str) and sid):
        sid = "sha1:" + hashlib.sha1(f"{a}|{b}|{turns[0].text}".encode()).hexdigest()[:20]
        issues.append(
            ImportIssue(where, "has no sample_id; using a hash of its speakers and first turn", skipped=False)
        )
    title = f"{a} & {b} ({sid})"
    return ParsedConversation(SOURCE, sid, title, turns[0].timestamp, turns, position=where, people=People(a, b))


def _session_turn(
    item: Any,
    i: int,
    num: int,
    start: float,
    swhere: str,
    roles: dict[str, str],
    names: bool,
    seen_ids: set[str],
    issues: list[ImportIssue],
) -> Turn | None:
    """Turn `i` of session `num` (which began at `start`); None, with the issue noted, when it has no
    known speaker or no text, or repeats a dia_id of `seen_ids` (to which its own is added)."""
    twhere = f"{swhere}, turn {i + 1}"
    if not isinstance(item, dict):
        issues.append(ImportIssue(twhere, "is not an object"))
        return None
    dia = item.get("dia_id")
    if isinstance(dia, str) and dia:
        twhere = f"{swhere}, turn {dia}"
    speaker = item.get("speaker")
    if speaker not in roles:
        a, b = roles
        issues.append(ImportIssue(twhere, f"speaker {speaker!r} is neither {a!r} nor {b!r}"))
        return None
    text = turn_text(item, names)
    if not text:
        issues.append(ImportIssue(twhere, "has no text and no photo caption"))
        return None
    if not (isinstance(dia, str) and dia):
        dia = f"D{num}:{i + 1}"
        issues.append(ImportIssue(twhere, f"has no dia_id; using {dia}", skipped=False))
    if dia in seen_ids:
        issues.append(ImportIssue(twhere, f"repeats dia_id {dia}"))
        return None
    seen_ids.add(dia)
    meta: dict[str, Any] = {"dia_id": dia, "speaker": speaker, "session": num}
    if item.get("img_url"):
        meta["img_url"] = item["img_url"]
    return Turn(roles[speaker], text, start + i * TURN_SPACING_S, dia, session=num, meta=meta)


def _session_starts(conv: dict, sessions: list[tuple[int, str]], where: str, issues: list[ImportIssue]) -> list[float]:
    parsed: list[float | None] = []
    for _num, key in sessions:
        raw = conv.get(f"{key}_date_time")
        ts = parse_locomo_datetime(raw)
        if ts is None:
            issues.append(
                ImportIssue(
                    f"{where}, {key}_date_time",
                    f"missing or unreadable date {raw!r}; estimated from its neighbours",
                    skipped=False,
                )
            )
        parsed.append(ts)
    out: list[float] = []
    for i, ts in enumerate(parsed):
        if ts is None:
            prev = out[i - 1] if i else None
            nxt = next((t for t in parsed[i + 1 :] if t is not None), None)
            if prev is not None:
                ts = prev + 3600.0
            elif nxt is not None:
                ts = nxt - 86400.0
            else:
                ts = 0.0
        out.append(ts)
    return out
