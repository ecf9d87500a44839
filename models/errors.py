"""Errors raised by model loading and inference, with messages meant for users."""

from __future__ import annotations

from pathlib import Path


class ModelError(RuntimeError):
    """A model could not be used (bad server answer, load failure, ...)."""


class ModelFileError(ModelError):
    """A model file is missing, of the wrong kind, or fails to load.

    The message always names the file and says what is wrong with it.
    """

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
