"""`mnemo`: with no command, the desktop app; with a command, the CLI that mirrors the library."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.commands import COMMAND_MODULES
from app.commands._common import set_command

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.context import AppContext


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mnemo", description="Mnemo: a local-first assistant that remembers.")
    parser.add_argument("--version", action="version", version=f"mnemo {__version__}")
    parser.add_argument(
        "--data-dir", help="folder for the memory database (default: the user data dir; env MNEMO_DATA_DIR)"
    )
    parser.add_argument(
        "--config-dir", help="folder for settings.json (default: the user config dir; env MNEMO_CONFIG_DIR)"
    )
    parser.add_argument(
        "--self-test", action="store_true", help="open the window, embed, generate 5 tokens, exit 0 if all worked"
    )
    parser.add_argument(
        "--timings", action="store_true", help="with --self-test: print time to first paint and load times"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # command not built yet
                continue
            raise
        module.register(sub)
    return parser


def main(
    argv: list[str] | None = None, gui: Callable[[AppContext, argparse.Namespace], int | None] | None = None
) -> int:
    """Run a CLI command; with none, call `gui(ctx, args)` (the `ui` package passes it in,
    so `app` never imports `ui`), or print help when there is no GUI."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from app.context import AppContext

    ctx = AppContext.create(args.config_dir, args.data_dir)
    for note in ctx.settings_notes:
        print(f"mnemo: warning: {note}", file=sys.stderr)
    if args.command:
        command = _command_name(args)
        set_command(command)
        try:
            return int(args.func(args, ctx) or 0)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130
        except Exception as exc:
            known = known_failure(exc, ctx)
            if known is None:
                raise
            print(f"mnemo {command}: error: {' '.join(known.split())}", file=sys.stderr)
            return 1
    if gui is None:
        parser.print_help()
        return 2
    return int(gui(ctx, args) or 0)


def _command_name(args: argparse.Namespace) -> str:
    """The command as typed, with its action ("chats list", "memory add")."""
    action = getattr(args, "action", None)
    return f"{args.command} {action}" if isinstance(action, str) and action else args.command


def known_failure(exc: BaseException, ctx: AppContext) -> str | None:
    """What to tell the user about `exc` when it is a failure they can fix (a model file, the database
    folder, a full disk, a damaged file), naming the file and the fix; None for anything else (a bug:
    its traceback is wanted)."""
    import apsw

    from app.errors import DatabaseOpenError, cannot_open_database, database_busy, database_open_error
    from app.messages import DAMAGED_DB_ADVICE
    from memory_core import DamagedDatabaseError, is_storage_full
    from models.errors import ModelError

    if is_storage_full(exc):
        return f"the disk is full ({exc}). Free some disk space and run it again; what was saved before is kept."
    if isinstance(exc, DamagedDatabaseError):
        return f"{exc}. {DAMAGED_DB_ADVICE}"
    if isinstance(exc, (ModelError, DatabaseOpenError)):
        return str(exc)
    if isinstance(exc, apsw.BusyError):
        return database_busy(ctx.paths.db_file)
    if cannot_open_database(exc):
        if isinstance(exc, OSError) and exc.filename and Path(exc.filename).name != ctx.paths.db_file.name:
            return f"cannot write {exc.filename}: {exc.strerror or exc}. Check that it and its folder are yours and writable."
        return str(database_open_error(ctx.paths.db_file, exc))
    return None


if __name__ == "__main__":
    sys.exit(main())
