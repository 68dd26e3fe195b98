"""A live server whose rate-limit cache is down or stalls: limited calls are let through (the default) or
refused (``RATE_LIMIT_FAIL_OPEN = False``), one warning is logged, and no call waits past
``STORE_TIMEOUT``."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from mcp import Client, MCPError

from tests.support.live import LiveServer
from tests.support.wait import wait_for

ECHO = {"per": "address", "target": "tool:echo", "rate": "1/hour", "name": "echo"}
WARNING = "rate limits cannot be counted"


def redis_at(port: int) -> str:
    cache = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": f"redis://127.0.0.1:{port}/0",
        "OPTIONS": {"socket_timeout": 60, "socket_connect_timeout": 60},  # only STORE_TIMEOUT bounds a call
    }
    return json.dumps(cache)


@pytest.fixture
def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def stalled_port() -> Iterator[int]:
    """A server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(5)
    for connection in held:
        connection.close()
    listener.close()


def warnings(server: LiveServer) -> list[str]:
    """The warnings about the cache in the server's log (the site's handler writes each record once with
    its level; the root handler once more, bare)."""
    return [line for line in server.log().splitlines() if WARNING in line and "WARNING" in line]


def limited_by(port: int, **overrides: Any) -> tuple[dict[str, Any], dict[str, str]]:
    settings = {"RATE_LIMITS": [ECHO], "RATE_LIMIT_CACHE_ALIAS": "limits", **overrides}
    return settings, {"MCP_TEST_LIMITS_CACHE": redis_at(port)}


async def test_a_cache_that_is_down_lets_calls_through_and_warns_once(
    start: Callable[..., LiveServer], dead_port: int
) -> None:
    settings, env = limited_by(dead_port)
    server = start(settings, **env)
    async with Client(server.url) as client:
        for _ in range(4):  # over the limit, were it counted
            assert not (await client.call_tool("echo", {"text": "hi"})).is_error

    async def logged() -> list[str] | None:
        return warnings(server) or None

    (warning,) = await wait_for(logged, "the warning")  # once a minute at most
    assert "limited requests are let through" in warning


async def test_a_cache_that_is_down_refuses_limited_calls_when_set(
    start: Callable[..., LiveServer], dead_port: int
) -> None:
    settings, env = limited_by(dead_port, RATE_LIMIT_FAIL_OPEN=False)
    server = start(settings, **env)
    async with Client(server.url) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "hi"})
        assert not (await client.call_tool("search_books", {"query": "x"})).is_error  # no limit: no cache
    assert refused.value.code == -31429
    assert refused.value.data == {"limit": None, "retryAfter": 1}
    (warning,) = warnings(server)
    assert "limited requests are refused" in warning


async def test_a_stalled_cache_holds_no_call_past_store_timeout(
    start: Callable[..., LiveServer], stalled_port: int
) -> None:
    settings, env = limited_by(stalled_port, STORE_TIMEOUT=1.0)
    server = start(settings, **env)
    async with Client(server.url) as client:
        took = []
        for _ in range(3):
            began = time.monotonic()
            assert not (await client.call_tool("echo", {"text": "hi"})).is_error  # let through (open)
            took.append(time.monotonic() - began)
    assert all(0.9 <= t < 1.0 + 9 for t in took), (
        took
    )  # the bound (and a loaded machine), not the socket's 60 s
    assert len(warnings(server)) == 1
