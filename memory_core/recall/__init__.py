"""Recall: the retriever, the ranking stages, the parsed query, word-by-word matching, and which spaces a chat reads."""
