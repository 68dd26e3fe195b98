"""The narrow views the core has of what sits above it: the server a request is for, the worker process
serving it and the process's server-to-client requests. A :class:`~mcp_server.core.context.Context` holds
the first two through these Protocols, so that the core names neither ``mcp_server.registry`` nor
``mcp_server.runtime``, not even in a type hint; protocol code takes the third as one.

The objects are the registry's ``MCPServer``, the runtime's ``Runtime`` and its ``OutboundTable``; the
layer that owns a table gets it back typed from the context (``registry.server.server_of``,
``protocol.listen.listeners_of``, ``protocol.tasks.runner_of``), and a site's handler that wants the whole
runtime checks ``isinstance(ctx.runtime, mcp_server.runtime.Runtime)``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from ..wire.jsonrpc import JSONRPCResponse, RequestId, WireError

__all__ = ["OutboundRequests", "ProcessView", "ServerView"]


class ServerView(Protocol):
    """The server a request is for, as the core sees it (``mcp_server.registry.server.MCPServer``)."""

    @property
    def key(self) -> str:
        """The server's key among the site's servers (its sessions, tasks and ledger rows carry it)."""
        ...


class ProcessView(Protocol):
    """The worker process serving a request, as the core sees it (``mcp_server.runtime.Runtime``)."""

    @property
    def worker_id(self) -> str:
        """The process's identity in the ledger (its leases carry it)."""
        ...

    @property
    def channel(self) -> str:
        """The process's channel-layer name (empty without a channel layer)."""
        ...


class OutboundRequests(Protocol):
    """The server-to-client requests of a process, waiting for the client's answers
    (``mcp_server.runtime.outbound.OutboundTable``)."""

    def new(self, session_id: str | None) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        """A fresh request id and the future its answer will resolve."""
        ...

    def discard(self, session_id: str | None, request_id: RequestId) -> None:
        """Forget a request (answered, cancelled or timed out)."""
        ...

    def resolve(self, session_id: str | None, message: JSONRPCResponse | WireError) -> bool:
        """Hand the client's answer to the waiting handler; ``False`` when nobody waits for it."""
        ...
