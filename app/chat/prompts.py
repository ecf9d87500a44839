"""Prompt templates, read from `resources/prompts/*.txt` (package data), cached."""

from __future__ import annotations

import functools
import importlib.resources


@functools.cache
def load(name: str) -> str:
    """The text of `resources/prompts/{name}.txt`, without the trailing newline."""
    return importlib.resources.files("resources").joinpath("prompts", f"{name}.txt").read_text("utf-8").rstrip("\n")
