"""Serve the Model Context Protocol from a Django site.

Register handlers in any installed app's ``mcp.py``::

    from mcp_server import mcp, Context, ToolError

    @mcp.tool
    async def search_books(query: str, limit: int = 10) -> list[BookOut]:
        "Find books whose title contains the query."
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.moved import lazy_exports

__all__ = [
    "App",
    "Audio",
    "Context",
    "Image",
    "InputRequest",
    "JSONRPCError",
    "MCPServer",
    "McpHeader",
    "MissingClientCapability",
    "ResourceNotFound",
    "ToolError",
    "anotify_resource_updated",
    "expose_form",
    "expose_model",
    "expose_viewset",
    "mcp",
    "notify_resource_updated",
    "write_transaction",
]

if TYPE_CHECKING:
    from .core.context import Context
    from .core.rounds import InputRequest
    from .core.writes import write_transaction
    from .expose.forms import expose_form
    from .expose.models import expose_model
    from .expose.viewsets import expose_viewset
    from .registry.apps import App
    from .registry.results import Audio, Image
    from .registry.server import MCPServer, mcp
    from .registry.signature import McpHeader
    from .updates import anotify_resource_updated, notify_resource_updated
    from .wire.errors import JSONRPCError, ResourceNotFound, ToolError
    from .wire.v2026_07_28 import MissingClientCapability

_LAZY = {
    "App": "mcp_server.registry.apps",
    "Context": "mcp_server.core.context",
    "InputRequest": "mcp_server.core.rounds",
    "JSONRPCError": "mcp_server.wire.errors",
    "ResourceNotFound": "mcp_server.wire.errors",
    "ToolError": "mcp_server.wire.errors",
    "Audio": "mcp_server.registry.results",
    "Image": "mcp_server.registry.results",
    "MCPServer": "mcp_server.registry.server",
    "McpHeader": "mcp_server.registry.signature",
    "MissingClientCapability": "mcp_server.wire.v2026_07_28",
    "mcp": "mcp_server.registry.server",
    "anotify_resource_updated": "mcp_server.updates",
    "expose_form": "mcp_server.expose.forms",
    "expose_model": "mcp_server.expose.models",
    "expose_viewset": "mcp_server.expose.viewsets",
    "notify_resource_updated": "mcp_server.updates",
    "write_transaction": "mcp_server.core.writes",
}


__getattr__ = lazy_exports("mcp_server", _LAZY)
"""Imports the public names on first use, so that ``INSTALLED_APPS`` can load this package early."""
