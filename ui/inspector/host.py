"""`PanelHost`: what the inspector's views ask of the panel that holds them.

The views (ui.inspector.tabs and the tab modules beside it) are built by the panel (ui.inspector.panel) and call back into
it to run work on its worker (`worker.submit`, ui.tasks.UiWorker), change memory and refresh every
view (`act`), ask the user, and move between tabs. They name the panel by this
protocol, not by its class, so the two modules do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from memory_core import MemoryParams
from ui.tasks import UiWorker


class PanelHost(Protocol):
    params: MemoryParams
    worker: UiWorker

    def act(
        self,
        fn: Callable[[Any], Any],
        message: str | Callable[[Any], str] | None = None,
        after: Callable[[], None] | None = None,
    ) -> None: ...

    def ask_new_item(self, dimensions: list[str]) -> dict | None: ...

    def confirm(self, title: str, text: str, action: str = "Forget") -> bool: ...

    def edit_texts(self, title: str, fields: list[tuple[str, str]], note: str = "") -> list[str] | None: ...

    def follow_link(self, href: str) -> None: ...

    def open_message(self, conversation_id: int, message_id: int | None) -> None: ...

    def resolve_keys(self, model, rows: list[int], callback: Callable[[list], None]) -> None: ...

    def show_page(self, page_id: int) -> None: ...

    def show_persona_item(self, kind: str, item_id: int) -> None: ...

    def show_segment(self, segment_id: int) -> None: ...

    def show_segment_pages(self, segment_id: int) -> None: ...

    def status(self, text: str, error: bool = False) -> None: ...

    def status_error(self, text: str) -> None: ...
