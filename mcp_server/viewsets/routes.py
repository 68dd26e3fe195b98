"""Deprecated: ``mcp_server.viewsets.routes`` moved to ``mcp_server.expose.viewsets.routes``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.viewsets.routes import STANDARD_ACTIONS, Route, lookup_schema, model_of, routes_of

__all__ = ["STANDARD_ACTIONS", "Route", "lookup_schema", "model_of", "routes_of"]

warn_moved("mcp_server.viewsets.routes", "mcp_server.expose.viewsets.routes")
