"""The ``initialize`` answer: negotiated revision, capabilities from what is registered, server info."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..conf import mcp_settings
from ..registry.apps import AppResource
from ..wire.apps import APP_MIME_TYPE, APPS_EXTENSION
from ..wire.v2026_07_28 import TASKS_EXTENSION
from ..wire.versions import negotiate

if TYPE_CHECKING:
    from ..registry.server import MCPServer

__all__ = ["initialize_result", "server_capabilities", "server_info", "sessionless_capabilities"]


def server_capabilities(server: MCPServer) -> dict[str, Any]:
    """Capabilities advertised for ``server``: each feature only when something is registered (MCP Apps,
    ``extensions["io.modelcontextprotocol/ui"]``, when a tool has a view)."""
    capabilities: dict[str, Any] = {"logging": {}}
    if server.tools:
        capabilities["tools"] = {"listChanged": True}
    if server.resources:
        capabilities["resources"] = {"subscribe": True, "listChanged": True}
    if server.prompts:
        capabilities["prompts"] = {"listChanged": True}
    if server.completions:
        capabilities["completions"] = {}
    if any(isinstance(resource, AppResource) for resource in server.resources.values()):
        capabilities["extensions"] = {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}
    return capabilities


def sessionless_capabilities(server: MCPServer) -> dict[str, Any]:
    """Capabilities a 2026-07-28 server declares: :func:`server_capabilities`, and the tasks extension when
    one of its tools can run as a task."""
    capabilities = server_capabilities(server)
    if any(tool.task for tool in server.tools.values()):
        capabilities["extensions"] = {**capabilities.get("extensions", {}), TASKS_EXTENSION: {}}
    return capabilities


def server_info(server: MCPServer) -> dict[str, Any]:
    """The server's Implementation (``name``, ``version``, ``title`` and ``icons`` when set)."""
    info: dict[str, Any] = {
        "name": server.name or mcp_settings.SERVER_NAME,
        "version": server.version or mcp_settings.SERVER_VERSION,
    }
    title = server.title or mcp_settings.SERVER_TITLE
    if title:
        info["title"] = title
    icons = server.icons or mcp_settings.SERVER_ICONS
    if icons:
        info["icons"] = icons
    return info


def initialize_result(server: MCPServer, params: dict[str, Any]) -> dict[str, Any]:
    """The result of ``initialize`` for the client's ``params``."""
    result: dict[str, Any] = {
        "protocolVersion": negotiate(params.get("protocolVersion")),
        "capabilities": server_capabilities(server),
        "serverInfo": server_info(server),
    }
    instructions = server.instructions or mcp_settings.INSTRUCTIONS
    if instructions:
        result["instructions"] = instructions
    return result
