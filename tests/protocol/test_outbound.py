"""The route of a server-to-client request in the shared cache (``aremember_route``), on the real Redis: it
names the waiting worker's channel, and lasts a day, so that a client answering late on another worker still
reaches the handler. (Resolving and forwarding answers: tests/core/test_context.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from mcp_server.protocol.outbound import aremember_route
from tests.support.live import REDIS_URL, redis_namespace, require_services

pytestmark = pytest.mark.asyncio

DAY = 24 * 3600


@pytest.fixture
def shared_cache(settings: Any) -> Iterator[tuple[redis.Redis, str]]:
    """``LEDGER_CACHE_ALIAS`` on the real Redis, under a prefix of this test's own; the raw client."""
    require_services()
    with redis_namespace() as prefix:
        settings.CACHES = {
            **settings.CACHES,
            "mcp-routes": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": REDIS_URL,
                "KEY_PREFIX": prefix,
            },
        }
        settings.MCP_SERVER = {**settings.MCP_SERVER, "LEDGER_CACHE_ALIAS": "mcp-routes"}
        client = redis.Redis.from_url(REDIS_URL)
        try:
            yield client, prefix
        finally:
            client.close()


async def test_a_route_names_the_channel_and_lasts_a_day(shared_cache: tuple[redis.Redis, str]) -> None:
    client, prefix = shared_cache
    await aremember_route("s-1", "srv-1", "worker-a-channel")
    keys = list(client.scan_iter(match=f"{prefix}*"))
    assert len(keys) == 1
    stored = client.get(keys[0])
    assert isinstance(stored, bytes)
    assert b"worker-a-channel" in stored
    assert DAY - 60 < client.ttl(keys[0]) <= DAY


async def test_no_route_without_a_channel_or_a_session(shared_cache: tuple[redis.Redis, str]) -> None:
    client, prefix = shared_cache
    await aremember_route("s-1", "srv-1", "")
    await aremember_route(None, "srv-2", "worker-a-channel")
    assert list(client.scan_iter(match=f"{prefix}*")) == []
