"""``RequestPeer``: the transport side of one request, shared by the HTTP exchange and the stdio loop."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any

from ..core.interfaces import OutboundRequests
from ..wire.errors import CONNECTION_CLOSED, JSONRPCError
from .outbound import aremember_route
from .settlement import PENDING, PendingRequest

__all__ = ["RequestPeer"]


class RequestPeer(ABC):
    """Sends a request's related messages while it is pending, and its server-to-client requests.

    Subclasses say how a message leaves (:meth:`emit`) and which session the request has; ``outbound`` is the
    process's table of server-to-client requests, ``channel`` the process's channel-layer name (where answers
    posted to other workers are forwarded).
    """

    entry: PendingRequest | None = None

    def __init__(self, outbound: OutboundRequests, channel: str = "") -> None:
        self.outbound = outbound
        self._channel = channel

    @property
    @abstractmethod
    def session_id(self) -> str | None:
        """The session of the request (``None`` when stateless)."""

    @property
    def channel(self) -> str:
        """The channel-layer name answers from other workers are sent to (empty: this process only)."""
        return self._channel

    @abstractmethod
    async def emit(self, message: dict[str, Any]) -> bool:
        """Send ``message`` on the request's way out; ``False`` when the client can no longer read it."""

    async def notify(self, message: dict[str, Any]) -> None:
        """Send a notification related to the request, unless the request has been settled."""
        if self.entry is not None and self.entry.state == PENDING:
            await self.emit(message)

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Send a server-to-client request and wait for the client's result (from any worker)."""
        session_id = self.session_id
        request_id, future = self.outbound.new(session_id)
        await aremember_route(session_id, request_id, self.channel)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        span = self.entry.span if self.entry is not None else None
        try:
            if span is None:
                return await self._send(message, future)
            with span.outbound(method, message):  # a CLIENT span; its context goes in params._meta
                return await self._send(message, future)
        finally:
            self.outbound.discard(session_id, request_id)

    async def _send(self, message: dict[str, Any], future: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        if not await self.emit(message):
            raise JSONRPCError(CONNECTION_CLOSED, "Connection closed: the client stopped reading")
        return await future
