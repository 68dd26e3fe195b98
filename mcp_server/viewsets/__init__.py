"""Deprecated: ``mcp_server.viewsets`` moved to ``mcp_server.expose.viewsets``.

This module only re-exports it, and warns when imported; ``from mcp_server import expose_viewset`` is
unchanged.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.viewsets import DEFAULT_ANNOTATIONS, expose_viewset

__all__ = ["DEFAULT_ANNOTATIONS", "expose_viewset"]

warn_moved("mcp_server.viewsets", "mcp_server.expose.viewsets")
