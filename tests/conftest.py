"""Fixtures shared by every test: the real embedder, the real bundled GGUF, temp data dirs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCOMO_DEV = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


@pytest.fixture(scope="session")
def embedder():
    """The real bundled ONNX embedder (all-MiniLM-L6-v2 int8), loaded once per test run."""
    from models.embedder import OnnxEmbedder

    return OnnxEmbedder()


@pytest.fixture(scope="session")
def chat_model():
    """The real bundled SmolLM2-135M GGUF through llama.cpp, loaded once per test run."""
    from models.llama_cpp_backend import LlamaCppChatModel

    model = LlamaCppChatModel(n_ctx=2048, max_tokens=64, seed=1234)
    yield model
    model.close()


@pytest.fixture
def mnemo_dirs(tmp_path, monkeypatch):
    """Point Mnemo's config and data folders at a temp dir (what tests and portable use do)."""
    data = tmp_path / "data"
    config = tmp_path / "config"
    monkeypatch.setenv("MNEMO_DATA_DIR", str(data))
    monkeypatch.setenv("MNEMO_CONFIG_DIR", str(config))
    return {"data": data, "config": config}


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO_DEV.is_file():
        pytest.skip(f"LoCoMo dev split not found at {LOCOMO_DEV} (it lives in ../shared, never in the repo)")
    return LOCOMO_DEV


class _FullDisk:
    """Switch for the `full_disk` fixture: while `full` is set, a SQLite file write that would
    grow its file fails as on a full disk (SQLITE_FULL); rewriting blocks a file already has still
    works, as it does on a real full disk (a reused WAL, say). Below SQLite, so the real engine
    handles it."""

    full = False


@pytest.fixture
def full_disk():
    """SQLite connections opened during the test write through a VFS that acts as a full disk
    while `full_disk.full` is True (a real full disk would need root to mount a small one)."""
    import apsw

    switch = _FullDisk()

    class File(apsw.VFSFile):
        def xWrite(self, data, offset):
            if switch.full and offset + len(data) > self.xFileSize():
                raise apsw.FullError("database or disk is full")
            return super().xWrite(data, offset)

        def xTruncate(self, newsize):
            if switch.full and newsize > self.xFileSize():
                raise apsw.FullError("database or disk is full")
            return super().xTruncate(newsize)

    class VFS(apsw.VFS):
        def __init__(self):
            super().__init__("mnemo-full-disk-test", "unix", makedefault=True)

        def xOpen(self, name, flags):
            return File("unix", name, flags)

    vfs = VFS()
    try:
        yield switch
    finally:
        switch.full = False
        vfs.unregister()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server_url(tmp_path_factory):
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving the bundled GGUF as "smollm2";
    started once per test run."""
    from models.resolve import default_gguf_path

    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    port = free_port()
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "models.llama_server",
            "--model",
            str(default_gguf_path()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--model_alias",
            "smollm2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=1) as resp:
                json.load(resp)
            break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError("llama_cpp.server did not start within 60 s")
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
