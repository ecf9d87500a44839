"""The file itself: the connection and its transactions, the schema and its migrations, codecs, full-text rows,
the event log, the job queue, forgetting for good (with replies' traces scrubbed of it), whole-file checks and
backups, the vector caches."""
