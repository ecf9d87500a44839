"""Errors raised by model loading and inference, with messages meant for users."""

from __future__ import annotations

from pathlib import Path


class ModelError(RuntimeError):
    """A model could not be used (bad server answer, load failure, ...)."""


class ModelFileError(ModelError):
    """A model file is missing, of the wrong kind, or fails to load.

    The message always names the file and says what is wrong with it; the app adds what to do about
    it (`with_fix`), since only it knows whether the file came from the settings or was bundled.
    """

    def __init__(self, path: str | Path, problem: str, fix: str = ""):
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        super().__init__(self._text())

    def with_fix(self, fix: str) -> ModelFileError:
        """This error, its message ending with `fix` (one sentence: what the user can do)."""
        self.fix = fix
        self.args = (self._text(),)
        return self

    def _text(self) -> str:
        text = f"{self.path}: {self.problem.rstrip('. ')}"
        if not self.fix:
            return text
        return f"{text}. {self.fix}" + ("" if self.fix.endswith((".", "!", "?")) else ".")
