"""Pages (short- and mid-term memory's units): their rows and indexes, how they enter memory, their embeddings, and
keeping their vectors current."""
