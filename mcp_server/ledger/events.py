"""The event store: the SSE events of handshake-era streams, kept so that a client reconnecting with
``Last-Event-ID`` (to any worker) gets what it missed.

A stream's events are identified ``<stream-id>:<seq>``. Its ``seq`` 0 rows open it (the priming event; a POST
stream has one per request it carries, holding that request's key, so that a survivor can find the stream of a
dead worker's request); a response row carries its request's key; a row with ``last`` set ends the stream (the
final response, sent as any other, or a row with no data: the resumed stream closes there).

The backend is chosen by import string in ``MCP_SERVER["EVENT_STORE_BACKEND"]``, as the ledger's is:
:class:`DatabaseEventStore` (default) or :class:`CacheEventStore` (a shared cache such as Redis). Events are
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
from functools import lru_cache
from typing import Any

from django.db import close_old_connections, connections, router, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from ..conf import mcp_settings
from ..core.stores import bounded

__all__ = [
    "CacheEventStore",
    "DatabaseEventStore",
    "EventStore",
    "StoredEvent",
    "get_event_store",
    "parse_event_id",
]

STORE = "event store"

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


class DatabaseEventStore(EventStore):
    """Events as rows of :class:`~mcp_server.models.StreamEvent`."""

    def write(self, events: list[StoredEvent]) -> None:
        from ..models import StreamEvent

        # One INSERT through the cursor (executemany): no model instances, no per-field preparation.
        connection = connections[router.db_for_write(StreamEvent)]
        quote = connection.ops.quote_name
        columns = ("session_id", "stream_id", "seq", "request_key", "data", "last", "created")
        sql = "INSERT INTO {} ({}) VALUES ({})".format(
            quote(StreamEvent._meta.db_table),
            ", ".join(quote(c) for c in columns),
            ", ".join(["%s"] * len(columns)),
        )
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        rows = [
            (
                e.session_id,
                e.stream_id,
                e.seq,
                e.request_key[:200],
                e.data,
                e.last,
                now if e.created is None else connection.ops.adapt_datetimefield_value(e.created),
            )
            for e in events
        ]
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.executemany(sql, rows)
        limit = self.max_events
        high: dict[str, int] = {}
        for e in events:
            if e.seq > limit:
                high[e.stream_id] = max(high.get(e.stream_id, 0), e.seq)
        for stream_id, seq in high.items():  # trim: notifications past the limit (responses stay)
            StreamEvent.objects.filter(
                stream_id=stream_id, seq__gt=0, seq__lte=seq - limit, request_key=""
            ).delete()

    def events_after(self, session_id: str, stream_id: str, after: int) -> list[StoredEvent]:
        from ..models import StreamEvent

        rows = StreamEvent.objects.filter(session_id=session_id, stream_id=stream_id, seq__gt=after)
        return [
            StoredEvent(r.session_id, r.stream_id, r.seq, r.data, r.request_key, r.last, r.created)
            for r in rows.order_by("seq", "id")
        ]

    def streams_of(self, session_id: str, request_key: str) -> list[str]:
        from ..models import StreamEvent

        rows = StreamEvent.objects.filter(session_id=session_id, request_key=request_key, seq=0)
        return sorted(set(rows.values_list("stream_id", flat=True)))

    def prune(self, before: datetime) -> int:
        from ..models import StreamEvent

        deleted, _ = StreamEvent.objects.filter(created__lt=before).delete()
        return deleted


class CacheEventStore(EventStore):
    """Events in a Django cache shared by the workers (Redis): one key per event, a list of a stream's seqs,
    all expiring after ``EVENT_RETENTION`` (so pruning is the cache's)."""

    @property
    def cache(self) -> Any:
        from django.core.cache import caches

        return caches[str(self.options.get("CACHE_ALIAS", "default"))]

    def _k(self, *parts: Any) -> str:
        return "mcp:ev:" + ":".join(str(p) for p in parts)

    def write(self, events: list[StoredEvent]) -> None:
        ttl = self.retention
        values: dict[str, Any] = {}
        by_stream: dict[str, list[StoredEvent]] = {}
        for e in events:
            created = e.created or timezone.now()
            values[self._k("e", e.stream_id, e.seq, e.request_key)] = dataclasses.replace(e, created=created)
            by_stream.setdefault(e.stream_id, []).append(e)
            if e.seq == 0 and e.request_key:
                key = self._k("r", e.session_id, e.request_key)
                values[key] = sorted({*(self.cache.get(key) or []), e.stream_id})
        self.cache.set_many(values, ttl)
        for stream_id, added in by_stream.items():  # one writer per stream at a time: read-modify-write
            index_key = self._k("i", stream_id)
            index: list[tuple[int, str]] = list(self.cache.get(index_key) or [])
            index += [(e.seq, e.request_key) for e in added]
            high = max(seq for seq, _key in index)
            dropped = [(s, k) for s, k in index if 0 < s <= high - self.max_events and not k]
            if dropped:
                self.cache.delete_many([self._k("e", stream_id, s, k) for s, k in dropped])
                index = [item for item in index if item not in dropped]
            self.cache.set(index_key, sorted(index), ttl)

    def events_after(self, session_id: str, stream_id: str, after: int) -> list[StoredEvent]:
        index = [(s, k) for s, k in self.cache.get(self._k("i", stream_id)) or [] if s > after]
        found = self.cache.get_many([self._k("e", stream_id, s, k) for s, k in sorted(index)])
        events = [e for e in found.values() if isinstance(e, StoredEvent) and e.session_id == session_id]
        return sorted(events, key=lambda e: e.seq)

    def streams_of(self, session_id: str, request_key: str) -> list[str]:
        return list(self.cache.get(self._k("r", session_id, request_key)) or [])

    def prune(self, before: datetime) -> int:
        return 0  # every key expires after EVENT_RETENTION


@lru_cache(maxsize=4)
def _build(path: str, cache_alias: str, retention: float, max_events: int) -> EventStore:
    backend = import_string(path)
    options = {"CACHE_ALIAS": cache_alias, "RETENTION": retention, "MAX_EVENTS": max_events}
    return backend(options)  # type: ignore[no-any-return]


def get_event_store() -> EventStore:
    """The configured event store (one instance per distinct configuration)."""
    return _build(
        mcp_settings.EVENT_STORE_BACKEND,
        mcp_settings.EVENT_STORE_CACHE_ALIAS,
        float(mcp_settings.EVENT_RETENTION),
        int(mcp_settings.MAX_STREAM_EVENTS),
    )


def retention_cutoff(now: datetime | None = None) -> datetime:
    """Events stored before this are past ``EVENT_RETENTION``."""
    return (now or timezone.now()) - timedelta(seconds=float(mcp_settings.EVENT_RETENTION))


def keys_answered(events: list[StoredEvent]) -> tuple[set[str], set[str], bool]:
    """Of a stream's rows: the request keys it carries, those answered, and whether it ended."""
    carried = {e.request_key for e in events if e.seq == 0 and e.request_key}
    answered = {e.request_key for e in events if e.seq > 0 and e.request_key}
    return carried, answered, any(e.last for e in events)
