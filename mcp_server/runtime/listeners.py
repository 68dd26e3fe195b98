"""The ``subscriptions/listen`` streams (2026-07-28) this process holds, and its membership of the listeners'
group on the channel layer (:data:`~mcp_server.wire.messages.LISTEN_GROUP`) while it holds one. What a
stream asked for and how it is answered is :mod:`mcp_server.protocol.listen`'s."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from ..core.stores import CHANNEL_LAYER, bounded
from ..protocol.listen import TASK_STATUS, Listener
from ..protocol.settlement import PendingRequest
from ..wire.messages import LISTEN_GROUP, ListenEvent

__all__ = ["ListenerTable"]

logger = logging.getLogger("mcp_server.listen")


class ListenerTable:
    """This process's open listen streams, and its membership of the listeners' group."""

    def __init__(self, layer: Callable[[], Any], channel: Callable[[], str]) -> None:
        self._layer = layer
        self._channel = channel
        self._open: set[Listener] = set()
        self._lock: asyncio.Lock | None = None

    def __len__(self) -> int:
        return len(self._open)

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def add(self, listener: Listener) -> None:
        """Open a stream: from now on the changes it asked for are queued for it, from any worker.

        Raises :class:`~mcp_server.core.stores.StoreUnavailable` when the channel layer does not answer."""
        async with self._guard():
            self._open.add(listener)
            try:
                await self._join()  # every time: it renews the membership (groups expire on Redis)
            except BaseException:
                self._open.discard(listener)
                raise

    async def discard(self, listener: Listener) -> None:
        """Close a stream; the last one to close leaves the group."""
        async with self._guard():
            self._open.discard(listener)
            layer, channel = self._layer(), self._channel()
            if self._open or layer is None or not channel:
                return
            try:
                await bounded(layer.group_discard(LISTEN_GROUP, channel), CHANNEL_LAYER)
            except Exception:
                logger.debug("could not leave the listeners' group", exc_info=True)

    async def rejoin(self) -> None:
        """Join the group again after a channel-layer failure, if a stream is open here."""
        if self._open:
            await self._join()

    async def _join(self) -> None:
        layer, channel = self._layer(), self._channel()
        if layer is not None and channel:
            await bounded(layer.group_add(LISTEN_GROUP, channel), CHANNEL_LAYER)

    def deliver(self, event: ListenEvent) -> int:
        """Queue ``event`` on every open stream that asked for it; returns how many."""
        count = 0
        for listener in list(self._open):
            if listener.wants(event):
                listener.put(listener.tagged(event.method, event.params))
                count += 1
        return count

    def deliver_task(self, task: dict[str, Any]) -> int:
        """Queue ``notifications/tasks`` (the task's DetailedTask) on every open stream that asked for that
        task; returns how many."""
        task_id = str(task.get("taskId"))
        count = 0
        for listener in list(self._open):
            if task_id in (listener.honored.get("taskIds") or ()):
                listener.put(listener.tagged(TASK_STATUS, task))
                count += 1
        return count

    async def finish(
        self, entries: Iterable[PendingRequest] | None = None, *, grace: float = 2.0, drop: bool = False
    ) -> int:
        """End the open streams (those of ``entries``, or all) gracefully: each is answered with the
        ``complete`` result, settled like any answer. Waits up to ``grace`` seconds for them to settle.
        ``drop``: the notifications queued and not yet sent are not sent (a revoked credential)."""
        chosen = set(entries) if entries is not None else None
        ending = [lst for lst in self._open if chosen is None or lst.entry in chosen]
        for listener in ending:
            listener.end(drop=drop)
        tasks = [lst.task for lst in ending if lst.task is not None and not lst.task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        return len(ending)
