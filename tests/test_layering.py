"""The architecture, enforced: imports point one way (ui -> app -> memory_core, models), nothing imports
in a circle, and the Qt layer takes from the memory core only what the package itself exports.

Static checks read every import in the source, including the ones inside functions (a late import
is still a dependency; hiding a circle in a function only makes it harder to see). Runtime checks
import each layer in a fresh interpreter and look at what got loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("app", "memory_core", "models", "ui")
QT = {"PySide6", "PyQt5", "PyQt6", "shiboken6"}

# what each layer must never import (top-level names)
FORBIDDEN = {
    "memory_core": QT | {"models", "app", "ui", "llama_cpp", "onnxruntime", "tokenizers"},
    "models": QT | {"memory_core", "app", "ui"},
    "app": QT | {"ui"},
}
# ui may use the memory core only through the names the package exports (memory_core/__init__.py):
# records, errors and a few helpers, never the store's internals
UI_MAY_IMPORT_FROM_MEMORY_CORE = {"memory_core"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import statement of `module`, relative ones resolved.
    `from pkg import name` names the submodule pkg.name when there is one, else pkg itself."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in known else target), node.lineno
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield str(node.args[0].value), node.lineno


def _graph() -> dict[str, set[str]]:
    known = _sources()
    return {
        mod: {imp for imp, _ in _imports(mod, path, known) if imp in known and imp != mod}
        for mod, path in known.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_static_imports_follow_layers(package):
    known = _sources()
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {imp}"
        for mod, path in known.items()
        if mod.split(".")[0] == package
        for imp, line in _imports(mod, path, known)
        if imp.split(".")[0] in FORBIDDEN[package]
    ]
    assert not bad, "\n".join(bad)


def test_ui_takes_only_what_memory_core_exports():
    known = _sources()
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {imp}"
        for mod, path in known.items()
        if mod.split(".")[0] == "ui"
        for imp, line in _imports(mod, path, known)
        if imp.split(".")[0] == "memory_core" and imp not in UI_MAY_IMPORT_FROM_MEMORY_CORE
    ]
    assert not bad, "\n".join(bad)


def test_no_import_circles():
    cycles = _cycles(_graph())
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_circle_check_finds_a_circle():
    """The checker itself: a planted circle is found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("package", ["memory_core", "models", "app.cli", "app.context"])
def test_runtime_imports_follow_layers(package):
    top = package.split(".")[0]
    extra = (
        ", memory_core.store, memory_core.persona.extract, memory_core.recall.retriever" if top == "memory_core" else ""
    )
    code = (
        f"import sys, {package}{extra}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN[top])!r})\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


# The rooms inside memory_core and app (a folder, or a module beside the folders) and the rooms each may import
# from its own package: docs/architecture.md's table of rooms. A new edge is a decision, made here and there.
MC_BASE = {"memory_core.types", "memory_core.text", "memory_core.storage"}
# app's helpers beside its folders: the version, private files, one-line messages and errors, words and figures,
# the settings' dataclasses
APP_BASE = {"app", "app.private_files", "app.messages", "app.errors", "app.wording", "app.settings"}
ROOMS = {
    "memory_core.storage": {"memory_core.types", "memory_core.text"},
    "memory_core.pages": MC_BASE,
    "memory_core.persona": MC_BASE | {"memory_core.pages"},
    "memory_core.segments": MC_BASE | {"memory_core.pages", "memory_core.persona"},
    "memory_core.intake": MC_BASE | {"memory_core.pages", "memory_core.segments"},
    "memory_core.upkeep": MC_BASE | {"memory_core.pages", "memory_core.persona", "memory_core.segments"},
    "memory_core.conversations": MC_BASE | {"memory_core.segments", "memory_core.traces"},
    "memory_core.traces": MC_BASE,
    "memory_core.recall": MC_BASE
    | {"memory_core.pages", "memory_core.persona", "memory_core.segments", "memory_core.upkeep"},
    "memory_core.spaces": MC_BASE
    | {"memory_core.conversations", "memory_core.pages", "memory_core.persona", "memory_core.segments"},
    "memory_core.curation": MC_BASE | {"memory_core.pages", "memory_core.persona", "memory_core.segments"},
    # the components it reads, named for their types
    "memory_core.readable_export": MC_BASE
    | {"memory_core.conversations", "memory_core.pages", "memory_core.persona", "memory_core.segments"},
    "memory_core.cubes": MC_BASE
    | {
        "memory_core.conversations",
        "memory_core.pages",
        "memory_core.persona",
        "memory_core.segments",
        "memory_core.readable_export",
    },
    "app.runtime": APP_BASE,
    "app.parametric": APP_BASE | {"app.runtime"},
    # the rooms an AppContext is handed to name its type (app.context, the composition root)
    "app.importers": APP_BASE | {"app.runtime", "app.context"},
    # the turn uses the memory verbs a message can ask for (remember, forget): app.operations.remember
    "app.chat": APP_BASE | {"app.operations", "app.parametric", "app.runtime"},
    "app.operations": APP_BASE | {"app.chat", "app.importers", "app.runtime", "app.context"},
    "app.doors": APP_BASE | {"app.chat", "app.operations", "app.runtime", "app.context"},
    "app.evaluation": APP_BASE | {"app.chat", "app.importers"},
}


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("memory_core", "app") and len(parts) > 1 else parts[0]


def test_rooms_import_only_the_rooms_they_may():
    known = _sources()
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {imp} (room {_room(imp)})"
        for mod, path in known.items()
        if _room(mod) in ROOMS
        for imp, line in _imports(mod, path, known)
        if imp in known
        and imp.split(".")[0] == mod.split(".")[0]
        and _room(imp) not in ROOMS[_room(mod)] | {_room(mod), mod.split(".")[0]}
    ]
    assert not bad, "\n".join(bad)


def test_memory_cores_rooms_form_no_circle():
    graph = {room: {r for r in may if r in ROOMS} for room, may in ROOMS.items() if room.startswith("memory_core.")}
    assert _cycles(graph) == []
    folders = {p.name for p in (ROOT / "memory_core").iterdir() if (p / "__init__.py").exists()}
    assert {f"memory_core.{f}" for f in folders} <= set(ROOMS), "a memory_core folder without a row in ROOMS"
