"""Helpers shared by CLI commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    # what `add_subparsers()` returns: where a command module's `register` adds its parser
    SubParsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


_command = ""  # the command being run (app.cli.main sets it), for the one-line errors


def set_command(name: str) -> None:
    global _command
    _command = name


def fail(message: str, code: int = 2) -> int:
    """Say what went wrong in one line, `mnemo COMMAND: error: …`; the exit code: 2 for bad input
    (the default), 1 for a failure."""
    print(f"mnemo {_command}: error: {message}" if _command else f"mnemo: {message}", file=sys.stderr)
    return code
