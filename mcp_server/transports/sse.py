"""Server-sent events framing."""

from __future__ import annotations

__all__ = ["KEEPALIVE", "SSE_HEADERS", "event"]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]

KEEPALIVE = b": ping\n\n"
"""An SSE comment: ignored by clients, keeps an idle stream open through proxies."""


def event(data: bytes, event_id: str | None = None) -> bytes:
    """One ``message`` event carrying a JSON-RPC message, already encoded (``data``: one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: ".encode() + data + b"\n\n"
