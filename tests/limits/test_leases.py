"""Leases of rate-limit counts (``mcp_server.protocol.limit_leases``): a worker far from a window's limit
takes several of its calls in one round trip; near the limit, and for any limit of up to 256 calls, it
counts call by call. Two workers are two ``Leases`` on one shared cache (the local-memory cache and a real
Redis), driven through ``rate_refusal`` itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_server.conf import process_cache
from mcp_server.protocol import rate_limit
from mcp_server.protocol.limit_leases import LEASE_DIVISOR, Leases
from mcp_server.protocol.rate_limit import KEY_PREFIX, rate_refusal
from tests.limits.test_counters import REDIS_URL, redis_cache
from tests.limits.test_refusal import context


def test_a_window_is_counted_call_by_call_until_it_has_far_to_go() -> None:
    leases = Leases()
    assert leases.size("w", 10**6, 64) == 1  # nothing seen yet: the first call is counted alone
    assert leases.granted("w", 1, 1, 10**6, 60.0, now=0.0)
    assert leases.size("w", 10**6, 64) == 64  # 999,999 to go: 64 at once
    assert leases.size("w", 10**6, 8) == 8  # RATE_LIMIT_LEASE caps it
    assert leases.size("w", 10**6, 1) == 1
    assert leases.granted("w", 1, 250, 256, 60.0, now=0.0)
    assert leases.size("w", 256, 64) == 1  # a limit of 256 is always counted call by call
    assert leases.granted("w", 1, 10 * LEASE_DIVISOR, 12 * LEASE_DIVISOR, 60.0, now=0.0)
    assert leases.size("w", 12 * LEASE_DIVISOR, 64) == 2  # 2 x 256 to go


def test_a_lease_lets_its_calls_through_until_it_is_used_or_its_window_nearly_over() -> None:
    leases = Leases()
    assert leases.granted("w", 4, 4, 1000, 10.0, now=100.0)  # this call and 3 more
    assert [leases.take("w", now=100.0) for _ in range(4)] == [2, 1, 0, None]
    assert leases.granted("w", 4, 8, 1000, 10.0, now=100.0)
    assert leases.take("w", now=108.9) == 2  # the second lease: three calls after the one that asked
    assert leases.take("w", now=109.0) is None  # void 1 s (or a tenth) before the window's counter expires
    assert leases.take("w", now=109.0) is None
    assert leases.take("unknown") is None


def test_only_the_calls_under_the_limit_are_leased() -> None:
    leases = Leases()
    assert leases.granted("w", 8, 13, 10, 60.0, now=0.0)  # 5 were counted before: 5 of the 8 fit
    assert [leases.take("w", now=0.0) for _ in range(5)] == [3, 2, 1, 0, None]
    assert not leases.granted("w", 1, 14, 10, 60.0, now=0.0)  # over: refused, nothing leased
    assert leases.take("w", now=0.0) is None


def test_a_process_keeps_a_bounded_number_of_leases() -> None:
    leases = Leases(most_held=3)
    for n in range(10):
        leases.granted(f"w{n}", 2, 2, 1000, 60.0, now=0.0)
    assert len(leases) == 3
    assert leases.take("w9", now=0.0) == 0
    assert leases.take("w0", now=0.0) is None  # the oldest were forgotten


@pytest.fixture(params=["locmem", "redis"])
def shared(request: pytest.FixtureRequest) -> Iterator[str]:
    """A cache alias both "workers" count in (Redis: a prefix of its own)."""
    if request.param == "redis":
        redis_cache()  # skips without Redis
        prefix = f"rl-lease-{uuid.uuid4().hex}"
        config: dict[str, Any] = {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": prefix,
        }
    else:
        config = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    with override_settings(CACHES={**settings.CACHES, "limits": config}):
        yield "limits"


def limited(alias: str, rate: str, lease: int = 64) -> Any:
    rule = {"per": "address", "target": "tool:echo", "rate": rate, "name": "echo"}
    merged = {
        **settings.MCP_SERVER,
        "RATE_LIMITS": [rule],
        "RATE_LIMIT_CACHE_ALIAS": alias,
        "RATE_LIMIT_LEASE": lease,
    }
    return override_settings(MCP_SERVER=merged)


async def calls_let_through(workers: list[Leases], calls: int) -> int:
    """``calls`` calls, taking turns on the workers; how many ran."""
    through = 0
    for n in range(calls):
        rate_limit._Leased.leases = workers[n % len(workers)]
        through += await rate_refusal(context()) is None
    return through


@pytest.fixture
def two_workers() -> Iterator[list[Leases]]:
    mine = rate_limit._Leased.leases
    yield [Leases(), Leases()]
    rate_limit._Leased.leases = mine


@pytest.mark.parametrize("limit", [1, 50, 256, 300])
async def test_two_workers_let_exactly_a_small_limit_through(
    shared: str, two_workers: list[Leases], limit: int
) -> None:
    with limited(shared, f"{limit}/hour"):
        assert await calls_let_through(two_workers, limit + 40) == limit


async def test_a_large_limit_is_leased_and_never_exceeded(shared: str, two_workers: list[Leases]) -> None:
    """Far from its limit a window costs a round trip per lease, not per call; whatever the interleaving, no
    more than the limit runs, and calls leased but never made are at most a 256th of what was left."""
    limit = 40_000
    with limited(shared, f"{limit}/hour"):
        assert await calls_let_through(two_workers, 2_000) == 2_000
        key = next(k for k in two_workers[0]._held if k.startswith(KEY_PREFIX))
        counted = int(process_cache(shared).get(key))
        assert 2_000 < counted <= 2_000 + 2 * 2 * 64  # a worker holds a lease and the next, asked ahead
        through = await calls_let_through(two_workers, limit)
    assert limit - 2_000 - 2 * (limit // LEASE_DIVISOR) <= through <= limit - 2_000


async def test_a_lease_of_one_counts_every_call(shared: str, two_workers: list[Leases]) -> None:
    with limited(shared, "40000/hour", lease=1):
        assert await calls_let_through(two_workers, 500) == 500
        key = next(k for k in two_workers[0]._held if k.startswith(KEY_PREFIX))
        assert int(process_cache(shared).get(key)) == 500
