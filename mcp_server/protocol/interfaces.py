"""What protocol code needs of the worker process serving it: narrow Protocols, so that it is never handed
the whole ``mcp_server.runtime.Runtime`` (which satisfies each of them) nor names it.

They extend the core's :class:`~mcp_server.core.interfaces.ProcessView` with the request table (the
protocol's own) and the session cache, which the core cannot name, and give the outbound requests as the
core's :class:`~mcp_server.core.interfaces.OutboundRequests`.
"""

from __future__ import annotations

from typing import Protocol

from ..core.interfaces import OutboundRequests, ProcessView
from ..sessions import SessionCache
from ..wire.jsonrpc import RequestId
from .settlement import RequestTable

__all__ = ["AnswerHost", "RequestHost"]


class RequestHost(ProcessView, Protocol):
    """Where requests are served (``serving``, the 2026-07-28 refusals): the request table and the cache of
    sessions."""

    @property
    def requests(self) -> RequestTable:
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
