"""User-facing advice shared by the CLI and the window, so both say the same thing."""

DAMAGED_DB_ADVICE = (
    "Put back a backup (`mnemo memory backups` lists the daily copies, `mnemo memory restore "
    "FILE` restores one; the damaged file is kept aside), or move the file away to start with "
    "an empty memory"
)
