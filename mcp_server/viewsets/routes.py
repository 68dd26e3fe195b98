"""Deprecated: ``mcp_server.viewsets.routes`` moved to ``mcp_server.expose.viewsets.routes``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

import warnings

from mcp_server.expose.viewsets.routes import STANDARD_ACTIONS, Route, lookup_schema, model_of, routes_of

__all__ = ["STANDARD_ACTIONS", "Route", "lookup_schema", "model_of", "routes_of"]

warnings.warn(
    "mcp_server.viewsets.routes is deprecated: import from mcp_server.expose.viewsets.routes",
    DeprecationWarning,
    stacklevel=2,
)
