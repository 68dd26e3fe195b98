"""The standalone streams a worker process holds (a ``GET`` stream, the stdio output), by session.

While it holds one of a session's streams, the process is a member of the session's group on the channel
layer, so that a server-initiated message for the session, sent by any worker, reaches it
(:class:`~mcp_server.wire.messages.StreamMessage`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from ..core.stores import CHANNEL_LAYER, bounded
from ..wire.messages import session_group

__all__ = ["SessionStreams", "StreamSink"]

logger = logging.getLogger("mcp_server.runtime")


class StreamSink(Protocol):
    """A standalone stream held by this process (a GET stream, or the stdio output)."""

    async def send(self, message: dict[str, Any]) -> None:
        """Send a server-initiated message on the stream."""

    def close(self, reason: str) -> None:
        """The session ended: finish the stream."""


class SessionStreams:
    """The sinks of each session's standalone streams held here; ``layer`` and ``channel`` give the channel
    layer and this process's name on it (``None`` or empty: this process only)."""

    def __init__(self, layer: Callable[[], Any], channel: Callable[[], str]) -> None:
        self._layer = layer
        self._channel = channel
        self._sinks: dict[str, set[StreamSink]] = {}

    async def attach(self, session_id: str, sink: StreamSink) -> None:
        """Route the session's server-initiated messages to ``sink``; raises ``StoreUnavailable`` (and routes
        nothing) when the channel layer does not take the first stream's membership in time."""
        sinks = self._sinks.setdefault(session_id, set())
        first = not sinks
        sinks.add(sink)
        layer, channel = self._layer(), self._channel()
        if first and layer is not None and channel:
            try:
                await bounded(layer.group_add(session_group(session_id), channel), CHANNEL_LAYER)
            except BaseException:  # StoreUnavailable: the transport refuses the stream (503)
                sinks.discard(sink)
                if not sinks:
                    del self._sinks[session_id]
                raise

    async def detach(self, session_id: str, sink: StreamSink) -> None:
        """Stop routing to ``sink`` (the last of the session's: leave its group)."""
        sinks = self._sinks.get(session_id)
        if sinks is None:
            return
        sinks.discard(sink)
        if sinks:
            return
        del self._sinks[session_id]
        layer, channel = self._layer(), self._channel()
        if layer is not None and channel:
            try:
                await bounded(layer.group_discard(session_group(session_id), channel), CHANNEL_LAYER)
            except Exception:
                logger.debug("could not leave the group of session %s", session_id, exc_info=True)

    async def send(self, session_id: str, message: dict[str, Any]) -> None:
        """Send ``message`` on each of the session's streams held here."""
        for sink in list(self._sinks.get(session_id, ())):
            await sink.send(message)

    def close(self, session_id: str, reason: str) -> None:
        """The session ended: finish its streams."""
        for sink in list(self._sinks.get(session_id, ())):
            sink.close(reason)

    def close_all(self, reason: str) -> None:
        """The process shuts down: finish every stream."""
        for sinks in list(self._sinks.values()):
            for sink in list(sinks):
                sink.close(reason)

    async def rejoin(self) -> None:
        """Join the groups of the sessions held here again (a restarted channel layer forgot them)."""
        layer, channel = self._layer(), self._channel()
        for session_id in list(self._sinks):
            await bounded(layer.group_add(session_group(session_id), channel), CHANNEL_LAYER)
