"""The CLI's documentation keeps up with the CLI: every `mnemo` command is in the README's command table and in
the user guide, and every `mnemo memory` subcommand is in the user guide's table of them (docs/user-guide.md,
"Memory from the command line"). A command added without a line of docs fails here."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from app.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| `mnemo ")]


def _section(markdown: str, title: str) -> str:
    start = markdown.index(title)
    end = markdown.find("\n## ", start + len(title))
    return markdown[start : end if end != -1 else len(markdown)]


def test_every_command_is_in_the_readme_table_and_the_user_guide():
    readme = _table_rows((ROOT / "README.md").read_text("utf-8"))
    guide = (ROOT / "docs" / "user-guide.md").read_text("utf-8")
    commands = _subcommands(build_parser())
    assert len(commands) >= 10  # the parser was read
    missing_readme = [c for c in commands if not any(row.startswith(f"| `mnemo {c}") for row in readme)]
    missing_guide = [c for c in commands if not re.search(rf"`mnemo {re.escape(c)}\b", guide)]
    assert not missing_readme, f"not in the README's command table: {missing_readme}"
    assert not missing_guide, f"not in docs/user-guide.md: {missing_guide}"


def test_every_memory_subcommand_is_in_the_user_guides_table():
    memory = _subcommands(build_parser())["memory"]
    table = "\n".join(
        _table_rows(_section((ROOT / "docs" / "user-guide.md").read_text("utf-8"), "## Memory from the command line"))
    )
    subcommands = _subcommands(memory)
    assert len(subcommands) >= 10
    # a row names a subcommand as `mnemo memory NAME` or, after a slash, `/ NAME` (`pin`, `imports`...)
    missing = [
        s for s in subcommands if not re.search(rf"(`mnemo memory {re.escape(s)}\b|/ `?{re.escape(s)}\b)", table)
    ]
    assert not missing, f"not in the user guide's table of `mnemo memory` subcommands: {missing}"
