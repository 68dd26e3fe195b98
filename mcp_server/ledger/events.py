"""Deprecated: ``mcp_server.ledger.events`` moved to ``mcp_server.stores.events`` (``base``: the interface and
the rows, ``database`` and ``cache``: the stores, the package: ``get_event_store``).

This module only re-exports them, and warns when imported; ``EVENT_STORE_BACKEND`` still accepts
``"mcp_server.ledger.events.DatabaseEventStore"`` and ``CacheEventStore`` (with a warning naming the new
path).
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.stores.events import get_event_store
from mcp_server.stores.events.base import (
    STORE,
    EventStore,
    StoredEvent,
    keys_answered,
    parse_event_id,
    retention_cutoff,
)
from mcp_server.stores.events.cache import CacheEventStore
from mcp_server.stores.events.database import DatabaseEventStore

__all__ = [
    "STORE",
    "CacheEventStore",
    "DatabaseEventStore",
    "EventStore",
    "StoredEvent",
    "get_event_store",
    "keys_answered",
    "parse_event_id",
    "retention_cutoff",
]

warn_moved("mcp_server.ledger.events", "mcp_server.stores.events")
