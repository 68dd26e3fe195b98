"""Deprecated: ``mcp_server.ledger.cache`` moved to ``mcp_server.stores.ledger.cache``.

This module only re-exports it, and warns when imported; ``LEDGER_BACKEND`` still accepts
``"mcp_server.ledger.cache.CacheLedger"`` (with a warning naming the new path).
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.stores.ledger.cache import CacheLedger

__all__ = ["CacheLedger"]

warn_moved("mcp_server.ledger.cache", "mcp_server.stores.ledger.cache")
