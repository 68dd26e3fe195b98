"""Deprecated: ``mcp_server.viewsets.schema`` moved to ``mcp_server.expose.viewsets.schema``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
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

warn_moved("mcp_server.viewsets.schema", "mcp_server.expose.viewsets.schema")
