"""Server-to-client requests waiting for the client's answer (elicitation, sampling, roots)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from channels.layers import get_channel_layer
from django.core.cache import caches

from ..conf import mcp_settings
from ..core.stores import bounded
from ..wire.errors import JSONRPCError
from ..wire.jsonrpc import JSONRPCResponse, RequestId, WireError, parse_message
from ..wire.messages import ClientAnswer, to_event

__all__ = ["OutboundTable", "aforward_answer", "aremember_route"]

ROUTE_TTL = 24 * 3600


def _route_key(session_id: str | None, request_id: RequestId) -> str:
    return f"mcp:outbound:{session_id}:{request_id!r}"


async def aremember_route(session_id: str | None, request_id: RequestId, channel: str) -> None:
    """Remember which consumer waits for this answer, so that a POST to any worker can reach it."""
    if channel and session_id is not None:
        cache = caches[mcp_settings.LEDGER_CACHE_ALIAS]
        await bounded(cache.aset(_route_key(session_id, request_id), channel, ROUTE_TTL), "cache")


async def aforward_answer(session_id: str | None, message: JSONRPCResponse | WireError) -> bool:
    """Send the client's answer to the worker whose handler waits for it; ``False`` when none does."""
    if session_id is None or message.id is None:
        return False
    cache = caches[mcp_settings.LEDGER_CACHE_ALIAS]
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
    await bounded(layer.send(channel, event), "channel layer")
    return True


class OutboundTable:
    """Futures of this process's server-to-client requests, keyed by session and request id."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str | None, str], asyncio.Future[dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def new(self, session_id: str | None) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """A fresh request id and the future its answer will resolve."""
        request_id = f"srv-{secrets.token_hex(8)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[(session_id, repr(request_id))] = future
        return request_id, future

    def discard(self, session_id: str | None, request_id: RequestId) -> None:
        """Forget a request (answered, cancelled or timed out)."""
        self._waiting.pop((session_id, repr(request_id)), None)

    def resolve_forwarded(self, session_id: str | None, payload: dict[str, Any]) -> bool:
        """Resolve with an answer another worker forwarded (see :func:`aforward_answer`)."""
        try:
            message = parse_message(payload)
        except JSONRPCError:
            return False
        return isinstance(message, JSONRPCResponse | WireError) and self.resolve(session_id, message)

    def resolve(self, session_id: str | None, message: JSONRPCResponse | WireError) -> bool:
        """Hand the client's answer to the waiting handler; ``False`` when nobody waits for it."""
        if message.id is None:
            return False
        future = self._waiting.pop((session_id, repr(message.id)), None)
        if future is None or future.done():
            return False
        if isinstance(message, JSONRPCResponse):
            future.set_result(message.result)
        else:
            error = message.error
            future.set_exception(JSONRPCError(error.code, error.message, error.data))
        return True
