"""A request's transport side for unit tests: what the request sends while it runs is recorded."""

from __future__ import annotations

from typing import Any

from mcp_server.protocol.peer import RequestPeer

__all__ = ["RecordingPeer"]


class RecordingPeer(RequestPeer):
    """Records what the request emits; no session, no server-to-client requests."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    @property
    def session_id(self) -> str | None:
        return None

    async def emit(self, message: dict[str, Any]) -> bool:
        self.sent.append(message)
        return True
