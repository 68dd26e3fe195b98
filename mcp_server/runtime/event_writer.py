"""Writing stream events behind the request path: one background writer per process, in batches.

:meth:`EventWriter.add` only queues; every ``LEDGER_FLUSH_INTERVAL`` seconds the queued events are written in
one batch from one thread of the writer's own, in the order they were queued. A stream whose client has gone
writes through instead (:meth:`EventWriter.write_now`: what was queued first, then its events), so that a
client resuming on another worker finds each event in the store by the time it is told about it.

A store that fails keeps the batch queued and is retried with backoff; past ``MAX_QUEUED`` events the
oldest notifications are dropped (a replay then misses them; the log says so) rather than memory growing.
"""

from __future__ import annotations

import asyncio
import logging

from django.db import close_old_connections

from ..core.stores import bounded
from ..stores.events.base import STORE, EventStore, StoredEvent
from .batching import BatchLoop

__all__ = ["MAX_QUEUED", "EventWriter"]

logger = logging.getLogger("mcp_server.events")

MAX_QUEUED = 100_000


class EventWriter(BatchLoop):
    """Queues events and writes them in batches (see the module docstring)."""

    what = "event"
    items = "stream events"
    logger = logger

    def __init__(self, store: EventStore, *, interval: float) -> None:
        super().__init__(interval)
        self.store = store
        self._queue: list[StoredEvent] = []
        self._lock = asyncio.Lock()
        self.dropped = 0
        self.written = 0

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, event: StoredEvent) -> None:
        """Queue ``event`` (written within ``interval`` seconds)."""
        if self._closed:
            return
        self._queue.append(event)
        if len(self._queue) > MAX_QUEUED:
            drop = next((i for i, e in enumerate(self._queue) if not e.request_key and e.seq), 0)
            self._queue.pop(drop)
            self.dropped += 1
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                logger.error("event store behind: %d events dropped from the queue", self.dropped)
        self._wake()

    async def write_now(self, events: list[StoredEvent]) -> None:
        """Write what is queued, then ``events``, and wait for it (at most ``STORE_TIMEOUT``)."""
        self._queue.extend(events)
        try:
            await bounded(self.flush(), STORE)
        except BaseException:
            self._wake()  # left queued: written behind
            raise

    async def flush(self) -> None:
        """Write everything queued so far (the store's errors propagate; the events stay queued)."""
        async with self._lock:
            batch, self._queue = self._queue, []
            if not batch:
                return
            try:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self._executor, self._write_sync, batch)
            except BaseException:
                self._queue[:0] = batch
                raise
            self.written += len(batch)

    def _write_sync(self, batch: list[StoredEvent]) -> None:
        close_old_connections()
        self.store.write(batch)
