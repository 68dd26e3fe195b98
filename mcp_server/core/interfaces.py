"""The narrow views the core has of what sits above it: the server a request is for and the worker process
serving it. A :class:`~mcp_server.core.context.Context` holds both through these Protocols, so that the
core names neither ``mcp_server.registry`` nor ``mcp_server.runtime``, not even in a type hint.

The objects are the registry's ``MCPServer`` and the runtime's ``Runtime``; the layer that owns a table gets
it back typed from the context (``registry.server.server_of``, ``protocol.listen.listeners_of``,
``protocol.tasks.runner_of``), and a site's handler that wants the whole runtime checks
``isinstance(ctx.runtime, mcp_server.runtime.Runtime)``.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ProcessView", "ServerView"]


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
