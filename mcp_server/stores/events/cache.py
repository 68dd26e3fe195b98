"""The cache event store: events in a Django cache shared by every worker (Redis), expiring on their own."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.utils import timezone

from ...conf import process_cache
from .base import EventStore, StoredEvent

__all__ = ["CacheEventStore"]


class CacheEventStore(EventStore):
    """Events in a Django cache shared by the workers (Redis): one key per event, a list of a stream's seqs,
    all expiring after ``EVENT_RETENTION`` (so pruning is the cache's)."""

    @property
    def cache(self) -> Any:
        return process_cache(str(self.options.get("CACHE_ALIAS", "default")))

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
