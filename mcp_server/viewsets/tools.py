"""Deprecated: ``mcp_server.viewsets.tools`` moved to ``mcp_server.expose.viewsets.tools``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.viewsets.tools import DEFAULT_ANNOTATIONS, expose_viewset

__all__ = ["DEFAULT_ANNOTATIONS", "expose_viewset"]

warn_moved("mcp_server.viewsets.tools", "mcp_server.expose.viewsets.tools")
