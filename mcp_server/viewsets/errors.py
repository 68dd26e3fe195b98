"""Deprecated: ``mcp_server.viewsets.errors`` moved to ``mcp_server.expose.viewsets.errors``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.viewsets.errors import field_errors, refusal_message

__all__ = ["field_errors", "refusal_message"]

warn_moved("mcp_server.viewsets.errors", "mcp_server.expose.viewsets.errors")
