"""What protocol code needs of the worker process serving it: narrow Protocols, so that it is never handed
the whole ``mcp_server.runtime.Runtime`` (which satisfies each of them) nor names it.

They extend the core's :class:`~mcp_server.core.interfaces.ProcessView` with the request table
(:class:`PendingRequests`: the runtime's :class:`~mcp_server.runtime.requests.RequestTable`, seen as what
protocol code does with it) and the session cache, which the core cannot name, and give the outbound
requests as the core's :class:`~mcp_server.core.interfaces.OutboundRequests`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..core.interfaces import OutboundRequests, ProcessView
from ..sessions import SessionCache
from ..wire.jsonrpc import RequestId
from .settlement import Deliver, PendingRequest, RecordSink

__all__ = ["AnswerHost", "PendingRequests", "RequestHost"]


class PendingRequests(Protocol):
    """The requests a process holds until each is settled once (``mcp_server.runtime.requests.RequestTable``),
    as protocol code uses them: take one in, settle it, let its handler claim its answer."""

    @property
    def sink(self) -> RecordSink:
        """Where the settlements are recorded (the ledger writer; a claim joins its transaction)."""
        ...

    async def open(
        self,
        session_id: str | None,
        request_id: RequestId,
        method: str,
        deliver: Deliver,
        *,
        name: str = "",
        user_id: int | None = None,
        seconds: float | None = None,
        lease: float = 30.0,
        protocol_version: str = "",
        round_of: str = "",
        client: str = "",
        oauth_client: tuple[str, str] = ("", ""),
        params: dict[str, Any] | None = None,
        transport: str = "http",
        headers: Mapping[str, Any] | None = None,
    ) -> PendingRequest:
        """Take an arriving request in (-32600 for an id already pending in its session)."""
        ...

    async def settle(self, entry: PendingRequest, state: str, response: dict[str, Any] | None) -> bool:
        """Settle ``entry``: ``True`` for the one caller that moves it from pending (it delivers)."""
        ...

    def claim(self, entry: PendingRequest) -> None:
        """The handler claims its answer: from now on only its own task settles it (``RequestSettled`` if
        something else did already)."""
        ...


class RequestHost(ProcessView, Protocol):
    """Where requests are served (``serving``, the 2026-07-28 refusals): the request table and the cache of
    sessions."""

    @property
    def requests(self) -> PendingRequests:
        """The requests this process holds until each is settled once."""
        ...

    @property
    def sessions(self) -> SessionCache:
        """The sessions this process has read recently."""
        ...


class AnswerHost(Protocol):
    """Where the client's notifications and answers go (``client_messages``)."""

    @property
    def outbound(self) -> OutboundRequests:
        """The server-to-client requests waiting here for the client's answer."""
        ...

    async def cancel(self, session_id: str | None, request_id: RequestId) -> bool:
        """The client cancelled a request: settle it here or tell the worker that holds it."""
        ...
