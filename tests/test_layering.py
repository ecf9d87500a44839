"""Imports point one way: ui -> app -> memory_core, models. A test fails when a layer imports against it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORBIDDEN = {
    "memory_core": {"PySide6", "shiboken6", "models", "app", "ui"},
    "models": {"PySide6", "shiboken6", "memory_core", "app", "ui"},
    "app": {"PySide6", "shiboken6", "ui"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_static_imports_follow_layers(package):
    bad = []
    for path in (ROOT / package).rglob("*.py"):
        hits = _imports(path) & FORBIDDEN[package]
        if hits:
            bad.append(f"{path.relative_to(ROOT)} imports {sorted(hits)}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["memory_core", "models", "app.cli", "app.context"])
def test_runtime_imports_follow_layers(package):
    top = package.split(".")[0]
    code = (
        f"import sys, {package}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN[top])!r})\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
