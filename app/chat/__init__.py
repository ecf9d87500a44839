"""One chat: the turn, the session, the prompt, what a streaming reply must not show, the saved prompt states, crash
recovery of a turn."""
