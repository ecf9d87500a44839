"""Mid-term memory: segments (pages on one topic), dialogue chains, heat, eviction, and topic titles."""
