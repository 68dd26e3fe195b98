"""Deprecated: ``mcp_server.viewsets.requests`` moved to ``mcp_server.expose.viewsets.requests``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

import warnings

from mcp_server.expose.viewsets.requests import build_request, query_string, stdio_host

__all__ = ["build_request", "query_string", "stdio_host"]

warnings.warn(
    "mcp_server.viewsets.requests is deprecated: import from mcp_server.expose.viewsets.requests",
    DeprecationWarning,
    stacklevel=2,
)
