"""The admin's *Current usage* page: each caller's count against each limit, read from the cache counters
(a real Redis at 127.0.0.1:6379, and the local-memory cache), who is refused now first."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client, override_settings

from mcp_server.admin_limits import usage_rows
from mcp_server.models import RateLimit
from mcp_server.protocol.rate_limit import rate_refusal
from tests.limits.test_counters import REDIS_URL, redis_cache
from tests.limits.test_refusal import context

pytestmark = pytest.mark.django_db

USAGE = "/admin/mcp_server/ratelimit/usage/"
ECHO = {"per": "address", "target": "tool:echo", "rate": "1/minute", "name": "echo"}
USERS = {"per": "user", "target": "*", "rate": "100/hour", "burst": 10, "name": "users"}
DAILY = {"per": "user", "target": "tool:*", "quota": 50, "period": "day", "name": "daily"}


@pytest.fixture(params=["locmem", "redis"])
def counters(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "redis":
        redis_cache()  # skips without a Redis
        cache = {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": f"usage-{uuid.uuid4().hex}",
        }
    else:
        cache = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    mcp = {
        **settings.MCP_SERVER,
        "RATE_LIMITS": [ECHO, USERS],
        "QUOTAS": [DAILY],
        "RATE_LIMIT_CACHE_ALIAS": "limits",
    }
    with override_settings(CACHES={**settings.CACHES, "limits": cache}, MCP_SERVER=mcp):
        yield request.param


def calls(user: Any = None, times: int = 1, tool: str = "echo") -> None:
    for _ in range(times):
        async_to_sync(rate_refusal)(context(params={"name": tool}, user=user))


def test_each_caller_against_each_limit_refused_first(
    counters: str, admin_client: Client, django_user_model: Any
) -> None:
    dora = django_user_model.objects.create_user(username="dora")
    calls(times=3)  # anonymous 10.1.2.3: 3 against 1 a minute
    calls(user=dora, times=4, tool="search_books")
    rows = usage_rows()[0]
    got = [(r["who"], r["limit"], r["window"], r["count"], r["of"], r["refused"]) for r in rows]
    assert sorted(got[1:]) == [
        ("user dora", "daily", "day", 4, 50, False),
        ("user dora", "users", "burst", 4, 10, False),
        ("user dora", "users", "rate", 4, 100, False),
    ]
    assert got[0] == ("address 10.1.2.3", "echo", "rate", 3, 1, True)
    assert all(r["left"] is not None and 0 <= r["left"] <= 86400 for r in rows)
    page = admin_client.get(USAGE)
    assert page.status_code == 200
    text = page.content.decode()
    assert '<strong id="mcp-usage-refused">1</strong> refused now' in text
    assert "address 10.1.2.3" in text
    assert "user dora" in text
    assert "mcp-usage-refused" in text


def test_a_counter_of_a_rule_no_longer_in_force_is_named_so(counters: str) -> None:
    calls(times=1)
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "RATE_LIMITS": [USERS], "QUOTAS": None}):
        (row,) = usage_rows()[0]
    assert row["limit"].startswith("(a rule no longer in force: ")
    assert (row["of"], row["refused"]) == (None, False)


def test_an_admin_row_in_force_names_the_counters(counters: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_server.protocol import rate_limit

    monkeypatch.setattr(rate_limit._Rows, "read_at", -float("inf"))
    monkeypatch.setattr(rate_limit._Rows, "rows", ())
    RateLimit.objects.create(name="echo row", per="address", target="tool:echo", rate="1/minute")
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "RATE_LIMITS": None, "RATE_LIMIT_RELOAD": 5.0}):
        calls(times=2)
        rows = usage_rows()[0]
    assert [(r["limit"], r["count"], r["of"], r["refused"]) for r in rows] == [("echo row", 2, 1, True)]


def test_a_cache_that_cannot_list_its_keys_says_so(admin_client: Client) -> None:
    dummy = {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
    mcp = {**settings.MCP_SERVER, "RATE_LIMITS": [ECHO], "RATE_LIMIT_CACHE_ALIAS": "limits"}
    with override_settings(CACHES={**settings.CACHES, "limits": dummy}, MCP_SERVER=mcp):
        page = admin_client.get(USAGE)
    assert page.status_code == 200
    assert "cannot list its keys" in page.content.decode()


def test_the_changelist_links_the_page_and_only_viewers_may_open_it(
    admin_client: Client, django_user_model: Any
) -> None:
    listing = admin_client.get("/admin/mcp_server/ratelimit/")
    assert f'href="{USAGE}"' in listing.content.decode()
    staff = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(USAGE).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_ratelimit"))
    assert client.get(USAGE).status_code == 200


def test_the_change_lists_say_when_no_worker_reads_the_rows(admin_client: Client) -> None:
    for path in ("/admin/mcp_server/ratelimit/", "/admin/mcp_server/quota/"):
        with override_settings(MCP_SERVER={**settings.MCP_SERVER, "RATE_LIMIT_RELOAD": None}):
            assert "the workers do not read these rows" in admin_client.get(path).content.decode()
        with override_settings(MCP_SERVER={**settings.MCP_SERVER, "RATE_LIMIT_RELOAD": 5.0}):
            assert "the workers do not read these rows" not in admin_client.get(path).content.decode()
