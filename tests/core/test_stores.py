"""``bounded`` (I11): a wait on a store gives up after its timeout, a store that cannot be reached is a
``StoreUnavailable``, and what piles up while a store hangs stays bounded."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import IntegrityError, OperationalError
from django.test import override_settings

from mcp_server.core.stores import StoreUnavailable, bounded, is_unavailable


async def never() -> None:
    await asyncio.Event().wait()


async def raising(exc: BaseException) -> None:
    raise exc


async def test_a_wait_gives_up_after_the_store_timeout() -> None:
    started = time.monotonic()
    with (
        override_settings(MCP_SERVER={"STORE_TIMEOUT": 0.1}),
        pytest.raises(
            StoreUnavailable, match=r"^Store unavailable: the database did not answer within 0\.1s$"
        ),
    ):
        await bounded(never(), "database")
    assert time.monotonic() - started < 1


@pytest.mark.parametrize(
    "error", [OperationalError("server closed the connection"), ConnectionRefusedError(), BrokenPipeError()]
)
async def test_a_store_out_of_reach_is_unavailable(error: Exception) -> None:
    with pytest.raises(StoreUnavailable, match=r"the cache cannot be reached") as caught:
        await bounded(raising(error), "cache", 1)
    assert caught.value.code == -32603
    assert is_unavailable(caught.value)


async def test_a_redis_that_does_not_answer_is_unavailable() -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    for error in (RedisConnectionError("refused"), RedisTimeoutError("read")):
        with pytest.raises(StoreUnavailable):
            await bounded(raising(error), "channel layer", 1)


@pytest.mark.parametrize("error", [IntegrityError("duplicate"), ValueError("NUL"), KeyError("x")])
async def test_what_a_store_refuses_goes_through_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)):
        await bounded(raising(error), "database", 1)
    assert not is_unavailable(error)


async def test_a_hung_orm_thread_piles_up_nothing() -> None:
    """Django's async ORM runs its calls in one thread: while a call hangs there, later calls wait in its
    queue. Each gives up after its timeout and leaves the queue: no thread is added, and nothing runs once
    the store answers again."""
    gate = threading.Event()
    ran: list[int] = []

    def hung() -> None:
        gate.wait(10)

    def later(n: int) -> None:
        ran.append(n)

    with pytest.raises(StoreUnavailable):
        await bounded(sync_to_async(hung)(), "database", 0.1)
    threads = threading.active_count()
    for n in range(20):
        with pytest.raises(StoreUnavailable):
            await bounded(sync_to_async(later)(n), "database", 0.02)
    assert threading.active_count() <= threads  # none added (one another test left may have ended meanwhile)
    await asyncio.sleep(0)  # one loop turn: the last wait's cancellation reaches its queued call
    gate.set()
    await sync_to_async(later)(-1)  # the thread is free again and runs what comes now
    assert ran == [-1]
