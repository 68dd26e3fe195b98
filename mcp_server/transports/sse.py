"""Server-sent events framing."""

from __future__ import annotations

from typing import Any

from ..wire.jsonrpc import dumps

__all__ = ["SSE_HEADERS", "event"]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def event(message: dict[str, Any], event_id: str | None = None) -> bytes:
    """One ``message`` event carrying a JSON-RPC message."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: ".encode() + dumps(message) + b"\n\n"
