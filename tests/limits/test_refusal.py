"""``rate_refusal``: who a caller is, no cache call for what no rule counts, and a cache that fails."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.cache import caches
from django.test import RequestFactory, override_settings

from mcp_server.core.context import Context
from mcp_server.protocol import rate_limit
from mcp_server.protocol.rate_limit import caller_keys, rate_refusal

RULE = {"per": "address", "target": "tool:echo", "rate": "1/minute", "name": "echo"}


def context(method: str = "tools/call", params: dict[str, Any] | None = None, user: Any = None) -> Context:
    request = RequestFactory().post("/mcp", REMOTE_ADDR="10.1.2.3")
    return Context(
        server=cast(Any, None),
        session=cast(Any, None),
        request_id=1,
        method=method,
        params={"name": "echo"} if params is None else params,
        peer=cast(Any, None),
        request=request,
        user=user if user is not None else AnonymousUser(),
    )


def limits(**keys: Any) -> Any:
    from django.conf import settings

    return override_settings(MCP_SERVER={**settings.MCP_SERVER, "RATE_LIMITS": [RULE], **keys})


class SignedIn:
    is_authenticated = True
    pk = 5


def test_who_a_caller_is() -> None:
    assert caller_keys(context()) == {"address": "a:10.1.2.3"}
    assert caller_keys(context(user=SignedIn())) == {"user": "u:5"}


async def test_a_request_no_rule_counts_touches_no_cache() -> None:
    with limits(RATE_LIMIT_CACHE_ALIAS="no-such-cache"):  # reading it would raise
        assert await rate_refusal(context(params={"name": "search_books"})) is None
        assert await rate_refusal(context(method="tools/list", params={})) is None
        assert await rate_refusal(context(user=SignedIn())) is None  # the rule is per address


async def test_counted_then_refused_on_the_local_memory_cache() -> None:
    caches["default"].clear()
    with limits():
        assert await rate_refusal(context()) is None
        refused = await rate_refusal(context())
    assert refused is not None
    assert refused.code == -31429
    assert refused.data["limit"]["name"] == "echo"
    assert 55 <= refused.data["retryAfter"] <= 60


@pytest.fixture
def dead_redis() -> dict[str, Any]:
    """A cache on a port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": f"redis://127.0.0.1:{port}/0",
    }


@pytest.fixture
def stalled_redis() -> Iterator[dict[str, Any]]:
    """A cache whose server accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    options = {"socket_timeout": 3}
    yield {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": f"redis://127.0.0.1:{port}/0",
        "OPTIONS": options,
    }
    server.close()


def with_cache(alias_settings: dict[str, Any]) -> Any:
    from django.conf import settings

    return override_settings(CACHES={**settings.CACHES, "limits": alias_settings})


async def test_a_cache_that_is_down_fails_open_and_warns_once_a_minute(
    dead_redis: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rate_limit, "_last_warning", -rate_limit.WARN_EVERY)
    with (
        with_cache(dead_redis),
        limits(RATE_LIMIT_CACHE_ALIAS="limits"),
        caplog.at_level(logging.WARNING, "mcp_server.requests"),
    ):
        assert await rate_refusal(context()) is None
        assert await rate_refusal(context()) is None
    warnings = [r for r in caplog.records if "rate limits cannot be counted" in r.getMessage()]
    assert len(warnings) == 1
    assert "let through" in warnings[0].getMessage()


async def test_a_cache_that_is_down_fails_closed_when_set(dead_redis: dict[str, Any]) -> None:
    with with_cache(dead_redis), limits(RATE_LIMIT_CACHE_ALIAS="limits", RATE_LIMIT_FAIL_OPEN=False):
        refused = await rate_refusal(context())
    assert refused is not None
    assert refused.data == {"limit": None, "retryAfter": 1}
    assert refused.message == "Rate limits cannot be checked now; retry after 1 seconds"


async def test_a_stalled_cache_is_given_up_after_store_timeout(stalled_redis: dict[str, Any]) -> None:
    with with_cache(stalled_redis), limits(RATE_LIMIT_CACHE_ALIAS="limits", STORE_TIMEOUT=0.5):
        started = time.monotonic()
        assert await asyncio.wait_for(rate_refusal(context()), 5) is None
        assert time.monotonic() - started < 2


async def test_the_warning_comes_again_a_minute_later(
    dead_redis: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rate_limit, "_last_warning", -rate_limit.WARN_EVERY)
    with (
        with_cache(dead_redis),
        limits(RATE_LIMIT_CACHE_ALIAS="limits", RATE_LIMIT_FAIL_OPEN=False),
        caplog.at_level(logging.WARNING, "mcp_server.requests"),
    ):
        for _ in range(3):
            assert await rate_refusal(context()) is not None
        monkeypatch.setattr(rate_limit, "_last_warning", rate_limit._last_warning - rate_limit.WARN_EVERY)
        assert await rate_refusal(context()) is not None  # a minute after the first warning
    warnings = [r.getMessage() for r in caplog.records if "rate limits cannot be counted" in r.getMessage()]
    assert len(warnings) == 2
    assert all("limited requests are refused" in w for w in warnings)


async def test_a_stalled_cache_refuses_within_store_timeout_when_failing_closed(
    stalled_redis: dict[str, Any],
) -> None:
    with (
        with_cache(stalled_redis),
        limits(RATE_LIMIT_CACHE_ALIAS="limits", RATE_LIMIT_FAIL_OPEN=False, STORE_TIMEOUT=0.5),
    ):
        started = time.monotonic()
        refused = await asyncio.wait_for(rate_refusal(context()), 5)
        assert time.monotonic() - started < 2
    assert refused is not None
    assert refused.data == {"limit": None, "retryAfter": 1}
