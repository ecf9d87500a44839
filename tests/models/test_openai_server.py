"""`OpenAIChatModel` against llama-cpp-python's own OpenAI-compatible server on 127.0.0.1."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def test_server_applies_llama_sampling(server_url):
    # greedy decoding, so only the repeat penalty can change the reply: it must reach the server's sampler
    prompt = [{"role": "user", "content": "Write the word 'echo' twenty times, separated by spaces."}]
    replies = []
    for penalty in (1.0, 1.8):
        model = OpenAIChatModel(base_url=server_url, model="smollm2", max_tokens=40, temperature=0.0,
                                repeat_penalty=penalty)
        replies.append("".join(model.stream(prompt)))
        assert model.send_llama_sampling
    assert replies[0] != replies[1]
    most_repeated = [max(Counter(re.findall(r"\w+", r.lower())).values()) for r in replies]
    assert most_repeated[0] > most_repeated[1]


class _StrictServer(BaseHTTPRequestHandler):
    """Answers like OpenAI's API: HTTP 400 for a request field it does not know, else a short stream."""
    payloads: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).payloads.append(payload)
        unknown = [k for k in payload if k not in ("model", "messages", "max_tokens", "temperature", "top_p",
                                                   "stream", "response_format")]
        if unknown:
            body = json.dumps({"error": {"message": f"Unrecognized request argument supplied: {unknown[0]}",
                                         "type": "invalid_request_error"}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in ("Hello", " there"):
            self.wfile.write(f"data: {json.dumps({'choices': [{'delta': {'content': word}}]})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


def test_a_server_that_rejects_llama_sampling_fields_is_asked_again_without_them():
    # what the test is about is our client's fallback; OpenAI's own API (the real strict server) is not
    # reachable from here, so a local server answers the way it does
    _StrictServer.payloads = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _StrictServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        model = OpenAIChatModel(base_url=f"http://127.0.0.1:{httpd.server_port}/v1", model="gpt")
        assert "".join(model.stream([{"role": "user", "content": "hi"}])) == "Hello there"
        assert not model.send_llama_sampling
        assert "".join(model.stream([{"role": "user", "content": "again"}])) == "Hello there"
    finally:
        httpd.shutdown()
    sent = _StrictServer.payloads
    assert [("min_p" in p, "repeat_penalty" in p) for p in sent] == [(True, True), (False, False), (False, False)]


def test_unreachable_server_clear_error():
    port = _free_port()
    model = OpenAIChatModel(base_url=f"http://127.0.0.1:{port}/v1", connect_timeout_s=2)
    with pytest.raises(ModelError, match="cannot reach the server") as info:
        list(model.stream([{"role": "user", "content": "hi"}]))
    assert f"127.0.0.1:{port}" in str(info.value)
