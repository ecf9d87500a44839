"""Mid-term memory: segments (pages on one topic), dialogue chains, heat, eviction, promotion of a hot segment
into the persona, and topic titles."""
