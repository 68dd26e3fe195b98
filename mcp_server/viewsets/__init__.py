"""Deprecated: ``mcp_server.viewsets`` moved to ``mcp_server.expose.viewsets``.

This module only re-exports it, and warns when imported; ``from mcp_server import expose_viewset`` is
unchanged.
"""

from __future__ import annotations

import warnings

from mcp_server.expose.viewsets import DEFAULT_ANNOTATIONS, expose_viewset

__all__ = ["DEFAULT_ANNOTATIONS", "expose_viewset"]

warnings.warn(
    "mcp_server.viewsets is deprecated: import from mcp_server.expose.viewsets",
    DeprecationWarning,
    stacklevel=2,
)
