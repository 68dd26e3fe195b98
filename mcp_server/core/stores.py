"""Waiting on a store (the database, the cache, the channel layer) without hanging: I11, faults are bounded.

Every wait on a store on the request path goes through :func:`bounded`: it gives up after
``MCP_SERVER["STORE_TIMEOUT"]`` seconds, and it turns the store's own "I cannot answer" errors (a refused
connection, a broken one, a socket timeout) into :class:`StoreUnavailable`, which the transports answer with
an error: a JSON-RPC error for a request id, HTTP 503 where no request can be answered.

What giving up does not do is stop the wait's thread: a synchronous ORM or cache call keeps running in its
executor thread until the store answers (Django's ORM runs in one thread per process; the ledger writer in one
thread of its own). What piles up is bounded that way, and by the store clients' own socket timeouts (see the
docs/howto/deploy.md: ``connect_timeout`` for PostgreSQL, ``socket_timeout`` for Redis).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections

from ..conf import mcp_settings
from ..wire.errors import INTERNAL_ERROR, JSONRPCError

__all__ = ["CHANNEL_LAYER", "StoreUnavailable", "bounded", "is_unavailable", "store_timeout"]

CHANNEL_LAYER = "channel layer"
"""The ``store`` :func:`bounded` names for a wait on the Channels layer (in its error and the logs)."""

logger = logging.getLogger("mcp_server.stores")

T = TypeVar("T")

try:  # redis is optional: only a site on Redis can get its errors
    from redis.exceptions import ConnectionError as _RedisConnectionError
    from redis.exceptions import TimeoutError as _RedisTimeoutError

    _REDIS_ERRORS: tuple[type[BaseException], ...] = (_RedisConnectionError, _RedisTimeoutError)
except ImportError:  # pragma: no cover - redis is installed wherever these tests run
    _REDIS_ERRORS = ()

_DATABASE_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)
_UNAVAILABLE: tuple[type[BaseException], ...] = (OSError, *_DATABASE_ERRORS, *_REDIS_ERRORS)


class StoreUnavailable(JSONRPCError):
    """A store did not answer in time, or could not be reached: the request is answered with this error."""

    def __init__(self, store: str, detail: str) -> None:
        super().__init__(INTERNAL_ERROR, f"Store unavailable: the {store} {detail}")
        self.store = store


def store_timeout() -> float:
    """``MCP_SERVER["STORE_TIMEOUT"]``: the longest wait on a store, in seconds."""
    return float(mcp_settings.STORE_TIMEOUT)


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says that a store could not answer (as opposed to refusing what it was given)."""
    return isinstance(exc, (StoreUnavailable, *_UNAVAILABLE))


async def bounded(awaitable: Awaitable[T], store: str, seconds: float | None = None) -> T:
    """Await ``awaitable`` for at most ``seconds`` (default ``STORE_TIMEOUT``).

    Raises :class:`StoreUnavailable` when it takes longer or the ``store`` cannot be reached; any other
    error (a duplicate key, a value the store refuses) goes through unchanged.
    """
    limit = store_timeout() if seconds is None else seconds
    try:
        async with asyncio.timeout(limit):
            return await awaitable
    except TimeoutError:
        raise StoreUnavailable(store, f"did not answer within {limit:g}s") from None
    except _UNAVAILABLE as exc:
        if isinstance(exc, _DATABASE_ERRORS):
            await _drop_broken_connection(limit)
        raise StoreUnavailable(store, f"cannot be reached ({type(exc).__name__})") from exc


async def _drop_broken_connection(limit: float) -> None:
    """Close the ORM thread's database connection if it broke (a restarted server), so that the next
    query opens a new one: nothing else does it for a Channels consumer, which serves no Django request."""
    call: Any = sync_to_async(close_old_connections)
    try:
        async with asyncio.timeout(limit):
            await call()
    except Exception:  # the next failure tries again
        logger.debug("could not reset the database connection", exc_info=True)
