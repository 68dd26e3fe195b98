"""Deprecated: ``mcp_server.viewsets.requests`` moved to ``mcp_server.expose.viewsets.requests``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.viewsets.requests import build_request, query_string, stdio_host

__all__ = ["build_request", "query_string", "stdio_host"]

warn_moved("mcp_server.viewsets.requests", "mcp_server.expose.viewsets.requests")
