"""`mnemo ingest FILE`: import a ChatGPT or Claude export, LoCoMo JSON or a text/Markdown transcript.

The file is read and validated completely before the store is opened: a fatal problem
(truncated JSON, wrong schema, binary file, invalid UTF-8) prints one error and exits with
code 2 having written nothing. Malformed records are skipped with a warning naming their
position. Each conversation is written in its own transaction; re-running skips what is
already imported and finishes what is not (see app.importers.writer).

A dialogue between two named people (LoCoMo JSON) needs to know which speaker, if either, is the
user: `--as-user NAME` (one of its speakers) or `--others` (neither). Told nothing, it is imported as
other people's conversation, with a one-line note saying so: what strangers said must never become
"the user's", and a script that imports such files keeps working. A name that is no speaker's is a
one-line error, and nothing is imported. A dialogue imported before keeps the answer it got then.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from app.commands._common import SubParsers
    from app.context import AppContext
    from app.importers.base import ImportIssue, ParsedConversation
    from app.importers.writer import ImportReport

MAX_WARNINGS_SHOWN = 40


def register(subparsers: SubParsers) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="import conversations (ChatGPT or Claude conversations.json/.zip, LoCoMo JSON, text/Markdown transcripts)",
        description="Import past conversations into memory through the LLM-free bulk path. "
        "Resumable: re-running skips conversations already imported.",
    )
    p.add_argument(
        "file",
        help="conversations.json (or the export .zip) of ChatGPT or Claude, a LoCoMo .json, or a .txt/.md transcript",
    )
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", "chatgpt", "claude", "locomo", "text"],
        help="input format (default: detect)",
    )
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--as-user",
        metavar="NAME",
        default=None,
        help="in a dialogue between two named people (LoCoMo), the speaker who is you",
    )
    who.add_argument(
        "--others",
        action="store_true",
        help="a dialogue between two named people, neither of them you (the default for such a file, with a note)",
    )
    p.add_argument("--limit", type=int, default=None, metavar="N", help="import at most N conversations")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, ctx: AppContext) -> int:
    from app.importers import ImportFatalError, load, write_all
    from app.importers.progress import ProgressBar

    try:
        parsed = load(args.file, args.format)
    except ImportFatalError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        print(f"mnemo ingest: error: {exc}", file=sys.stderr)
        return exc.exit_code
    convs = parsed.conversations
    if args.limit is not None:
        convs = convs[: max(0, args.limit)]
    try:
        notes = _whose(args, convs)
    except ImportFatalError as exc:
        if args.json:
            print(json.dumps({"error": str(exc)}))
        print(f"mnemo ingest: error: {exc}", file=sys.stderr)
        return exc.exit_code
    _print_issues(parsed.issues)
    total_turns = sum(c.n_turns for c in convs)
    store = ctx.open_store()
    if store.is_paused():
        store.close()
        print(
            "mnemo ingest: error: memory is paused, so imported conversations would get no memory pages "
            "(and resuming would not add them later). Resume memory first, then import.",
            file=sys.stderr,
        )
        return 1
    progress = ProgressBar(total_turns, label="ingest", unit="turns", enabled=not args.no_progress)
    try:
        report = write_all(store, parsed, path=str(args.file), progress=progress, conversations=convs)
    except ImportFatalError as exc:  # the same file being imported already: nothing was written
        progress.close()
        print(f"mnemo ingest: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # the failing conversation's transaction was rolled back
        from app.importers.job import DISK_FULL
        from memory_core import is_storage_full

        progress.close()
        if is_storage_full(exc):
            print(f"mnemo ingest: error: {DISK_FULL}", file=sys.stderr)
        else:
            print(
                f"mnemo ingest: error while writing: {exc}. Conversations written before it are kept; "
                f"re-run the command to finish.",
                file=sys.stderr,
            )
        return 1
    finally:
        store.close()
    progress.close()
    _print_issues(report.issues[len(parsed.issues) :])
    for line in notes + _kept_notes(report):
        print(f"note: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(
            f"{args.file}: {parsed.format}; {report.count('imported')} conversation(s) imported, "
            f"{report.count('resumed')} resumed, {report.count('already imported')} already imported; "
            f"{report.turns_written} turns → {report.pages_written} pages in {report.seconds:.1f} s; "
            f"{report.skipped_records} malformed record(s) skipped, {len(report.issues)} warning(s)."
            f"{report.profile_note()}"
        )
    if not report.outcomes and report.skipped_records:
        return 1
    return 0


def _whose(args: argparse.Namespace, convs: Sequence[ParsedConversation]) -> list[str]:
    """Record who the user is in the file's dialogues between named people (app.importers.people);
    the notes to print after the import. Raises ImportFatalError for a name that is nobody's or a flag
    given for a file without such a dialogue."""
    from app.importers.people import assign, dialogues, pair

    told = args.as_user is not None or args.others
    if not told and not dialogues(convs):
        return []
    what = Path(args.file).name
    done = assign(convs, args.as_user if told else None, what=what)
    if not told:
        shown = "; ".join(pair(c) for c in done.others[:3]) + (" …" if len(done.others) > 3 else "")
        return [
            f"{what}: {len(done.others)} dialogue(s) between named people ({shown}) imported as other people's "
            "conversations; if you are one of the speakers, say so with --as-user NAME when you first import it"
        ]
    if args.as_user is not None and done.others:
        return [f"{what}: {len(done.others)} dialogue(s) without {args.as_user} imported as other people's"]
    return []


def _kept_notes(report: ImportReport) -> list[str]:
    """A note for each dialogue imported before with another answer to "who are you" (that one is kept)."""
    out = []
    for o in report.outcomes:
        if o.people_kept is not None:
            me = o.people_kept["me"]
            was = f"as {me}'s" if me else "as other people's"
            out.append(
                f"{o.position} was imported before {was} conversation; that is kept "
                f"(to change it: mnemo chats delete {o.conversation_id} --forget, then import again)"
            )
    return out


def _print_issues(issues: Sequence[ImportIssue]) -> None:
    for issue in issues[:MAX_WARNINGS_SHOWN]:
        print(f"warning: {issue}", file=sys.stderr)
    if len(issues) > MAX_WARNINGS_SHOWN:
        print(f"warning: … and {len(issues) - MAX_WARNINGS_SHOWN} more (see --json)", file=sys.stderr)
