"""Deprecated: ``mcp_server.models_as_writes`` moved to ``mcp_server.expose.writes``.

This module only re-exports it, and warns when imported.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.writes import (
    WRITE_OPERATIONS,
    RelatedSource,
    RowWriter,
    claim_answer,
    register_writes,
    related_sources,
)

__all__ = [
    "WRITE_OPERATIONS",
    "RelatedSource",
    "RowWriter",
    "claim_answer",
    "register_writes",
    "related_sources",
]

warn_moved("mcp_server.models_as_writes", "mcp_server.expose.writes")
