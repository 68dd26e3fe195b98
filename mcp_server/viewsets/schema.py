"""Deprecated: ``mcp_server.viewsets.schema`` moved to ``mcp_server.expose.viewsets.schema``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

import warnings

from mcp_server.expose.viewsets.schema import (
    ToolSchema,
    input_schema,
    list_output_schema,
    object_schema,
    output_schema,
    to_json_schema,
)

__all__ = [
    "ToolSchema",
    "input_schema",
    "list_output_schema",
    "object_schema",
    "output_schema",
    "to_json_schema",
]

warnings.warn(
    "mcp_server.viewsets.schema is deprecated: import from mcp_server.expose.viewsets.schema",
    DeprecationWarning,
    stacklevel=2,
)
