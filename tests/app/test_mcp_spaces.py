"""`mnemo mcp` and memory spaces, through the SDK's own client on a `mnemo mcp` subprocess (stdio), real
store and embedder: `space` on remember / search_memory / forget picks the space (an unknown name is a
tool error and writes nothing), `--space NAME` is the server's default, and an unknown `--space` stops
the server at start with one line."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import Implementation

from app.operations import chats as operations
from tests.app.ready_line import REPO_ROOT
from tests.app.test_mcp_server import _env, _store, app_ctx, errlog  # noqa: F401  (fixtures)


def _client(dirs, errlog, *extra: str) -> Client:  # noqa: F811
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "app", "mcp", *extra], cwd=str(REPO_ROOT), env=_env(dirs)
    )
    return Client(stdio_client(params, errlog=errlog), client_info=Implementation(name="Claude Desktop", version="1"))


def _work_and_personal(app_ctx) -> int:  # noqa: F811
    store = _store(app_ctx)
    try:
        work = store.spaces.create("Work")
        operations.remember(store, "My sister Ines lives in Lisbon")
        operations.remember(store, "The quarterly report for Porto is due Friday", space_id=work)
        return work
    finally:
        store.close()


def test_a_call_chooses_its_space_and_an_unknown_one_writes_nothing(mnemo_dirs, app_ctx, errlog):  # noqa: F811
    work = _work_and_personal(app_ctx)

    async def main():
        async with _client(mnemo_dirs, errlog) as c:
            schema = {t.name: t.input_schema for t in (await c.list_tools()).tools}
            kept = await c.call_tool("remember", {"text": "My manager is Ana", "space": "work"})
            plain = await c.call_tool("remember", {"text": "My cat is called Miso"})
            everywhere = await c.call_tool("search_memory", {"query": "report due Friday and my sister", "limit": 5})
            at_work = await c.call_tool("search_memory", {"query": "my sister", "space": "Work", "limit": 5})
            nope = await c.call_tool("remember", {"text": "My locker code is 4312", "space": "Nope"})
            lost = await c.call_tool("search_memory", {"query": "sister", "space": "Nope"})
            return schema, kept, plain, everywhere, at_work, nope, lost

    store = _store(app_ctx)
    try:
        before = (store.event_log.latest_event_id(), store.persona.count_knowledge())
    finally:
        store.close()
    schema, kept, plain, everywhere, at_work, nope, lost = anyio.run(main)
    assert "space" in schema["remember"]["properties"] and "space" in schema["search_memory"]["properties"]
    assert kept.structured_content["space"] == "Work" and plain.structured_content["space"] == "Personal"
    found = {(f["text"], f["space"]) for f in everywhere.structured_content["facts"]}
    assert {
        ("My sister Ines lives in Lisbon", "Personal"),
        ("The quarterly report for Porto is due Friday", "Work"),
    } <= (found)
    assert at_work.structured_content["space"] == "Work"
    assert {f["space"] for f in at_work.structured_content["facts"]} == {"Work"}
    assert "My sister Ines lives in Lisbon" not in {f["text"] for f in at_work.structured_content["facts"]}
    assert nope.is_error and nope.content[0].text.endswith(
        "memory holds no space named 'Nope'; its spaces are: Personal, Work"
    )
    assert lost.is_error and "no space named 'Nope'" in lost.content[0].text
    store = _store(app_ctx)
    try:
        assert store.persona.get_knowledge(kept.structured_content["id"]).space_id == work
        assert store.persona.get_knowledge(plain.structured_content["id"]).space_id == 1
        assert store.persona.count_knowledge() == before[1] + 2  # the refused one wrote nothing
        assert not [k for k in store.persona.list_knowledge(limit=50) if "locker" in k.text]
    finally:
        store.close()


def test_the_servers_space_is_the_default(mnemo_dirs, app_ctx, errlog):  # noqa: F811
    work = _work_and_personal(app_ctx)

    async def main():
        async with _client(mnemo_dirs, errlog, "--space", "Work") as c:
            said = c.instructions
            kept = await c.call_tool("remember", {"text": "My manager is Ana"})
            found = await c.call_tool("search_memory", {"query": "my sister lives in Lisbon", "limit": 5})
            home = await c.call_tool("search_memory", {"query": "my sister lives in Lisbon", "space": "Personal"})
            forgot = await c.call_tool("forget", {"statement": "my sister Ines lives in Lisbon"})
            return said, kept, found, home, forgot

    said, kept, found, home, forgot = anyio.run(main)
    assert "This server's memory space is “Work”" in said
    assert kept.structured_content["space"] == "Work"
    assert {f["space"] for f in found.structured_content["facts"]} <= {"Work"}
    assert "My sister Ines lives in Lisbon" not in {f["text"] for f in found.structured_content["facts"]}
    assert home.structured_content["facts"][0]["text"] == "My sister Ines lives in Lisbon"
    assert not forgot.structured_content["forgot_anything"]  # forgetting reads the server's space only
    store = _store(app_ctx)
    try:
        assert store.persona.get_knowledge(kept.structured_content["id"]).space_id == work
        assert [k.text for k in store.persona.list_knowledge(limit=50) if "Ines" in k.text] == [
            "My sister Ines lives in Lisbon"
        ]
    finally:
        store.close()


def test_an_unknown_server_space_stops_it_at_start(mnemo_dirs, app_ctx):  # noqa: F811
    _work_and_personal(app_ctx)
    out = subprocess.run(
        [sys.executable, "-m", "app", "mcp", "--space", "Nope"],
        cwd=REPO_ROOT,
        env={**os.environ, **_env(mnemo_dirs)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert "no space named 'Nope'" in out.stderr.strip().splitlines()[-1]
