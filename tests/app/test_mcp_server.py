"""`mnemo mcp` driven as a subprocess by the official SDK's own clients (stdio, and streamable HTTP),
on a real store in temp folders, with the real embedder; the store is checked through the app's API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, Implementation

from app.context import AppContext
from app.doors.mcp_server import StrictToolCalls
from app.operations import chats as operations
from tests.app.ready_line import REPO_ROOT, start, stop

CLIENT = "Mnemo tests"


def _env(dirs) -> dict[str, str]:
    return {
        "MNEMO_DATA_DIR": str(dirs["data"]),
        "MNEMO_CONFIG_DIR": str(dirs["config"]),
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }


def mcp_client(dirs, errlog, name: str = CLIENT) -> Client:
    """The SDK's client on a `mnemo mcp` subprocess over stdio (started when entered)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "app", "mcp"], cwd=str(REPO_ROOT), env=_env(dirs)
    )
    return Client(stdio_client(params, errlog=errlog), client_info=Implementation(name=name, version="1.0"))


@pytest.fixture
def app_ctx(mnemo_dirs, embedder):
    ctx = AppContext.create()
    ctx._embedder = embedder
    return ctx


@pytest.fixture
def errlog(tmp_path):
    with (tmp_path / "mcp-stderr.log").open("w") as f:
        yield f


def _store(ctx):
    return ctx.open_store()


def test_lists_its_tools_and_resources(mnemo_dirs, errlog):
    async def main():
        async with mcp_client(mnemo_dirs, errlog) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            resources = [str(r.uri) for r in (await c.list_resources()).resources]
            templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
            return tools, resources, templates

    tools, resources, templates = anyio.run(main)
    assert set(tools) == {"search_memory", "remember", "forget", "get_persona", "recent_memory"}
    assert tools["search_memory"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["remember"].input_schema["properties"]["about"]["enum"] == ["user", "assistant"]
    assert resources == ["mnemo://persona"] and templates == ["mnemo://page/{page_id}"]


def test_search_finds_what_the_app_remembered(mnemo_dirs, app_ctx, errlog):
    store = _store(app_ctx)
    try:
        kept = operations.remember(store, "My sister Ines lives in Lisbon")
        cid = store.conversations.create_conversation("Trip")
        pid = store.intake.add_page(
            cid, "I booked the night train to Vienna for March.", "Nice, the sleeper is a good choice."
        )
    finally:
        store.close()

    async def main():
        async with mcp_client(mnemo_dirs, errlog) as c:
            found = await c.call_tool("search_memory", {"query": "Where does my sister live?", "limit": 3})
            trip = await c.call_tool("search_memory", {"query": "night train to Vienna"})
            page = await c.read_resource(f"mnemo://page/{pid}")
            persona = await c.read_resource("mnemo://persona")
            return found, trip, page, persona

    found, trip, page, persona = anyio.run(main)
    assert not found.is_error
    fact = found.structured_content["facts"][0]
    assert fact["id"] == kept.id and fact["text"] == "My sister Ines lives in Lisbon"
    assert fact["about"] == "user" and fact["source"] == "the user"
    assert fact["score"] > 0 and fact["why"] and fact["updated"][:4].isdigit()
    hit = trip.structured_content["pages"][0]
    assert hit["id"] == pid and "Vienna" in hit["user"] and hit["why"] and hit["date"]
    shown = json.loads(page.contents[0].text)
    assert shown["id"] == pid and shown["user"] == "I booked the night train to Vienna for March."
    assert "- My sister Ines lives in Lisbon" in persona.contents[0].text


def test_remember_and_forget_round_trip_marks_the_source(mnemo_dirs, app_ctx, errlog):
    async def main():
        async with mcp_client(mnemo_dirs, errlog, name="Claude Desktop") as c:
            added = await c.call_tool("remember", {"text": "My locker code is 4312"})
            assistant = await c.call_tool("remember", {"text": "I promised to answer in French", "about": "assistant"})
            seen = await c.call_tool("search_memory", {"query": "locker code"})
            wipe = await c.call_tool("forget", {"statement": "everything"})
            gone = await c.call_tool("forget", {"statement": "my locker code is 4312"})
            by_id = await c.call_tool("forget", {"kind": "fact", "id": assistant.structured_content["id"]})
            again = await c.call_tool("forget", {"kind": "fact", "id": assistant.structured_content["id"]})
            after = await c.call_tool("search_memory", {"query": "locker code"})
            return added, assistant, seen, wipe, gone, by_id, again, after

    added, assistant, seen, wipe, gone, by_id, again, after = anyio.run(main)
    kid = added.structured_content["id"]
    assert added.structured_content["outcome"] == "added"
    assert [f["id"] for f in seen.structured_content["facts"]][:1] == [kid]
    assert seen.structured_content["facts"][0]["source"] == "via MCP: Claude Desktop"
    assert wipe.is_error and "inspector" in wipe.content[0].text  # never a wipe
    assert gone.structured_content["facts"] == [{"id": kid, "text": "My locker code is 4312"}]
    assert by_id.structured_content == {
        "kind": "fact",
        "id": assistant.structured_content["id"],
        "forgot_anything": True,
    }
    assert again.is_error and "no fact" in again.content[0].text
    assert after.structured_content["facts"] == []
    store = _store(app_ctx)
    try:
        assert store.persona.count_knowledge() == 0
        events = store.event_log.events(0, 100)
        added_events = [e for e in events if e.kind == "knowledge_added"]
        assert [e.detail.get("model") for e in added_events] == ["via MCP: Claude Desktop"] * 2
        assert sum(e.kind == "forgotten" for e in events) == 2
    finally:
        store.close()


def test_the_inspector_reads_the_source_of_an_mcp_write(mnemo_dirs, app_ctx, errlog):
    async def main():
        async with mcp_client(mnemo_dirs, errlog, name="Cursor") as c:
            return await c.call_tool("remember", {"text": "I work on a Rust compiler at night"})

    kid = anyio.run(main).structured_content["id"]
    store = _store(app_ctx)
    try:
        fact = store.persona.get_knowledge(kid)
        assert fact.model == "via MCP: Cursor"  # the inspector's "model" of the fact
        assert store.persona.item_versions("knowledge", kid)[-1].reason == "added via MCP: Cursor"  # its "Why"
    finally:
        store.close()


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("remember", {"text": 5}, "is not of type 'string'"),
        ("remember", {"txt": "I like tea"}, "no argument named txt"),
        ("remember", {"text": "I like tea", "about": "the cat"}, "about"),
        ("search_memory", {"query": "tea", "limit": 0}, "limit"),
        ("forget", {"kind": "fact"}, "kind and id together"),
        ("forget_everything", {}, "unknown tool"),
    ],
)
def test_a_malformed_call_is_a_protocol_error_and_changes_nothing(mnemo_dirs, app_ctx, errlog, tool, arguments, says):
    store = _store(app_ctx)
    try:
        operations.remember(store, "I like green tea")
        before = (store.event_log.latest_event_id(), store.persona.count_knowledge())
    finally:
        store.close()

    async def main():
        async with mcp_client(mnemo_dirs, errlog) as c:
            with pytest.raises(MCPError) as caught:
                await c.call_tool(tool, arguments)
            return caught.value

    error = anyio.run(main)
    assert error.code == INVALID_PARAMS and says in error.message
    store = _store(app_ctx)
    try:
        assert (store.event_log.latest_event_id(), store.persona.count_knowledge()) == before
    finally:
        store.close()


def test_arguments_that_are_not_an_object_are_refused():
    """The SDK's client always sends an object; the middleware refuses anything else too."""

    class Server:
        async def list_tools(self):
            class T:
                name, input_schema = "remember", {"type": "object", "properties": {"text": {"type": "string"}}}

            return [T()]

    strict = StrictToolCalls(Server())  # type: ignore[arg-type]
    with pytest.raises(MCPError, match="must be an object"):
        anyio.run(strict.check, {"name": "remember", "arguments": ["I like tea"]})
    anyio.run(strict.check, {"name": "remember", "arguments": {"text": "I like tea"}})


def test_a_paused_memory_learns_nothing_but_still_answers_and_forgets(mnemo_dirs, app_ctx, errlog):
    store = _store(app_ctx)
    try:
        kept = operations.remember(store, "My dentist is Dr Okafor")
        operations.set_memory_paused(store, True)
    finally:
        store.close()

    async def main():
        async with mcp_client(mnemo_dirs, errlog) as c:
            refused = await c.call_tool("remember", {"text": "My cat is called Miso"})
            found = await c.call_tool("search_memory", {"query": "dentist"})
            forgot = await c.call_tool("forget", {"kind": "fact", "id": kept.id})
            return refused, found, forgot

    refused, found, forgot = anyio.run(main)
    assert refused.is_error and "paused" in refused.content[0].text
    assert found.structured_content["facts"][0]["id"] == kept.id
    assert forgot.structured_content["forgot_anything"]
    store = _store(app_ctx)
    try:
        assert store.persona.count_knowledge() == 0 and store.is_paused()
    finally:
        store.close()


def test_writes_beside_another_writer_lose_nothing(mnemo_dirs, app_ctx, errlog):
    """The app writing on its own connection while the MCP server writes: no "database is locked"."""
    facts = [
        "My daughter plays the cello",
        "I am allergic to penicillin",
        "Our flat has a balcony facing east",
        "I learned to sail in Brittany",
    ]
    app_facts = ["My car is a blue Skoda", "I grow chillies on the windowsill", "I run every Sunday morning"]
    stop = threading.Event()
    errors: list[BaseException] = []

    def app_writes():
        store = _store(app_ctx)
        try:
            for text in app_facts:
                operations.remember(store, text)
            while not stop.is_set():  # keep writing until the MCP side is done
                with store.transaction():
                    store.set_paused(False)
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    async def main():
        async with mcp_client(mnemo_dirs, errlog) as c:
            return [await c.call_tool("remember", {"text": t}) for t in facts]

    writer = threading.Thread(target=app_writes)
    writer.start()
    try:
        results = anyio.run(main)
    finally:
        stop.set()
        writer.join(30)
    assert not errors and not any(r.is_error for r in results)
    store = _store(app_ctx)
    try:
        texts = {k.text for k in store.persona.list_knowledge("user")}
    finally:
        store.close()
    assert texts == set(facts) | set(app_facts)


# ---------------------------------------------------------------------- streamable HTTP
def _start_http(dirs, *extra: str):
    return start(["mcp", "--http", "--port", "0", *extra], {**os.environ, **_env(dirs)})


def test_http_transport_needs_the_token(mnemo_dirs):
    proc, url = _start_http(mnemo_dirs)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=10)
        assert refused.value.code == 401
        token = (mnemo_dirs["config"] / "api-token").read_text().strip()

        async def main():
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with (
                http,
                Client(
                    streamable_http_client(url, http_client=http),
                    client_info=Implementation(name="LM Studio", version="1"),
                ) as c,
            ):
                names = [t.name for t in (await c.list_tools()).tools]
                added = await c.call_tool("remember", {"text": "I drink my coffee black"})
                found = await c.call_tool("search_memory", {"query": "how do I take my coffee"})
                return names, added, found

        names, added, found = anyio.run(main)
        assert "remember" in names and not added.is_error
        assert found.structured_content["facts"][0]["source"] == "via MCP: LM Studio"
    finally:
        stop(proc)


def test_http_transport_stays_on_loopback(mnemo_dirs):
    out = subprocess.run(
        [sys.executable, "-m", "app", "mcp", "--http", "--host", "0.0.0.0", "--port", "0"],
        cwd=REPO_ROOT,
        env={**os.environ, **_env(mnemo_dirs)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "loopback" in out.stderr


def test_a_damaged_memory_is_refused_at_start_in_one_line(mnemo_dirs):
    mnemo_dirs["data"].mkdir(parents=True)
    (mnemo_dirs["data"] / "mnemo.sqlite3").write_bytes(b"not a database at all " * 512)
    out = subprocess.run(
        [sys.executable, "-m", "app", "mcp"],
        cwd=REPO_ROOT,
        env={**os.environ, **_env(mnemo_dirs)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines()[-1].startswith("mnemo mcp: error:")
    assert "Traceback" not in out.stderr
