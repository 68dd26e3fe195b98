"""The one wait on a condition nothing announces: poll it until it holds, fail after a deadline.

Polling, not an event: what a test waits for here (a ledger row, a lease, a worker's in-flight table, a
process's file descriptor) lives in a database, Redis, another process or the kernel, none of which tells
anyone when it changes; asking again is the only way to see it. The deadline makes a condition that never
comes a failure naming what was awaited, not a hang. Where an event exists, wait on the event instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

__all__ = ["wait_for"]

T = TypeVar("T")


async def wait_for(
    check: Callable[[], Awaitable[T | None]], what: str = "", *, within: float = 10.0, every: float = 0.01
) -> T:
    """Await ``check()`` every ``every`` seconds until it returns something truthy, and return that; fail
    the test after ``within`` seconds, naming ``what`` (default: the check's name).

    A check that blocks (a subprocess, a file database) runs in a thread: ``lambda: asyncio.to_thread(f)``.
    """
    try:
        async with asyncio.timeout(within):
            while not (value := await check()):  # noqa: ASYNC110 - the state signals nothing (see above)
                await asyncio.sleep(every)
    except TimeoutError:
        pytest.fail(f"timed out after {within}s waiting for {what or getattr(check, '__qualname__', check)}")
    return value
