"""Memory spaces: named parts of one memory, and fusing two of them."""
