"""Graceful shutdown: on SIGTERM (Daphne) or ASGI lifespan shutdown, answer every in-flight request.

Each request this worker holds is settled with -32000 "Connection closed: server shutting down", every
open response is finished, and the worker waits for that at most ``SHUTDOWN_GRACE`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import weakref
from typing import Any, cast

from ..conf import mcp_settings
from ..protocol.inflight import inflight

__all__ = ["LifespanApp", "ashutdown", "install_shutdown_hooks", "track", "untrack"]

logger = logging.getLogger("mcp_server.http")

_exchanges: weakref.WeakSet[Any] = weakref.WeakSet()
_installed = False
_shutting_down = False


def track(consumer: Any) -> None:
    """Remember a consumer whose response is open."""
    _exchanges.add(consumer)


def untrack(consumer: Any) -> None:
    """Forget a consumer whose response is complete."""
    _exchanges.discard(consumer)


async def ashutdown(reason: str = "server shutting down") -> int:
    """Settle this worker's requests with -32000, close its GET streams, wait for responses to finish."""
    global _shutting_down
    if _shutting_down:
        return 0
    _shutting_down = True
    grace = float(mcp_settings.SHUTDOWN_GRACE)
    consumers = list(_exchanges)
    closed = 0
    try:
        async with asyncio.timeout(grace):
            closed = await inflight.shutdown(reason)
            for consumer in consumers:
                consumer.stream_closed.set()
            tasks = [c.task for c in consumers if c.task is not None and not c.task.done()]
            if tasks:
                await asyncio.wait(tasks)
    except TimeoutError:
        logger.warning("shutdown grace of %.1fs ran out with responses still open", grace)
    logger.info("shutdown: %d in-flight requests answered with -32000", closed)
    return closed


def install_shutdown_hooks() -> None:
    """Under Daphne (Twisted), run :func:`ashutdown` before the reactor kills the applications."""
    global _installed
    if _installed or "twisted.internet.reactor" not in sys.modules:
        return
    _installed = True
    from twisted.internet import defer, reactor

    def before_shutdown() -> Any:
        return defer.Deferred.fromFuture(asyncio.ensure_future(ashutdown()))

    # Registered "before" the server's own trigger fires its cancellations.
    cast(Any, reactor).addSystemEventTrigger("before", "shutdown", before_shutdown)


class LifespanApp:
    """ASGI lifespan: nothing at startup; :func:`ashutdown` at shutdown."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await ashutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
