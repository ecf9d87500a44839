"""Mnemo's folders and files are the user's alone: 0700 folders, 0600 files.

A memory holds what someone told an assistant in confidence, so nobody else on the machine should
read it, whatever the umask says. Folders are created owner-only and, at every start, an existing
data or config folder (with the folders and files Mnemo keeps in it) left open by an older Mnemo is
tightened; with the folders closed, a file inside cannot be read by others even where its own mode
is loose. Files Mnemo writes are 0600 as well (the atomic writes' temp files are made so by
`tempfile.mkstemp`), so a file copied or moved out keeps its privacy.

POSIX only: on Windows a new folder under the user's profile inherits the profile's owner-only
permissions, and `chmod` there can do no more than set the read-only flag, so nothing is changed.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_POSIX = sys.platform != "win32"


def ensure_private_dir(path: str | os.PathLike) -> Path:
    """Create `path` (and missing parents) as an owner-only folder, or tighten it when it exists.
    Parents that already exist are left alone: they are the user's (their home, ~/.local/share)."""
    path = Path(path)
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if _POSIX:
        _tighten(path)
    return path


def make_private_file(path: str | os.PathLike) -> None:
    """Make an existing file readable and writable by its owner only."""
    if _POSIX:
        _tighten(Path(path))


def private_fd(fd: int) -> None:
    """The same for an open file (the lock file, tightened before it is locked); best effort."""
    if not _POSIX:
        return
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        if mode & 0o077:
            os.fchmod(fd, mode & ~0o077)
    except PermissionError:  # not ours: leave it
        return


def secure_folder(root: str | os.PathLike, *, folders: tuple[str, ...] = (), files: tuple[str, ...] = ()) -> None:
    """At start: create `root` owner-only, or tighten it, the named folders and the named files in it
    (an older Mnemo left them 0755/0644). Only what Mnemo keeps there is named, never a walk of the
    tree: a data folder given as --data-dir may hold the user's own things. Best effort and never
    fatal: what cannot be made or changed (a read-only disk, another owner) is left as it is, and
    opening the memory then reports what is really wrong with it."""
    root = Path(root).resolve()  # a data folder linked elsewhere: the folder it points to
    try:
        ensure_private_dir(root)
    except OSError:
        return
    if _POSIX:
        for name in (*folders, *files):
            _tighten(root / name)


def _tighten(path: Path) -> None:
    """Take away every permission of group and others (the owner's stay as they are: a read-only
    folder stays read-only); a link is never followed."""
    try:
        info = path.lstat()
    except OSError:  # not there (yet), or not reachable
        return
    if stat.S_ISLNK(info.st_mode):
        return
    if stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077)
        except PermissionError:  # not ours (a shared folder given as --data-dir): leave it
            return
