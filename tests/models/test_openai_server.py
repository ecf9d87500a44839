"""`OpenAIChatModel` against llama-cpp-python's own OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema
import pytest

from models.chat import CancelToken
from models.errors import ModelError
from models.openai_http import OpenAIChatModel
from tests.conftest import free_port as _free_port


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
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
    }
    model = OpenAIChatModel(base_url=server_url, model="smollm2")
    value = model.complete_json([{"role": "user", "content": "Name a big city as JSON."}], schema, max_tokens=64)
    jsonschema.validate(value, schema)


def test_server_applies_llama_sampling(server_url):
    # greedy decoding, so only the repeat penalty can change the reply: it must reach the server's sampler
    prompt = [{"role": "user", "content": "Write the word 'echo' twenty times, separated by spaces."}]
    replies = []
    for penalty in (1.0, 1.8):
        model = OpenAIChatModel(
            base_url=server_url, model="smollm2", max_tokens=40, temperature=0.0, repeat_penalty=penalty
        )
        replies.append("".join(model.stream(prompt)))
        assert model.send_llama_sampling
    assert replies[0] != replies[1]
    most_repeated = [max(Counter(re.findall(r"\w+", r.lower())).values()) for r in replies]
    assert most_repeated[0] > most_repeated[1]


class _StrictServer(BaseHTTPRequestHandler):
    """Answers like OpenAI's API: HTTP 400 for a request field it does not know, else a short stream."""

    payloads: list[dict] = []

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).payloads.append(payload)
        unknown = [
            k
            for k in payload
            if k not in ("model", "messages", "max_tokens", "temperature", "top_p", "stream", "response_format")
        ]
        if unknown:
            body = json.dumps(
                {
                    "error": {
                        "message": f"Unrecognized request argument supplied: {unknown[0]}",
                        "type": "invalid_request_error",
                    }
                }
            ).encode()
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
