"""While the desktop app has the memory open, writes through `mnemo mcp` (a subprocess driven by the
official SDK's stdio client) appear in its inspector, marked with their client, and nothing is lost:
the window's own chat turn, written at the same time, keeps its page."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import Implementation

REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = Path(os.environ.get("MNEMO_SCREENSHOT_DIR", "/tmp")) / "mnemo-mcp-inspector.png"
FACTS = ["I keep three beehives on the roof", "My brother Tomas teaches chemistry in Porto"]
TIMEOUT_MS = 120_000


def _write_through_mcp(dirs, errlog, out: dict) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "app", "mcp"],
        cwd=str(REPO_ROOT),
        env={
            "MNEMO_DATA_DIR": str(dirs["data"]),
            "MNEMO_CONFIG_DIR": str(dirs["config"]),
            "OPENBLAS_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO_ROOT),
        },
    )

    async def main():
        client = Client(
            stdio_client(params, errlog=errlog), client_info=Implementation(name="Claude Desktop", version="1")
        )
        async with client as c:
            return [await c.call_tool("remember", {"text": text}) for text in FACTS]

    try:
        out["results"] = anyio.run(main)
    except BaseException as exc:  # reported by the test, on its own thread
        out["error"] = exc


def test_mcp_writes_appear_in_the_open_inspector(make_window, chat, qtbot, mnemo_dirs, tmp_path):
    win = make_window()
    panel = win.dock.show_inspector()
    panel.show_tab("persona")
    persona = panel.persona
    qtbot.waitUntil(lambda: persona.loaded, timeout=30_000)
    assert persona.knowledge["user"].rowCount() == 0

    out: dict = {}
    with (tmp_path / "mcp-stderr.log").open("w") as errlog:
        writer = threading.Thread(target=_write_through_mcp, args=(mnemo_dirs, errlog, out))
        writer.start()
        said = "I am learning to play the oboe on Tuesdays."
        chat.send(win, said)  # the window writes its own turn meanwhile
        qtbot.waitUntil(lambda: not writer.is_alive(), timeout=TIMEOUT_MS)
    assert "error" not in out, out.get("error")
    assert not any(r.is_error for r in out["results"])
    ids = [r.structured_content["id"] for r in out["results"]]

    def shown() -> set[str]:
        return {k.text for k in persona.knowledge["user"].records()}

    qtbot.waitUntil(lambda: set(FACTS) <= shown(), timeout=30_000)  # the inspector's own polling found them
    panel.show_persona_item("knowledge", ids[0])
    qtbot.waitUntil(lambda: "written via MCP: Claude Desktop" in persona.detail.toPlainText(), timeout=30_000)
    qtbot.waitUntil(lambda: persona.versions.rowCount() == 1, timeout=30_000)
    assert persona.versions.record(0).reason == "added via MCP: Claude Desktop"
    win.resize(1500, 900)
    qtbot.waitUntil(lambda: win.width() == 1500, timeout=5_000)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert win.grab().save(str(SCREENSHOT))

    store = win.ctx.open_store()
    try:

        def page_kept() -> bool:
            return any(p.user_text == said for p in store.pages.list_pages(limit=50))

        qtbot.waitUntil(page_kept, timeout=TIMEOUT_MS)  # the chat's page too: nothing lost
        assert {store.persona.get_knowledge(i).text for i in ids} == set(FACTS)
    finally:
        store.close()
