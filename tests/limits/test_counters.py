"""Rate-limit rules and counters, on the local-memory cache and on a real Redis (127.0.0.1:6379)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache

from mcp_server.core.limit_rules import matching_rules, parse_rule, parse_rules
from mcp_server.protocol.limit_counters import count_calls, redis_client
from tests.support.wait import wait_for

REDIS_URL = "redis://127.0.0.1:6379/0"


def redis_cache() -> RedisCache:
    cache = RedisCache(REDIS_URL, {"KEY_PREFIX": f"rl-test-{uuid.uuid4().hex}"})
    try:
        cache.get("probe")
    except Exception as exc:  # pragma: no cover - the machine has no Redis
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    return cache


@pytest.fixture(params=["locmem", "redis"])
def cache(request: pytest.FixtureRequest) -> Any:
    if request.param == "locmem":
        return LocMemCache(f"rl-{uuid.uuid4().hex}", {})
    return redis_cache()


def test_a_rule_with_a_burst_is_two_windows() -> None:
    rule = parse_rule({"per": "user", "target": "tool:search_*", "rate": "600/hour", "burst": 10})
    assert [(w.kind, w.count, w.seconds) for w in rule.windows] == [("burst", 10, 60), ("rate", 600, 3600)]
    assert rule.name == "user tool:search_*"
    assert parse_rule({"per": "address", "rate": "5/10s"}).windows[0].seconds == 10


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"per": "user", "rate": "0/minute"}, "count must be between"),
        ({"per": "user", "rate": "-1/minute"}, "is not '<count>/<period>'"),
        ({"per": "user", "rate": "10/fortnight"}, "is not '<count>/<period>'"),
        ({"per": "user", "rate": "10/400d"}, "period must be between"),
        ({"per": "user", "rate": "99999999999/s"}, "count must be between"),
        ({"per": "user", "rate": "10/m", "burst": 0}, "burst 0"),
        ({"per": "user", "rate": "10/m", "burst": 11}, "burst 11"),
        ({"per": "everyone", "rate": "10/m"}, "per 'everyone'"),
        ({"per": "user", "rate": "10/m", "target": "widget:x"}, "target 'widget:x'"),
        ({"per": "user", "rate": "10/m", "colour": "red"}, "unknown keys"),
    ],
)
def test_bad_rules_are_refused(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match="rule 0: ") as caught:
        parse_rules([raw])
    assert problem in str(caught.value)


def test_matching_by_who_what_wildcards_and_default() -> None:
    rules = parse_rules(
        [
            {"per": "user", "target": "tool:search_*", "rate": "5/m"},
            {"per": "user", "target": "default", "rate": "50/m"},
            {"per": "address", "target": "*", "rate": "7/m"},
            {"per": "user", "target": "resource:file:///docs/*", "rate": "3/m"},
            {"per": "token", "target": "method:prompts/*", "rate": "2/m"},
        ]
    )
    user = frozenset({"user"})

    def names(method: str, params: dict[str, Any], pers: frozenset[str] = user) -> list[str]:
        return [r.target for r in matching_rules(rules, method, params, pers)]

    assert names("tools/call", {"name": "search_books"}) == ["tool:search_*"]
    assert names("tools/call", {"name": "reserve"}) == ["default"]
    assert names("resources/read", {"uri": "file:///docs/a"}) == ["resource:file:///docs/*"]
    assert names("prompts/get", {"name": "p"}, frozenset({"user", "token"})) == [
        "method:prompts/*",
        "default",
    ]
    assert names("tools/list", {}, frozenset({"address"})) == ["*"]


def test_counts_up_to_the_limit_then_refuses_with_the_time_left(cache: Any) -> None:
    windows = [("k-burst", 60), ("k-rate", 3600)]
    counts = [count_calls(cache, windows) for _ in range(4)]
    assert [[c for c, _ in row] for row in counts] == [[1, 1], [2, 2], [3, 3], [4, 4]]
    left_burst, left_rate = counts[-1][0][1], counts[-1][1][1]
    assert 58 < left_burst <= 60
    assert 3598 < left_rate <= 3600


async def test_a_window_ends_on_the_cache_side_and_counting_starts_again(cache: Any) -> None:
    assert count_calls(cache, [("short", 1)])[0][0] == 1
    assert count_calls(cache, [("short", 1)])[0][0] == 2

    async def reopened() -> bool:
        return count_calls(cache, [("short", 1)])[0][0] == 1

    await wait_for(reopened, "a new window", within=5, every=0.05)


def test_redis_counts_every_window_of_a_call_in_one_transaction() -> None:
    cache = redis_cache()
    found = redis_client(cache)
    assert found is not None
    client, make_key = found
    count_calls(cache, [("a", 30), ("b", 90)])
    assert int(client.get(make_key("a"))) == 1
    assert 0 < client.ttl(make_key("b")) <= 90
    assert redis_client(LocMemCache("x", {})) is None


def test_parallel_calls_are_counted_exactly(cache: Any) -> None:
    results: list[int] = []
    lock = threading.Lock()

    def call() -> None:
        count = count_calls(cache, [("par", 60)])[0][0]
        with lock:
            results.append(count)

    threads = [threading.Thread(target=call) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(1, 51))


async def test_the_counters_cache_is_one_client_for_the_process() -> None:
    """``caches[alias]`` in async code makes a client per task (Django keeps them per context), each with
    its own connection pool: a Redis connect per request. The counters (and the token cache, the events, the
    outbound routes) take the process's one client instead."""
    from django.core.cache import caches
    from django.test import override_settings

    from mcp_server.conf import process_cache

    async def clients() -> tuple[Any, Any]:
        return caches["fresh"], process_cache("fresh")

    fresh = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    with override_settings(CACHES={"default": fresh, "fresh": fresh}):  # no task has read "fresh" yet
        first, second = await asyncio.gather(asyncio.create_task(clients()), asyncio.create_task(clients()))
        assert first[0] is not second[0]  # what Django's handler does: one per task
        assert first[1] is second[1] is process_cache("fresh")
    assert process_cache("default") is not first[1]  # forgotten with the settings that made it
