"""Deprecated: ``mcp_server.viewsets.errors`` moved to ``mcp_server.expose.viewsets.errors``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

import warnings

from mcp_server.expose.viewsets.errors import field_errors, refusal_message

__all__ = ["field_errors", "refusal_message"]

warnings.warn(
    "mcp_server.viewsets.errors is deprecated: import from mcp_server.expose.viewsets.errors",
    DeprecationWarning,
    stacklevel=2,
)
