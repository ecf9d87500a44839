"""Long-term memory: the persona's traits and facts, how a new one joins, their versions, and extraction."""
