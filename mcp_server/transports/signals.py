"""Cross-process signals over the Channels channel layer: session ends, messages for GET streams."""

from __future__ import annotations

from typing import Any

from channels.layers import get_channel_layer

from ..conf import mcp_settings

__all__ = ["asend_to_session", "asession_ended", "session_group"]


def session_group(session_id: str) -> str:
    """The channel-layer group of a session's standalone GET streams."""
    return f"mcp-session-{session_id}"


async def asession_ended(session_id: str, reason: str) -> None:
    """Tell every worker that the session ended, so its GET streams close."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is not None:
        await layer.group_send(session_group(session_id), {"type": "mcp.session.closed", "reason": reason})


async def asend_to_session(session_id: str, message: dict[str, Any]) -> None:
    """Send a server-initiated message on the session's standalone GET stream, whichever worker holds it."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is not None:
        await layer.group_send(session_group(session_id), {"type": "mcp.message", "message": message})
