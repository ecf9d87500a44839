"""Recall: the retriever, the ranking stages, the parsed query, word-by-word matching, which spaces a chat reads, and replies' traces."""
