"""Rooms stay small enough to read: no class over 600 lines and no function over 80 in any package (the schema's
numbered migrations excepted: each is one transaction of DDL, read top to bottom). A class or function that grows
past these is split into named parts, not waved through here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "memory_core", "models", "ui")
MAX_CLASS, MAX_FUNCTION = 600, 80
MIGRATION = re.compile(r"_m\d+$")


def _definitions():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    yield path.relative_to(ROOT), node, node.end_lineno - node.lineno + 1


def test_no_class_over_600_lines():
    big = [
        f"{p}:{n.lineno} {n.name} ({lines})"
        for p, n, lines in _definitions()
        if isinstance(n, ast.ClassDef) and lines > MAX_CLASS
    ]
    assert not big, "\n".join(big)


def test_no_function_over_80_lines():
    big = [
        f"{p}:{n.lineno} {n.name} ({lines})"
        for p, n, lines in _definitions()
        if not isinstance(n, ast.ClassDef)
        and lines > MAX_FUNCTION
        and not (p.name == "schema.py" and MIGRATION.match(n.name))
    ]
    assert not big, "\n".join(big)
