"""Failures the user can fix, stated in one sentence that names the file and says what to do.

SQLite says only "unable to open database file" (apsw.CantOpenError) whether the data folder is
read-only, on a read-only disk or cannot be made at all; `database_open_error` looks at the folder
and the file to say which, so `mnemo` prints one line instead of a traceback (app.cli) and the
window can show the same words.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from app.messages import OTHER_DATA_FOLDER, data_folder_fix


class DatabaseOpenError(RuntimeError):
    """The memory database cannot be opened or written: `path`, why (`cause`) and what to do (`fix`)."""

    def __init__(self, path: Path, cause: str, fix: str):
        self.path, self.cause, self.fix = Path(path), cause, fix
        super().__init__(f"cannot open the memory database {path}: {cause}. {fix}.")


def database_busy(db_file: Path) -> str:
    """SQLite's "database is locked" after its busy timeout: another process holds the write lock."""
    return (
        f"the memory database {db_file} is busy: another Mnemo process (the window, mnemo serve, an "
        "import) has been writing it for a while. Wait for it to finish, or close it, and run this again."
    )


def cannot_open_database(exc: BaseException) -> bool:
    """Whether `exc` says the database file could not be opened or written for a reason of the file
    system (not a full disk: is_storage_full says that, and what was saved is kept)."""
    import apsw

    if isinstance(exc, (apsw.CantOpenError, apsw.ReadOnlyError, apsw.PermissionsError)):
        return True
    return isinstance(exc, OSError) and exc.errno in (
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOTDIR,
        errno.EEXIST,
    )


def database_open_error(db_file: Path, exc: BaseException) -> DatabaseOpenError:
    """Why `db_file` could not be opened (`exc` is what SQLite or the file system raised)."""
    db_file = Path(db_file)
    folder = db_file.parent
    blocker = _file_in_the_way(folder)
    if blocker is not None:
        return DatabaseOpenError(
            db_file,
            f"the data folder cannot be made there, as {blocker} is a file",
            f"Move that file away, or {OTHER_DATA_FOLDER}",
        )
    if not folder.is_dir():
        return DatabaseOpenError(
            db_file,
            f"the data folder {folder} cannot be created ({_reason(exc)})",
            f"Create it yourself, or {OTHER_DATA_FOLDER}",
        )
    why = _cannot_write_in(folder)
    if why is not None:
        if why == errno.EROFS:
            fix = OTHER_DATA_FOLDER[0].upper() + OTHER_DATA_FOLDER[1:]
            return DatabaseOpenError(db_file, f"the data folder {folder} is on a read-only disk", fix)
        return DatabaseOpenError(
            db_file, f"the data folder {folder} does not let Mnemo create files in it", data_folder_fix(folder)
        )
    if db_file.exists() and not os.access(db_file, os.R_OK | os.W_OK):
        return DatabaseOpenError(
            db_file,
            "the file is read-only",
            f"Make it writable (e.g. chmod u+rw {db_file}), or {OTHER_DATA_FOLDER}",
        )
    return DatabaseOpenError(db_file, f"SQLite cannot open it ({_reason(exc)})", data_folder_fix(folder))


def _file_in_the_way(folder: Path) -> Path | None:
    """The nearest existing path at or above `folder` when it is a file, not a folder."""
    for p in (folder, *folder.parents):
        if p.exists():
            return None if p.is_dir() else p
    return None


def _cannot_write_in(folder: Path) -> int | None:
    """The errno with which creating a file in `folder` fails (None: it works). A real try, not
    os.access: an immutable folder, a read-only mount or an ACL only show when one writes."""
    try:
        fd, name = tempfile.mkstemp(prefix=".mnemo-write-test-", dir=folder)
    except OSError as exc:
        return exc.errno or errno.EACCES
    os.close(fd)
    os.unlink(name)
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
