"""Deprecated: ``mcp_server.viewsets.tools`` moved to ``mcp_server.expose.viewsets.tools``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

import warnings

from mcp_server.expose.viewsets.tools import DEFAULT_ANNOTATIONS, expose_viewset

__all__ = ["DEFAULT_ANNOTATIONS", "expose_viewset"]

warnings.warn(
    "mcp_server.viewsets.tools is deprecated: import from mcp_server.expose.viewsets.tools",
    DeprecationWarning,
    stacklevel=2,
)
