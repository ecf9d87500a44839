"""User-facing advice shared by the CLI and the window, so both say the same thing."""

DAMAGED_DB_ADVICE = ("Move the file away to start with an empty memory (Mnemo creates a new one), "
                     "or put back a backup or an export")
