"""The server-to-client requests (elicitation, sampling, roots) of this process waiting for the client's
answer (the core's :class:`~mcp_server.core.interfaces.OutboundRequests`); an answer posted to another
worker is forwarded here (:func:`mcp_server.protocol.outbound.aforward_answer`)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from ..wire.errors import JSONRPCError
from ..wire.jsonrpc import JSONRPCResponse, RequestId, WireError, parse_message

__all__ = ["OutboundTable"]


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
