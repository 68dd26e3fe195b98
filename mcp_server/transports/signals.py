"""Server-initiated messages for a session's standalone stream, or for the ``subscriptions/listen`` streams
(2026-07-28), whichever worker holds them."""

from __future__ import annotations

from typing import Any

from channels.layers import get_channel_layer

from ..conf import mcp_settings
from ..core.stores import CHANNEL_LAYER, bounded
from ..wire.messages import LISTEN_GROUP, ListenEvent, StreamMessage, session_group, to_event

__all__ = ["apublish_to_listeners", "asend_to_session", "session_group"]


async def asend_to_session(session_id: str, message: dict[str, Any]) -> None:
    """Send ``message`` on the session's standalone stream (GET, or stdio), whichever worker holds it."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is not None:
        event = to_event(StreamMessage(session_id, message))
        await bounded(layer.group_send(session_group(session_id), event), CHANNEL_LAYER)


async def apublish_to_listeners(event: ListenEvent) -> bool:
    """Send ``event`` to every worker holding a listen stream (each sends it on the streams that asked for
    it). ``False`` when there is no channel layer: only this process's streams can be told."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is None:
        return False
    await bounded(layer.group_send(LISTEN_GROUP, to_event(event)), CHANNEL_LAYER)
    return True
