"""Deprecated: ``mcp_server.ledger.database`` moved to ``mcp_server.stores.ledger.database``.

This module only re-exports it, and warns when imported; ``LEDGER_BACKEND`` still accepts
``"mcp_server.ledger.database.DatabaseLedger"`` (with a warning naming the new path).
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.stores.ledger.database import DatabaseLedger

__all__ = ["DatabaseLedger"]

warn_moved("mcp_server.ledger.database", "mcp_server.stores.ledger.database")
