"""Graceful shutdown: on SIGTERM (Daphne) or ASGI lifespan shutdown, answer every in-flight request.

Each request the worker holds is settled with -32000 "Connection closed: server shutting down", every open
response is finished, the ledger is flushed, and the worker waits for that at most ``SHUTDOWN_GRACE``
seconds (see :meth:`~mcp_server.runtime.Runtime.ashutdown`).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, cast

from ..runtime import Runtime, get_runtime

__all__ = ["LifespanApp", "install_shutdown_hooks"]


def install_shutdown_hooks(runtime: Runtime) -> None:
    """Under Daphne (Twisted), run the runtime's shutdown before the reactor kills the applications."""
    if runtime._twisted_hook or "twisted.internet.reactor" not in sys.modules:
        return
    runtime._twisted_hook = True
    from twisted.internet import defer, reactor

    def before_shutdown() -> Any:
        return defer.Deferred.fromFuture(asyncio.ensure_future(runtime.ashutdown()))

    # Registered "before" the server's own trigger fires its cancellations.
    cast(Any, reactor).addSystemEventTrigger("before", "shutdown", before_shutdown)


class LifespanApp:
    """ASGI lifespan: start the runtime at startup; its graceful shutdown at shutdown."""

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        runtime = self.runtime if self.runtime is not None else get_runtime()
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await runtime.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await runtime.ashutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
