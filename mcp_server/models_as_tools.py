"""Deprecated: ``mcp_server.models_as_tools`` moved to ``mcp_server.expose.models``.

This module only re-exports it, and warns when imported; ``from mcp_server import expose_model`` is
unchanged.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.models import DEFAULT_PERMISSION, expose_model

__all__ = ["DEFAULT_PERMISSION", "expose_model"]

warn_moved("mcp_server.models_as_tools", "mcp_server.expose.models")
