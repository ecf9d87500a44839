"""Finding the GGUF chat models other local-LLM apps keep: real folder layouts in a temp home, the real
bundled GGUF behind them (linked, as the Hugging Face cache links its files), and llama.cpp loading what
was found."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from models.discover import find_models, format_size, model_folders, read_gguf_header
from models.resolve import default_gguf_path


def write_gguf(path: Path, meta: dict, pad: int = 0) -> Path:
    """A GGUF header with `meta` (strings and ints) and no tensors: what the discovery reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)))
    for key, value in meta.items():
        k = key.encode()
        out += struct.pack("<Q", len(k)) + k
        if isinstance(value, str):
            v = value.encode()
            out += struct.pack("<IQ", 8, len(v)) + v
        elif isinstance(value, list):  # an array of strings, skipped by the reader
            out += struct.pack("<IIQ", 9, 8, len(value))
            for item in value:
                b = item.encode()
                out += struct.pack("<Q", len(b)) + b
        else:
            out += struct.pack("<II", 4, value)
    path.write_bytes(bytes(out) + b"\0" * pad)
    return path


def link(target: Path, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return path


@pytest.fixture
def home(tmp_path) -> Path:
    """A home folder laid out as LM Studio, the Hugging Face cache, Ollama and a Downloads folder do."""
    real = default_gguf_path()
    h = tmp_path / "home"
    link(real, h / ".lmstudio/models/lmstudio-community/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1.gguf")
    blob = link(real, h / ".cache/huggingface/hub/models--bartowski--SmolLM2/blobs/7c1e0d")
    link(blob, h / ".cache/huggingface/hub/models--bartowski--SmolLM2/snapshots/abc123/SmolLM2-135M-Q4_1.gguf")
    link(real, h / ".ollama/models/blobs/sha256-9f4e")  # Ollama: a content-addressed blob, no .gguf
    manifest = h / ".ollama/models/manifests/registry.ollama.ai/library/smollm2/135m"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps(
            {
                "layers": [
                    {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:0000"},
                    {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:9f4e"},
                ]
            }
        )
    )
    dl = h / "Downloads"
    write_gguf(
        dl / "Qwen2.5-7B-Instruct-Q4_K_M-00001-of-00002.gguf",
        {"general.architecture": "qwen2", "general.tags": ["chat", "text"], "qwen2.context_length": 32768},
        pad=1000,
    )
    write_gguf(dl / "Qwen2.5-7B-Instruct-Q4_K_M-00002-of-00002.gguf", {"split.no": 1}, pad=3000)
    write_gguf(dl / "mmproj-model-f16.gguf", {"general.architecture": "clip", "general.type": "mmproj"})
    write_gguf(
        dl / "nomic-embed-text-v1.5.Q8_0.gguf", {"general.architecture": "nomic-bert", "nomic-bert.pooling_type": 1}
    )
    write_gguf(dl / "gte-small.gguf", {"general.architecture": "bert", "bert.pooling_type": 1})
    (dl / "notes.gguf").write_text("not a model")
    (dl / "deep/a/b/c/d/e/f/g").mkdir(parents=True)
    write_gguf(dl / "deep/a/b/c/d/e/f/g/too-deep.gguf", {"general.architecture": "llama"})
    return h


def test_finds_the_chat_models_other_apps_keep_and_only_those(home):
    found = find_models(home, env={})
    by_source = sorted((m.source, m.name) for m in found)
    # the LM Studio file, the Hugging Face snapshot link and the Ollama blob are one file: listed once,
    # under the first app that holds it
    assert by_source == [("Downloads", "Qwen2.5-7B-Instruct-Q4_K_M"), ("LM Studio", "SmolLM2-135M-Instruct-Q4_1")]
    smol = next(m for m in found if m.source == "LM Studio")
    assert smol.architecture == "llama" and smol.context_length == 8192
    assert smol.size_bytes == default_gguf_path().stat().st_size
    qwen = next(m for m in found if m.source == "Downloads")
    assert qwen.path.endswith("-00001-of-00002.gguf")  # llama.cpp loads a split by part 1
    assert qwen.context_length == 32768 and qwen.architecture == "qwen2"
    parts = sorted((home / "Downloads").glob("Qwen*.gguf"))
    assert qwen.size_bytes == sum(p.stat().st_size for p in parts)
    assert qwen.label() == f"Qwen2.5-7B-Instruct-Q4_K_M (Downloads, {format_size(qwen.size_bytes)})"


def test_each_app_is_found_on_its_own(home):
    import shutil

    shutil.rmtree(home / ".lmstudio")
    assert sorted(m.source for m in find_models(home, env={})) == ["Downloads", "Hugging Face"]
    shutil.rmtree(home / ".cache")
    found = find_models(home, env={})
    assert sorted((m.source, m.name) for m in found) == [
        ("Downloads", "Qwen2.5-7B-Instruct-Q4_K_M"),
        ("Ollama", "smollm2:135m"),
    ]
    assert Path(next(m.path for m in found if m.source == "Ollama")).name == "sha256-9f4e"


def test_folders_named_by_environment_variables_are_searched(tmp_path, home):
    elsewhere = tmp_path / "models-on-another-disk"
    write_gguf(elsewhere / "manifests/registry.ollama.ai/library/x/latest", {})  # not JSON: skipped
    write_gguf(elsewhere / "blobs/sha256-1", {"general.architecture": "gemma3"})
    m = elsewhere / "manifests/registry.ollama.ai/acme/tiny/q4"
    m.parent.mkdir(parents=True)
    m.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:1"}]}))
    cache = tmp_path / "llama-cache"
    write_gguf(cache / "ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M.gguf", {"general.architecture": "gemma3"})
    gpt4all = dict((source, folder) for source, folder in model_folders(home, {}))["GPT4All"]
    write_gguf(gpt4all / "Llama-3.2-1B-Instruct-Q4_0.gguf", {"general.architecture": "llama"})
    found = find_models(home, env={"OLLAMA_MODELS": str(elsewhere), "LLAMA_CACHE": str(cache)})
    names = {(m.source, m.name) for m in found}
    assert ("Ollama", "acme/tiny:q4") in names
    assert ("llama.cpp", "ggml-org_gemma-3-1b-it-GGUF_gemma-3-1b-it-Q4_K_M") in names
    assert ("GPT4All", "Llama-3.2-1B-Instruct-Q4_0") in names


def test_the_walk_is_bounded(home):
    for i in range(50):
        (home / "Downloads" / f"IMG_{i:04}.jpg").write_bytes(b"x")
    # the budget runs out in Downloads, after the app folders were searched
    found = find_models(home, env={}, max_entries=30)
    assert [m.source for m in found] == ["LM Studio"]


def test_headers_that_are_not_gguf_or_are_cut_short(tmp_path):
    assert read_gguf_header(tmp_path / "missing.gguf") is None
    assert read_gguf_header(write_gguf(tmp_path / "ok.gguf", {"general.architecture": "llama"})) == {
        "general.architecture": "llama"
    }
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(
        write_gguf(tmp_path / "full.gguf", {"general.architecture": "phi3", "general.name": "x" * 100}).read_bytes()[
            :80
        ]
    )
    assert read_gguf_header(cut) == {"general.architecture": "phi3"}  # what was readable is kept


def test_a_model_found_in_ollamas_store_loads_and_answers(home):
    import shutil

    from models.llama_cpp_backend import LlamaCppChatModel

    shutil.rmtree(home / ".lmstudio")
    shutil.rmtree(home / ".cache")
    found = next(m for m in find_models(home, env={}) if m.source == "Ollama")
    model = LlamaCppChatModel(model_path=found.path, n_ctx=512, max_tokens=4, seed=1)
    try:
        assert "".join(model.stream([{"role": "user", "content": "Hi"}], max_tokens=4))
    finally:
        model.close()


def test_finds_the_openai_compatible_servers_running_here(server_url):
    from urllib.parse import urlparse

    from models.discover import find_servers

    port = urlparse(server_url).port
    found = find_servers(known=[("Ollama", port)])  # as if it served on Ollama's port
    assert [(s.url, s.app, s.models) for s in found] == [(server_url, "Ollama", ("smollm2",))]
    found = find_servers([(server_url + "/", "")], known=[])  # the URL in settings, trailing "/" or not
    assert [(s.app, s.models) for s in found] == [("configured", ("smollm2",))]


def test_ports_where_nothing_or_something_else_answers_are_left_out():
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from models.discover import find_servers
    from tests.conftest import free_port

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html>a web app, not a model server</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    web = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    try:
        t0 = time.monotonic()
        found = find_servers(known=[("LM Studio", web.server_address[1]), ("Jan", free_port())])
        assert found == [] and time.monotonic() - t0 < 3
    finally:
        web.shutdown()
