"""When an OAuth access token was last used, recorded cheaply: at most once a minute per token, behind.

Every MCP request authenticates, and a database write on each would put an ``UPDATE`` (and its row lock) on
the request path the ledger was moved off. So a use is written only when the token's ``updated`` (DOT's own
column, which nothing else changes after issue: a rotation issues a new row) is older than
:data:`INTERVAL`. The check costs nothing (the row is loaded to authenticate), a per-process table stops a
worker from writing twice in the interval even from a cached row, and ``cache.add`` makes one worker of
many win each interval. The write itself runs in a worker thread after the request has moved on; a write
that fails is only logged. The connected-apps page reads it as *last used*, to the minute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.utils import timezone

__all__ = ["INTERVAL", "note_use", "pending_writes"]

logger = logging.getLogger("mcp_server.oauth")

INTERVAL = 60.0
"""Seconds: *last used* is recorded at most this often per token."""

_MAX_REMEMBERED = 10_000
_written: dict[Any, float] = {}
"""Token pk → ``time.monotonic()`` of this process's last write of it."""
_tasks: set[asyncio.Task[None]] = set()


def _write(pk: Any) -> None:
    from oauth2_provider.models import get_access_token_model

    if not cache.add(f"mcp:oauth:used:{pk}", 1, int(INTERVAL)):
        return  # another worker wrote it in this interval
    get_access_token_model().objects.filter(pk=pk).update(updated=timezone.now())


async def _write_behind(pk: Any) -> None:
    try:
        await sync_to_async(_write, thread_sensitive=False)(pk)
    except Exception:
        logger.warning("could not record the use of an OAuth access token", exc_info=True)


def note_use(token: Any) -> None:
    """Record that ``token`` (DOT's ``AccessToken`` row) was used now, unless it was within ``INTERVAL``.

    Called on the event loop by the authentication class; never waits for the database."""
    updated = getattr(token, "updated", None)
    if updated is not None and timezone.now() - updated < timedelta(seconds=INTERVAL):
        return
    clock = time.monotonic()
    if clock - _written.get(token.pk, -INTERVAL) < INTERVAL:
        return
    if len(_written) >= _MAX_REMEMBERED:
        _written.clear()
    _written[token.pk] = clock
    task = asyncio.get_running_loop().create_task(_write_behind(token.pk), name="mcp oauth last used")
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def pending_writes() -> int:
    """How many uses are being written now (tests, shutdown)."""
    return len(_tasks)
