"""The event store: the SSE events of handshake-era streams, kept so that a client reconnecting with
``Last-Event-ID`` (to any worker) gets what it missed.

A stream's events are identified ``<stream-id>:<seq>``. Its ``seq`` 0 rows open it (the priming event; a POST
stream has one per request it carries, holding that request's key, so that a survivor can find the stream of a
dead worker's request); a response row carries its request's key; a row with ``last`` set ends the stream (the
final response, sent as any other, or a row with no data: the resumed stream closes there).

This module is the stores' base, as ``django.contrib.sessions.backends.base`` is of Django's session stores:
:class:`EventStore`, the row it keeps (:class:`StoredEvent`) and what readers of the rows share. The store
is chosen by import path in ``MCP_SERVER["EVENT_STORE_BACKEND"]``, as the ledger's is (see
:mod:`mcp_server.stores.events`): :class:`~.database.DatabaseEventStore` (default) or
:class:`~.cache.CacheEventStore` (a shared cache such as Redis). Events are
kept for ``EVENT_RETENTION`` seconds, at most ``MAX_STREAM_EVENTS`` per stream (older notifications are
trimmed; responses and the markers stay), pruned by the ledger upkeep. Writes go through
:class:`~mcp_server.runtime.event_writer.EventWriter`, in batches behind the request path.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from abc import ABC, abstractmethod
from datetime import datetime, timedelta
from typing import Any

from django.db import close_old_connections
from django.utils import timezone

from ...conf import mcp_settings
from ...core.stores import bounded

__all__ = ["STORE", "EventStore", "StoredEvent", "keys_answered", "parse_event_id", "retention_cutoff"]

STORE = "event store"
"""The store's name in the error a wait on it gives up with (``StoreUnavailable``)."""

_EVENT_ID = re.compile(r"([pg][0-9a-f]{32}):([0-9]{1,18})")
"""An id this server issues: ``p`` (a POST stream) or ``g`` (a GET stream), 32 hex digits, ``:``, a seq."""


@dataclasses.dataclass
class StoredEvent:
    """One row of a stream (see the module docstring)."""

    session_id: str
    stream_id: str
    seq: int
    data: str = ""
    request_key: str = ""
    last: bool = False
    created: datetime | None = None

    @property
    def event_id(self) -> str:
        return f"{self.stream_id}:{self.seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``(stream_id, seq)`` of a ``Last-Event-ID``, or ``None`` when it is not of the form this server
    issues (so no client string reaches a store key or a channel-layer group name unchecked)."""
    found = _EVENT_ID.fullmatch(value.strip(" \t"))
    if found is None:
        return None
    return found.group(1), int(found.group(2))


class EventStore(ABC):
    """A backend: sync methods (run in a thread of their own), ``a``-prefixed async wrappers."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    @property
    def retention(self) -> float:
        return float(self.options.get("RETENTION", 600.0))

    @property
    def max_events(self) -> int:
        return int(self.options.get("MAX_EVENTS", 1000))

    @abstractmethod
    def write(self, events: list[StoredEvent]) -> None:
        """Store ``events`` (and trim the streams that passed ``MAX_STREAM_EVENTS``)."""

    @abstractmethod
    def events_after(self, session_id: str, stream_id: str, after: int) -> list[StoredEvent]:
        """The rows of ``stream_id`` in ``session_id`` with ``seq > after``, in order (``after`` -1: all)."""

    @abstractmethod
    def streams_of(self, session_id: str, request_key: str) -> list[str]:
        """The streams of ``session_id`` that carry the request ``request_key``."""

    @abstractmethod
    def prune(self, before: datetime) -> int:
        """Delete the events stored before ``before``; returns how many (an estimate for caches)."""

    async def _run(self, func: Any, *args: Any) -> Any:
        def call() -> Any:
            close_old_connections()
            return func(*args)

        return await bounded(asyncio.to_thread(call), STORE)

    async def aevents_after(self, session_id: str, stream_id: str, after: int) -> list[StoredEvent]:
        result: list[StoredEvent] = await self._run(self.events_after, session_id, stream_id, after)
        return result

    async def astreams_of(self, session_id: str, request_key: str) -> list[str]:
        result: list[str] = await self._run(self.streams_of, session_id, request_key)
        return result

    async def awrite(self, events: list[StoredEvent]) -> None:
        await self._run(self.write, events)

    async def aprune(self, before: datetime) -> int:
        result: int = await self._run(self.prune, before)
        return result


def retention_cutoff(now: datetime | None = None) -> datetime:
    """Events stored before this are past ``EVENT_RETENTION``."""
    return (now or timezone.now()) - timedelta(seconds=float(mcp_settings.EVENT_RETENTION))


def keys_answered(events: list[StoredEvent]) -> tuple[set[str], set[str], bool]:
    """Of a stream's rows: the request keys it carries, those answered, and whether it ended."""
    carried = {e.request_key for e in events if e.seq == 0 and e.request_key}
    answered = {e.request_key for e in events if e.seq > 0 and e.request_key}
    return carried, answered, any(e.last for e in events)
