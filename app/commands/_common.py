"""Helpers shared by CLI commands."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False, default=str)
    sys.stdout.write("\n")


def fail(message: str, code: int = 2) -> int:
    print(f"mnemo: {message}", file=sys.stderr)
    return code
