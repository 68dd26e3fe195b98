"""Graceful shutdown: on SIGTERM or SIGINT (Daphne, Uvicorn) or ASGI lifespan shutdown, answer every
in-flight request.

Each request the worker holds is settled with -32000 "Connection closed: server shutting down", every open
response is finished, the ledger's last batch is written, and the worker waits for that at most
``SHUTDOWN_GRACE`` seconds (see :meth:`~mcp_server.runtime.Runtime.ashutdown`).

Uvicorn sends lifespan shutdown only once every open response is complete: a slow request, or a GET
stream a client keeps open, would hold its exit for as long as they last. So under a server that stops
gracefully on its own signal handler, the shutdown starts when the signal arrives (the server's handler
still runs, after ours has scheduled the shutdown).

Whatever its threads are doing, a worker told to stop by a signal ends within ``SHUTDOWN_GRACE`` plus
``STORE_TIMEOUT`` (the ledger's last batch) and a margin of :data:`EXIT_MARGIN`: a handler's thread still
blocked then (a sync tool in a long call, a transaction waiting for a lock) would hold the interpreter's exit,
which joins its threads; the watchdog armed by the signal ends the process instead (exit status 1, a line in
the log naming the threads still running).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any, cast

from ..conf import mcp_settings
from ..runtime import Runtime, get_runtime

__all__ = ["EXIT_MARGIN", "LifespanApp", "arm_exit_watchdog", "install_shutdown_hooks"]

logger = logging.getLogger("mcp_server.shutdown")

EXIT_MARGIN = 2.0
"""Seconds the watchdog allows past ``SHUTDOWN_GRACE + STORE_TIMEOUT`` for the server's own exit."""


def arm_exit_watchdog(runtime: Runtime) -> None:
    """End the process ``SHUTDOWN_GRACE + STORE_TIMEOUT + EXIT_MARGIN`` seconds from now if it still runs
    (once per runtime; a daemon thread, gone with a process that exits on its own)."""
    if runtime.exit_watchdog is not None:
        return
    limit = float(mcp_settings.SHUTDOWN_GRACE) + float(mcp_settings.STORE_TIMEOUT) + EXIT_MARGIN
    watchdog = threading.Timer(limit, _hard_exit, args=(limit, time.monotonic()))
    watchdog.daemon = True
    watchdog.name = "mcp-exit-watchdog"
    runtime.exit_watchdog = watchdog
    watchdog.start()


def _hard_exit(limit: float, since: float) -> None:
    busy = sorted(
        t.name for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon
    )
    logger.error(
        "still running %.1fs after the signal to stop (limit %.1fs): exiting now; threads still busy: %s",
        time.monotonic() - since,
        limit,
        ", ".join(busy) or "none",
    )
    for handler in logging.getLogger().handlers + logger.handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(1)


def install_shutdown_hooks(runtime: Runtime) -> None:
    """Run the runtime's shutdown as soon as the server starts stopping (call it from the server's loop).

    Under Daphne (the Twisted reactor runs), before the reactor kills the applications; under a server
    that handles SIGTERM and SIGINT with handlers of its own (Uvicorn), when the signal arrives.
    """
    if runtime.shutdown_hooked:
        return
    # The ``daphne`` app imports the reactor whatever the server, so its presence proves nothing.
    twisted = sys.modules.get("twisted.internet.reactor")
    if twisted is None or not getattr(twisted, "running", False):
        runtime.shutdown_hooked = _chain_signal_handlers(runtime)
        return
    runtime.shutdown_hooked = True
    from twisted.internet import defer, reactor

    def before_shutdown() -> Any:
        arm_exit_watchdog(runtime)
        return defer.Deferred.fromFuture(asyncio.ensure_future(runtime.ashutdown()))

    # Registered "before" the server's own trigger fires its cancellations.
    cast(Any, reactor).addSystemEventTrigger("before", "shutdown", before_shutdown)


def _chain_signal_handlers(runtime: Runtime) -> bool:
    """Put a handler that starts the shutdown in front of the server's own SIGTERM and SIGINT ones.

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
            signal.signal(signum, functools.partial(_on_signal, runtime, loop, previous))
    return True


def _on_signal(
    runtime: Runtime, loop: asyncio.AbstractEventLoop, previous: Any, signum: int, frame: FrameType | None
) -> None:
    arm_exit_watchdog(runtime)
    with contextlib.suppress(RuntimeError):  # the loop is closed: nothing is left to answer
        loop.call_soon_threadsafe(runtime.start_shutdown)
    previous(signum, frame)


class LifespanApp:
    """ASGI lifespan: the runtime starts (signals hooked) at startup and shuts down gracefully at the end."""

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime = self.runtime if self.runtime is not None else get_runtime()
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await runtime.start()
                install_shutdown_hooks(runtime)  # the server's signal handlers are in place by now
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await runtime.ashutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
