"""What each memory parameter (memory_core.MemoryParams) does, for Settings ▸ Memory with Developer settings on:
a label in words and a tooltip that says what the knob changes and which way. The groups follow
`MemoryParams` (docs/architecture.md, "Parameters")."""

from __future__ import annotations

# group title -> {flat parameter name: (label, tooltip)}
PARAM_GROUPS: dict[str, dict[str, tuple[str, str]]] = {
    "Recent chat and topics": {
        "stm_capacity": (
            "Recent pages per chat (STM)",
            "How many exchanges of a chat stay in recent chat, read with every reply; older ones move into topics.",
        ),
        "mtm_capacity": (
            "Topics kept in use (MTM)",
            "How many topics stay in use; past this, the least used topic moves to the archive (still searchable).",
        ),
        "theta": (
            "Join a topic at (θ)",
            "How alike in meaning and words a page must be to a topic to join it; higher makes more, narrower topics.",
        ),
        "chain_theta": (
            "Link to the page before at",
            "How alike a page must be to the one before it to be linked as the same thread.",
        ),
        "chain_max_gap_s": ("Longest pause in a thread (s)", "Pages further apart in time are not linked as a thread."),
        "page_keywords": ("Keywords per page", "How many keywords a page keeps for matching topics."),
        "segment_keywords": ("Keywords shown per topic", "How many of its most frequent keywords a topic shows."),
        "summary_chars": ("Topic summary length", "Characters of the summary a topic keeps."),
    },
    "Heat: when a topic is read for your profile": {
        "alpha": ("Weight of uses (α)", "How much each reply that used a topic adds to its heat."),
        "beta": ("Weight of new messages (β)", "How much each new message in a topic adds to its heat."),
        "gamma": ("Weight of recent use (γ)", "How much having been used recently adds to a topic's heat."),
        "mu": ("Fading time (μ, s)", "Seconds over which the recent-use part of heat fades (1e7 s: about 4 months)."),
        "tau": (
            "Read for your profile at (τ)",
            "The heat at which a topic's new messages are read for facts and traits about you; lower learns sooner.",
        ),
    },
    "Your profile": {
        "duplicate_threshold": (
            "Same fact at",
            "How alike a new fact must be to one already kept to count as saying it again (it becomes surer).",
        ),
        "update_threshold": (
            "Newer version of a fact at",
            "How alike a new fact must be to an old one to replace it (the old text is kept as a version).",
        ),
        "trait_update_threshold": ("Newer version of a trait at", "The same, for traits."),
        "max_traits": ("Most traits kept", "Past this, the least certain trait is set aside."),
    },
    "Recall: how pages are ranked": {
        "segment_candidates": ("Topics listed", "How many topics of the recalled pages a reply's trace lists."),
        "dense_candidates": (
            "Pages compared by meaning",
            "At least this many of the closest pages in meaning are ranked (four per page recalled, if more).",
        ),
        "keyword_candidates": (
            "Pages compared by words",
            "At least this many of the best keyword matches are ranked (two per page recalled, if more).",
        ),
        "w_dense": ("Weight of meaning", "How much closeness in meaning counts in a page's score."),
        "w_keyword": ("Weight of keywords", "How much shared keywords count in a page's score."),
        "w_tokens": ("Weight of word-by-word match", "How much matching your words one by one counts."),
        "common_word_df": (
            "Common word at",
            "A word on at least this share of pages (a name in an imported dialogue) counts half in meaning.",
        ),
        "common_word_mix": ("Weight of a common word", "How much such a common word still counts."),
        "date_boost": ("Bonus for a named date", "Added to pages from a date your message names."),
        "neighbor_prev": ("Score passed to the next page", "Share of a page's score the page after it inherits."),
        "neighbor_next": ("Score passed to the page before", "Share of a page's score the page before it inherits."),
        "neighbor_context": ("Bonus from neighbours", "Share of the better neighbour's score a page adds."),
        "neighbor_max_gap_s": ("Neighbours within (s)", "Pages further apart in time are not each other's neighbours."),
        "asked_weight": (
            "Weight of a question you asked before",
            "A page where you only asked a short question counts this much (its reply is no evidence).",
        ),
        "other_side_drop": (
            "Other side's drop",
            "How much lower a page's other side (your message or the reply) ranks than its better side.",
        ),
        "other_side_spread": ("Other side's spread", "How much the two sides' difference in meaning lowers it more."),
        "rrf_k": ("Fact ranking constant", "Smooths how facts found by meaning and by words are combined."),
    },
    "What the prompt quotes": {
        "recall_min_score": ("Quote a page from score", "Pages scoring less are never quoted, however much room."),
        "recall_keyword_min_similarity": (
            "…and at least this close in meaning",
            "A page over the score must still be this close in meaning.",
        ),
        "recall_min_similarity": (
            "Quote for meaning alone from",
            "A page this close in meaning is quoted without shared words (if it stands out, below).",
        ),
        "recall_min_standout": (
            "…standing out by",
            "How far above the memory's usual closeness such a page must be.",
        ),
        "recall_own_after": (
            "Not quoting the last exchanges",
            "The chat's last exchanges are right above your message: they are not quoted again.",
        ),
        "recall_turns": ("Turns quoted at most", "How many recalled turns (messages or replies) a prompt quotes."),
    },
    "Background work": {
        "job_max_attempts": ("Tries per memory update", "A memory update that fails is tried this many times."),
        "events_keep": ("Log entries kept", "The newest entries of the memory log that are kept."),
        "import_batch": ("Import batch", "Pages written per step of an import."),
    },
}


def param_help(name: str) -> tuple[str, str]:
    """(label, tooltip) of a parameter; one this table lacks gets its name and a generic tip."""
    for params in PARAM_GROUPS.values():
        if name in params:
            return params[name]
    return name.replace("_", " "), f"Memory parameter {name} (docs/architecture.md, Parameters)"
