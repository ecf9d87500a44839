"""memory_core is Qt-free and model-free: it must never import PySide6, models, app or ui."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = {"PySide6", "PyQt5", "PyQt6", "shiboken6", "models", "app", "ui", "llama_cpp", "onnxruntime", "tokenizers"}
PKG = Path(__file__).resolve().parents[2] / "memory_core"


def test_no_forbidden_imports_in_source():
    bad = []
    files = sorted(PKG.rglob("*.py"))
    assert files, "memory_core has no sources?"
    for f in files:
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names = [str(node.args[0].value)]
            for n in names:
                if n.split(".")[0] in FORBIDDEN:
                    bad.append(f"{f.relative_to(PKG.parent)}:{node.lineno} imports {n}")
    assert not bad, "\n".join(bad)


def test_importing_memory_core_loads_no_forbidden_module():
    code = (
        "import sys, json, memory_core, memory_core.store, memory_core.extract, memory_core.retrieval; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=PKG.parent, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not (loaded & FORBIDDEN), f"memory_core pulled in {sorted(loaded & FORBIDDEN)}"
