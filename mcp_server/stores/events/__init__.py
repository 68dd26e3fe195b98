"""The event stores: the SSE events of handshake-era streams, kept for ``Last-Event-ID`` replay on any worker.

The store is chosen by the import path of its class in ``MCP_SERVER["EVENT_STORE_BACKEND"]``, as Django
chooses a session engine: :class:`~mcp_server.stores.events.database.DatabaseEventStore` (default) or
:class:`~mcp_server.stores.events.cache.CacheEventStore`; their base is :class:`~.base.EventStore`.
"""

from __future__ import annotations

from functools import lru_cache

from ...conf import mcp_settings
from ..loading import load_backend
from .base import EventStore

__all__ = ["EventStore", "get_event_store"]


@lru_cache(maxsize=4)
def _build(path: str, cache_alias: str, retention: float, max_events: int) -> EventStore:
    backend = load_backend("EVENT_STORE_BACKEND", path, EventStore)
    store: EventStore = backend(
        {"CACHE_ALIAS": cache_alias, "RETENTION": retention, "MAX_EVENTS": max_events}
    )
    return store


def get_event_store() -> EventStore:
    """The configured event store (one instance per distinct configuration)."""
    return _build(
        mcp_settings.EVENT_STORE_BACKEND,
        mcp_settings.EVENT_STORE_CACHE_ALIAS,
        float(mcp_settings.EVENT_RETENTION),
        int(mcp_settings.MAX_STREAM_EVENTS),
    )
