"""The demo site's MCP servers besides the default ``mcp`` (routed in ``project/asgi.py``).

An app puts a handler on a server by importing it: ``from project.mcp_servers import staff`` then
``@staff.tool``. Each server has its own URL, name, instructions and sessions.
"""

from __future__ import annotations

from mcp_server import MCPServer

__all__ = ["conformance", "staff"]

staff = MCPServer(
    "django-mcp-demo-staff",
    key="staff",
    title="Django MCP demo: library staff tools",
    instructions=(
        "Staff tools of the library catalogue: browse books and loans as tables. "
        "Needs a staff account's token (Authorization: Bearer …) with the catalogue's view permissions."
    ),
)
"""Served at ``/staff/mcp``: the catalogue's models as read-only query tools, for staff."""

conformance = MCPServer(
    "django-mcp-demo-conformance",
    key="conformance",
    title="Fixtures of the official MCP conformance suite",
)
"""Served at ``/conformance/mcp``: every tool, resource and prompt the suite's server scenarios call."""
