"""The file itself: the connection and its transactions, the schema and its migrations, the table registry,
codecs, full-text rows, the event log, the job queue, forgetting for good, whole-file checks and backups, the
vector caches."""
