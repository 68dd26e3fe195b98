"""Server-to-client requests (elicitation, sampling, roots) across workers: where a waiting handler's answer
is routed. The process's own table of them is :class:`mcp_server.runtime.outbound.OutboundTable`."""

from __future__ import annotations

from typing import Any

from channels.layers import get_channel_layer

from ..conf import mcp_settings, process_cache
from ..core.moved import moved_names
from ..core.stores import CHANNEL_LAYER, bounded
from ..wire.jsonrpc import JSONRPCResponse, RequestId, WireError
from ..wire.messages import ClientAnswer, to_event

__all__ = ["aforward_answer", "aremember_route"]

ROUTE_TTL = 24 * 3600


def _route_key(session_id: str | None, request_id: RequestId) -> str:
    return f"mcp:outbound:{session_id}:{request_id!r}"


async def aremember_route(session_id: str | None, request_id: RequestId, channel: str) -> None:
    """Remember which consumer waits for this answer, so that a POST to any worker can reach it."""
    if channel and session_id is not None:
        cache = process_cache(mcp_settings.LEDGER_CACHE_ALIAS)
        await bounded(cache.aset(_route_key(session_id, request_id), channel, ROUTE_TTL), "cache")


async def aforward_answer(session_id: str | None, message: JSONRPCResponse | WireError) -> bool:
    """Send the client's answer to the worker whose handler waits for it; ``False`` when none does."""
    if session_id is None or message.id is None:
        return False
    cache = process_cache(mcp_settings.LEDGER_CACHE_ALIAS)
    key = _route_key(session_id, message.id)
    channel = await bounded(cache.aget(key), "cache")
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if not channel or layer is None:
        return False
    await bounded(cache.adelete(key), "cache")
    payload: dict[str, Any] = {"jsonrpc": "2.0", "id": message.id}
    if isinstance(message, JSONRPCResponse):
        payload["result"] = message.result
    else:
        payload["error"] = message.error.model_dump(mode="json", exclude_none=True)
    event = to_event(ClientAnswer(session_id=session_id, message=payload))
    await bounded(layer.send(channel, event), CHANNEL_LAYER)
    return True


__getattr__ = moved_names(__name__, {"OutboundTable": "mcp_server.runtime.outbound"})
"""``OutboundTable`` moved to :mod:`mcp_server.runtime.outbound` (the per-process tables); it is still given
here, with a warning."""
