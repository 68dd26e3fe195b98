"""The two workers of the settlement scenarios (tests/support/settlement.py), on each ledger backend."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.cache import caches
from django.db import connection, connections

from mcp_server.conf import mcp_settings
from tests.support.services_rerun import ON_SERVICES
from tests.support.settlement import (
    BACKENDS,
    GATES,
    WRITE_BEHIND,
    World,
    leave_stuck_tasks_behind,
    new_session,
    new_worker,
    stop_worker,
)


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, settings: Any) -> str:
    settings.MCP_SERVER = {
        **settings.MCP_SERVER,
        "LEDGER_BACKEND": BACKENDS[request.param],
        # No lease runs out unless a test says so (``lease_runs_out``); the tests settle orphans themselves.
        "LEASE_TIMEOUT": 3600.0,
    }
    settings.CHANNEL_LAYERS = copy.deepcopy(settings.CHANNEL_LAYERS)  # a fresh layer, in this test's loop
    cache = caches[mcp_settings.LEDGER_CACHE_ALIAS]
    if ON_SERVICES:  # prove the child really runs on the services (its keys are under its own prefix)
        assert connection.vendor == "postgresql"
        assert type(cache).__name__ == "RedisCache"
        assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    else:
        assert type(cache).__name__ == "LocMemCache"
        assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"
        cache.clear()
    return str(request.param)


@pytest.fixture
def flush(request: pytest.FixtureRequest) -> float:
    """``LEDGER_FLUSH_INTERVAL`` of both workers (parametrized indirectly)."""
    return float(getattr(request, "param", WRITE_BEHIND))


@pytest.fixture
async def world(backend: str, flush: float) -> AsyncIterator[World]:
    a, b = await new_worker("a", flush), await new_worker("b", flush)
    world = World(await new_session(), a, b, backend)
    yield world
    for gate in GATES.values():  # no handler thread outlives its test
        gate.open()
    for worker in (a, b, *world.others):
        await stop_worker(worker)
    GATES.clear()
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if hasattr(layer, "close_pools"):
        await layer.close_pools()
    # The ORM thread's connection (sessions are rows whatever the ledger), so that PostgreSQL can drop the
    # test database.
    await sync_to_async(connections.close_all)()
    await leave_stuck_tasks_behind()
