"""Mnemo's composition root: settings, entry points, the chat agent, workers, importers, evaluation."""

__version__ = "0.1.0"
