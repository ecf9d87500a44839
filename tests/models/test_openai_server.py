"""`OpenAIChatModel` against llama-cpp-python's own OpenAI-compatible server on 127.0.0.1."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import jsonschema
import pytest

from models.chat import CancelToken
from models.errors import ModelError
from models.openai_http import OpenAIChatModel
from models.resolve import default_gguf_path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory):
    pytest.importorskip("llama_cpp.server", reason="needs llama-cpp-python[server]")
    port = _free_port()
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--model_alias", "smollm2"],
        stdout=log, stderr=subprocess.STDOUT,
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


def test_streams_from_server(server_url):
    model = OpenAIChatModel(base_url=server_url, model="smollm2", max_tokens=16)
    assert "smollm2" in model.list_models()
    chunks = list(model.stream([{"role": "user", "content": "Tell me about the sea."}]))
    assert len(chunks) >= 5
    assert model.last_stats.completion_tokens >= 5


def test_server_token_count(server_url):
    model = OpenAIChatModel(base_url=server_url, model="smollm2")
    assert model.count_tokens("hello " * 50) >= 50


def test_server_cancel(server_url):
    model = OpenAIChatModel(base_url=server_url, model="smollm2", max_tokens=500)
    cancel = CancelToken()
    got = []
    for chunk in model.stream([{"role": "user", "content": "Write a long story."}], cancel=cancel):
        got.append(chunk)
        if len(got) == 3:
            cancel.cancel()
    assert len(got) == 3
    assert model.last_stats.stopped


def test_server_json_schema(server_url):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"]}
    model = OpenAIChatModel(base_url=server_url, model="smollm2")
    value = model.complete_json([{"role": "user", "content": "Name a big city as JSON."}], schema, max_tokens=64)
    jsonschema.validate(value, schema)


def test_unreachable_server_clear_error():
    port = _free_port()
    model = OpenAIChatModel(base_url=f"http://127.0.0.1:{port}/v1", connect_timeout_s=2)
    with pytest.raises(ModelError, match="cannot reach the server") as info:
        list(model.stream([{"role": "user", "content": "hi"}]))
    assert f"127.0.0.1:{port}" in str(info.value)
