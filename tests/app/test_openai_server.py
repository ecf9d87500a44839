"""`mnemo serve` as a subprocess, driven by the `openai` Python client: the real bundled GGUF replies,
the exchange is memory afterwards (read through the app's API), the token and the address are checked."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

openai = pytest.importorskip("openai", reason="the test extra's openai client")

from app.context import AppContext  # noqa: E402
from app.doors.api_access import check_bind, is_loopback  # noqa: E402
from app.doors.openai_server import BadRequest, parse_request  # noqa: E402
from tests.app.ready_line import REPO_ROOT, start, stop  # noqa: E402

START_TIMEOUT_S = 120
MEMORY_TIMEOUT_S = 60


class Served:
    def __init__(self, proc: subprocess.Popen, base_url: str, token: str | None):
        self.proc, self.base_url, self.token = proc, base_url, token

    def client(self, api_key: str | None = None, **kw):
        return openai.OpenAI(base_url=self.base_url, api_key=api_key or self.token or "none", max_retries=0, **kw)


def _serve(dirs, *extra: str) -> Served:
    env = {
        **os.environ,
        "MNEMO_DATA_DIR": str(dirs["data"]),
        "MNEMO_CONFIG_DIR": str(dirs["config"]),
        "OPENBLAS_NUM_THREADS": "1",
    }
    proc, url = start(["serve", "--port", "0", *extra], env, timeout=START_TIMEOUT_S)
    token_file = dirs["config"] / "api-token"
    return Served(proc, url, token_file.read_text().strip() if token_file.exists() else None)


@pytest.fixture
def served(mnemo_dirs):
    s = _serve(mnemo_dirs)
    yield s
    stop(s.proc)


@pytest.fixture
def app_ctx(mnemo_dirs, embedder):
    ctx = AppContext.create()
    ctx._embedder = embedder
    return ctx


def _wait_for(condition, timeout: float = MEMORY_TIMEOUT_S, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _page_saying(ctx, text: str):
    store = ctx.open_store()
    try:
        return [p for p in store.pages.list_pages(limit=100) if p.user_text == text]
    finally:
        store.close()


@pytest.mark.slow
def test_a_streamed_reply_becomes_memory(served, app_ctx):
    client = served.client()
    assert [m.id for m in client.models.list().data] == ["mnemo"]
    said = "My bike is a green Brompton and I ride it to work."
    stream = client.chat.completions.create(
        model="mnemo",
        messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": said}],
        stream=True,
        max_tokens=16,
        user="alice",
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2  # it streamed
    assert chunks[-2].choices[0].finish_reason in ("stop", "length")
    assert chunks[-1].usage.completion_tokens > 0
    pages = _wait_for(lambda: _page_saying(app_ctx, said), what="the exchange's page")
    assert pages[0].assistant_text == text.strip() or pages[0].assistant_text == text
    store = app_ctx.open_store()
    try:
        conv = store.conversations.get_conversation(pages[0].conversation_id)
        assert conv.title == "alice (via OpenAI API)" and not conv.incognito
        assert [m.role for m in store.conversations.list_messages(conv.id)] == ["user", "assistant"]
    finally:
        store.close()

    # the same client goes on in the same conversation; another gets its own
    again = client.chat.completions.create(
        model="mnemo", messages=[{"role": "user", "content": "What colour is my bike?"}], max_tokens=12, user="alice"
    )
    assert again.choices[0].message.content and again.usage.completion_tokens > 0
    other = client.chat.completions.create(
        model="mnemo",
        messages=[{"role": "user", "content": "Hello there."}],
        max_tokens=8,
        extra_headers={"X-Mnemo-Client": "bob"},
    )
    assert other.choices[0].message.content
    _wait_for(lambda: _page_saying(app_ctx, "Hello there."), what="bob's page")
    store = app_ctx.open_store()
    try:
        titles = {c.title: c.id for c in store.conversations.list_conversations()}
        assert set(titles) == {"alice (via OpenAI API)", "bob (via OpenAI API)"}
        assert len(store.conversations.list_messages(titles["alice (via OpenAI API)"])) == 4
    finally:
        store.close()


@pytest.mark.slow
def test_incognito_requests_leave_no_memory(served, app_ctx):
    client = served.client()
    secret = "My passport number is X1234567."
    reply = client.chat.completions.create(
        model="mnemo",
        messages=[{"role": "user", "content": secret}],
        max_tokens=8,
        user="carol",
        extra_headers={"X-Mnemo-Incognito": "1"},
    )
    assert reply.choices[0].message.content
    after = "I had soup for lunch today."
    client.chat.completions.create(
        model="mnemo", messages=[{"role": "user", "content": after}], max_tokens=8, user="carol"
    )
    _wait_for(lambda: _page_saying(app_ctx, after), what="the ordinary exchange's page")  # jobs ran in order
    assert _page_saying(app_ctx, secret) == []
    store = app_ctx.open_store()
    try:
        incognito = [c for c in store.conversations.list_conversations() if c.incognito]
        assert [c.title for c in incognito] == ["carol (via OpenAI API, incognito)"]
    finally:
        store.close()


@pytest.mark.slow
def test_recovers_what_a_dead_process_left_but_not_what_a_live_one_writes(mnemo_dirs, app_ctx):
    """A window (here: this test process) has a message waiting for the model: not a crash's. A
    process that died left one too: the server's start gives it an interrupted reply."""
    from app.chat.writer_lease import token

    store = app_ctx.open_store()
    try:
        cid = store.conversations.create_conversation("In the window")
        live = store.conversations.add_message(
            cid, "user", "What is the capital of Peru?", status="pending", meta={"writer": token(store)}
        )
        crashed = store.conversations.create_conversation("In a process that died")
        dead = store.conversations.add_message(
            crashed, "user", "And of Chile?", status="pending", meta={"writer": "0" * 32}
        )
    finally:
        store.close()
    s = _serve(mnemo_dirs)
    try:
        reply = s.client().chat.completions.create(
            model="mnemo", messages=[{"role": "user", "content": "Hi."}], max_tokens=4
        )
        assert reply.choices[0].message.content is not None  # the server's start-up work is done by now
    finally:
        stop(s.proc)
    store = app_ctx.open_store()
    try:
        assert (
            store.conversations.get_message(live).status == "pending"
            and store.conversations.message_children(live) == []
        )
        assert [m.status for m in store.conversations.message_children(dead)] == ["interrupted"]
    finally:
        store.close()


def test_requests_need_the_token_and_it_listens_on_loopback(served):
    host, port = served.base_url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    assert host == "127.0.0.1"
    _assert_listening_on_loopback(int(port))
    with pytest.raises(openai.AuthenticationError):
        served.client(api_key="not-the-token").models.list()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{served.base_url}/models", timeout=10)
    assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"].startswith("Bearer")
    with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
        served.client().chat.completions.create(model="mnemo", messages=[{"role": "assistant", "content": "hi"}])


def _assert_listening_on_loopback(port: int) -> None:
    """The kernel's own table of listening sockets (Linux) shows the port bound to 127.0.0.1 only."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return
    listening = [
        line.split()[1] for line in table.read_text().splitlines()[1:] if line.split()[3] == "0A"
    ]  # local address, state LISTEN
    ours = [addr for addr in listening if int(addr.split(":")[1], 16) == port]
    assert ours == ["0100007F:" + f"{port:04X}"], ours


def test_no_token_only_when_asked(mnemo_dirs):
    s = _serve(mnemo_dirs, "--no-token")
    try:
        with urllib.request.urlopen(f"{s.base_url}/models", timeout=10) as resp:
            assert resp.status == 200
    finally:
        stop(s.proc)


@pytest.mark.parametrize(
    "extra", [["--host", "0.0.0.0"], ["--host", "0.0.0.0", "--allow-remote", "--no-token"], ["--host", "example.org"]]
)
def test_refuses_a_non_loopback_address_without_the_flag_and_a_token(mnemo_dirs, extra):
    out = subprocess.run(
        [sys.executable, "-m", "app", "serve", *extra],
        cwd=REPO_ROOT,
        env={**os.environ, "MNEMO_DATA_DIR": str(mnemo_dirs["data"]), "MNEMO_CONFIG_DIR": str(mnemo_dirs["config"])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert "not loopback" in out.stderr or "not a loopback address" in out.stderr


def test_bind_rules():
    assert is_loopback("127.0.0.1") and is_loopback("127.3.2.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("me.local")
    assert check_bind("127.0.0.1", allow_remote=False, token=None) is None
    assert check_bind("0.0.0.0", allow_remote=False, token="t") is not None
    assert check_bind("0.0.0.0", allow_remote=True, token=None) is not None
    assert check_bind("0.0.0.0", allow_remote=True, token="t") is None


def test_parse_request_reads_the_last_user_message():
    req = parse_request(
        {
            "messages": [
                {"role": "user", "content": "old"},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            ],
            "user": "  dev   laptop ",
            "max_tokens": 5,
        },
        {"x-mnemo-incognito": "yes"},
    )
    assert (req.text, req.client, req.incognito, req.max_tokens, req.stream) == ("Hi", "dev laptop", True, 5, False)
    assert parse_request({"messages": [{"role": "user", "content": "x"}]}, {"x-mnemo-client": "ide"}).client == "ide"
    for bad in (
        [],
        {"messages": []},
        {"messages": [{"role": "user", "content": "  "}]},
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        {"messages": [{"role": "user", "content": "x"}], "n": 2},
        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
    ):
        with pytest.raises(BadRequest):
            parse_request(bad, {})
