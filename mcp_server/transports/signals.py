"""Server-initiated messages for a session's standalone stream, whichever worker holds it."""

from __future__ import annotations

from typing import Any

from channels.layers import get_channel_layer

from ..conf import mcp_settings
from ..core.stores import bounded
from ..wire.messages import StreamMessage, session_group, to_event

__all__ = ["asend_to_session", "session_group"]


async def asend_to_session(session_id: str, message: dict[str, Any]) -> None:
    """Send ``message`` on the session's standalone stream (GET, or stdio), whichever worker holds it."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is not None:
        event = to_event(StreamMessage(session_id, message))
        await bounded(layer.group_send(session_group(session_id), event), "channel layer")
