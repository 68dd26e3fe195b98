"""Graceful shutdown: on SIGTERM or SIGINT (Daphne, Uvicorn) or ASGI lifespan shutdown, answer every
in-flight request.

Each request this worker holds is settled with -32000 "Connection closed: server shutting down", every
open response is finished, and the worker waits for that at most ``SHUTDOWN_GRACE`` seconds.

Uvicorn sends lifespan shutdown only once every open response is complete: a slow request, or a GET
stream a client keeps open, would hold its exit for as long as they last. So under a server that stops
gracefully on its own signal handler, the shutdown starts when the signal arrives (the server's handler
still runs, after ours has scheduled the shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import sys
import threading
import weakref
from types import FrameType
from typing import Any, cast

from ..conf import mcp_settings
from ..protocol.inflight import inflight

__all__ = ["LifespanApp", "ashutdown", "install_shutdown_hooks", "track", "untrack"]

logger = logging.getLogger("mcp_server.http")

_exchanges: weakref.WeakSet[Any] = weakref.WeakSet()
_installed = False
_shutting_down = False
_signalled: asyncio.Task[int] | None = None


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
    """Run :func:`ashutdown` as soon as the server starts stopping (call it from the server's event loop).

    Under Daphne (the Twisted reactor runs), before the reactor kills the applications; under a server
    that handles SIGTERM and SIGINT with handlers of its own (Uvicorn), when the signal arrives.
    """
    global _installed
    if _installed:
        return
    # The ``daphne`` app imports the reactor whatever the server, so its presence proves nothing.
    twisted = sys.modules.get("twisted.internet.reactor")
    if twisted is None or not getattr(twisted, "running", False):
        _installed = _chain_signal_handlers()
        return
    _installed = True
    from twisted.internet import defer, reactor

    def before_shutdown() -> Any:
        return defer.Deferred.fromFuture(asyncio.ensure_future(ashutdown()))

    # Registered "before" the server's own trigger fires its cancellations.
    cast(Any, reactor).addSystemEventTrigger("before", "shutdown", before_shutdown)


def _chain_signal_handlers() -> bool:
    """Put a handler that starts :func:`ashutdown` in front of the server's own SIGTERM and SIGINT ones.

    Only where the server installed Python handlers (a default or ignored signal stops nothing gracefully),
    from the main thread and the running loop. ``False`` when that is not where we are.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if threading.current_thread() is not threading.main_thread():
        return True  # signal handlers cannot be set from here: lifespan shutdown remains
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)
        if callable(previous) and previous is not signal.default_int_handler:
            signal.signal(signum, functools.partial(_on_signal, loop, previous))
    return True


def _on_signal(loop: asyncio.AbstractEventLoop, previous: Any, signum: int, frame: FrameType | None) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nothing is left to answer
        loop.call_soon_threadsafe(_start_shutdown)
    previous(signum, frame)


def _start_shutdown() -> None:
    global _signalled
    if _signalled is None:
        _signalled = asyncio.ensure_future(ashutdown())


class LifespanApp:
    """ASGI lifespan: nothing at startup; :func:`ashutdown` at shutdown."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                install_shutdown_hooks()  # the server's signal handlers are in place by now
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await ashutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
