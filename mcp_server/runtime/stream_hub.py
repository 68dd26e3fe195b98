"""Where a worker's resumed streams learn that their stream has new events in the store, from any worker.

A stream whose client has gone (or was closed so that its client polls) writes its later events through to
the event store, then *wakes* the stream: a :class:`~mcp_server.wire.messages.StreamWake` to the stream's
channel-layer group, which every worker holding a resumed stream of that id has joined (without a channel
layer: this process's watchers only). A watcher then reads the store after the last event it sent; it also
reads it every :data:`POLL_INTERVAL` seconds, for events written in batches before the stream was handed
over and for the ``-32000`` a survivor writes for a dead worker's request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from ..core.stores import CHANNEL_LAYER, bounded
from ..wire.messages import StreamWake, stream_group, to_event

__all__ = ["POLL_INTERVAL", "StreamHub"]

logger = logging.getLogger("mcp_server.events")

POLL_INTERVAL = 0.5
"""Seconds between two reads of the store by a resumed stream that was not woken."""


class StreamHub:
    """The resumed streams this process holds, by stream id."""

    def __init__(self, layer: Callable[[], Any], channel: Callable[[], str]) -> None:
        self._layer = layer
        self._channel = channel
        self._watchers: dict[str, set[asyncio.Event]] = {}

    @asynccontextmanager
    async def watch(self, stream_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever ``stream_id`` is woken, from any worker, while the context lasts."""
        woken = asyncio.Event()
        watchers = self._watchers.setdefault(stream_id, set())
        first = not watchers
        watchers.add(woken)
        layer, channel = self._layer(), self._channel()
        try:
            if first and layer is not None and channel:
                await bounded(layer.group_add(stream_group(stream_id), channel), CHANNEL_LAYER)
            yield woken
        finally:
            watchers.discard(woken)
            if not watchers:
                del self._watchers[stream_id]
                if layer is not None and channel:
                    try:
                        await bounded(layer.group_discard(stream_group(stream_id), channel), CHANNEL_LAYER)
                    except Exception:
                        logger.debug("could not leave the group of stream %s", stream_id, exc_info=True)

    async def wake(self, stream_id: str) -> None:
        """Tell every worker holding a resumed ``stream_id`` that the store has new events of it."""
        layer = self._layer()
        if layer is None or not self._channel():
            self.deliver(StreamWake(stream_id))
            return
        try:
            await bounded(
                layer.group_send(stream_group(stream_id), to_event(StreamWake(stream_id))), CHANNEL_LAYER
            )
        except Exception:  # the watchers poll the store all the same
            logger.warning("could not wake the resumed streams of %s", stream_id, exc_info=True)
            self.deliver(StreamWake(stream_id))

    def deliver(self, message: StreamWake) -> None:
        for woken in self._watchers.get(message.stream_id, ()):
            woken.set()

    async def rejoin(self) -> None:
        """Join the groups again (a restarted Redis forgot them)."""
        layer, channel = self._layer(), self._channel()
        if layer is None or not channel:
            return
        for stream_id in list(self._watchers):
            await bounded(layer.group_add(stream_group(stream_id), channel), CHANNEL_LAYER)
