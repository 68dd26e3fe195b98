"""System checks (the ``mcp_server.checks`` package): every ``mcp_server.E0xx`` / ``W0xx`` fires on a bad
setting and stays silent on a good one, through Django's own check runner and ``manage.py check``."""

from __future__ import annotations

import importlib
import sys
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from mcp_server.conf import DEFAULTS
from mcp_server.wire.v2026_07_28 import CACHEABLE_METHODS

REDIS = "channels_redis.core.RedisChannelLayer"
MEMORY = {"BACKEND": "channels.layers.InMemoryChannelLayer"}
GOOD_MIDDLEWARE = "tests.testapp.middleware.count_calls"

# Django 6's model checks ask the database whether it supports JSONField: a full check run reads it.
pytestmark = pytest.mark.django_db


def mcp_messages(**overrides: Any) -> list[tuple[str, bool]]:
    """``(id, is an error)`` of the ``mcp_server`` messages of a full check run with these settings."""
    with override_settings(**overrides):
        messages = run_checks()
    return sorted((str(m.id), m.is_serious()) for m in messages if str(m.id).startswith("mcp_server."))


def mcp_ids(**overrides: Any) -> list[str]:
    found = mcp_messages(**overrides)
    for check_id, serious in found:
        assert serious == (check_id[len("mcp_server.")] == "E"), check_id  # E is an error, W a warning
    return [check_id for check_id, _ in found]


def with_mcp(**keys: Any) -> dict[str, Any]:
    """The test site's ``MCP_SERVER`` with some keys changed."""
    return {**settings.MCP_SERVER, **keys}


def test_the_test_site_passes_every_check() -> None:
    assert mcp_ids() == []
    assert mcp_ids(DEBUG=False) == []


# -- checks/settings, stores, redis -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["json", 5, ["RESPONSE_MODE"], None])
def test_e000_mcp_server_is_not_a_dict(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=value) == ["mcp_server.E000"]


def test_e000_an_empty_dict_is_fine() -> None:
    assert mcp_ids(MCP_SERVER={}) == []


def test_e001_unknown_keys() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(RESPONSE_MOD="json", PAGESIZE=2)) == ["mcp_server.E001"] * 2
    with override_settings(MCP_SERVER=with_mcp(RESPONSE_MOD="json")):
        (message,) = [m for m in run_checks() if m.id == "mcp_server.E001"]
    assert message.msg == "MCP_SERVER has an unknown key 'RESPONSE_MOD'."


@pytest.mark.parametrize(
    ("value", "expected"), [("stream", ["mcp_server.E002"]), ("JSON", ["mcp_server.E002"])]
)
def test_e002_response_mode(value: str, expected: list[str]) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(RESPONSE_MODE=value)) == expected


@pytest.mark.parametrize("value", ["auto", "sse", "json"])
def test_e002_silent_for_each_mode(value: str) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(RESPONSE_MODE=value)) == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"MCP_SERVER": with_mcp(CHANNEL_LAYER="elsewhere")},
        {"MCP_SERVER": with_mcp(CHANNEL_LAYER=["default"])},
        {"CHANNEL_LAYERS": {}},
        {"CHANNEL_LAYERS": None},
    ],
)
def test_e003_channel_layer_alias_missing(overrides: dict[str, Any]) -> None:
    assert mcp_ids(**overrides) == ["mcp_server.E003"]


def test_e003_silent_for_another_alias_that_exists() -> None:
    layers = {"default": MEMORY, "mcp": MEMORY}
    assert mcp_ids(CHANNEL_LAYERS=layers, MCP_SERVER=with_mcp(CHANNEL_LAYER="mcp")) == []


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (["no.such.middleware"], 1),
        (["tests.testapp.middleware.no_such_factory"], 1),
        ([GOOD_MIDDLEWARE, "nodots"], 1),
        ([None, 3], 2),
        (GOOD_MIDDLEWARE, 1),
        (None, 1),
    ],
)
def test_e004_middleware_that_cannot_be_imported(value: Any, count: int) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(MIDDLEWARE=value)) == ["mcp_server.E004"] * count


@pytest.mark.parametrize(
    "value", [[], [GOOD_MIDDLEWARE], (GOOD_MIDDLEWARE, "tests.testapp.middleware.misbehave")]
)
def test_e004_silent_for_importable_middleware(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(MIDDLEWARE=value)) == []


@pytest.mark.parametrize("key", ["REQUEST_TIMEOUT", "SESSION_IDLE_TIMEOUT", "KEEPALIVE_INTERVAL"])
@pytest.mark.parametrize("value", [0, -1, -0.5, "30", True, [30]])
def test_e005_timeouts_must_be_positive_numbers(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == ["mcp_server.E005"]


@pytest.mark.parametrize("key", ["REQUEST_TIMEOUT", "SESSION_IDLE_TIMEOUT", "KEEPALIVE_INTERVAL"])
@pytest.mark.parametrize("value", [None, 0.5, 30, 3600.0])
def test_e005_silent_for_positive_numbers_and_none(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(STORE_TIMEOUT=0.1, **{key: value})) == []  # E014: below the deadline


@pytest.mark.parametrize("key", ["LEDGER_FLUSH_INTERVAL", "SESSION_CACHE_TTL"])
@pytest.mark.parametrize("value", [-0.01, "0.5", True, None, float("inf"), float("nan")])
def test_e010_intervals_must_be_seconds(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == ["mcp_server.E010"]


@pytest.mark.parametrize("key", ["LEDGER_FLUSH_INTERVAL", "SESSION_CACHE_TTL"])
@pytest.mark.parametrize("value", [0, 0.005, 5, 30.0])
def test_e010_silent_for_seconds(key: str, value: float) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == []


@pytest.mark.parametrize("value", [0, -1, "30", True, None, float("inf"), float("nan")])
def test_e040_stream_recheck_interval_must_be_positive_seconds(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(STREAM_RECHECK_INTERVAL=value)) == ["mcp_server.E040"]


@pytest.mark.parametrize("value", [0.5, 1, 30.0])
def test_e040_silent_for_positive_seconds(value: float) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(STREAM_RECHECK_INTERVAL=value)) == []


def test_e011_a_ledger_backend_that_cannot_be_imported() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(LEDGER_BACKEND="no.such.Ledger")) == ["mcp_server.E011"]


def test_w006_the_cache_ledger_on_a_local_memory_cache() -> None:
    """Process-local and evicting: the admin would neither see every worker's requests nor keep them all."""
    cache_ledger = with_mcp(LEDGER_BACKEND="mcp_server.stores.ledger.cache.CacheLedger")
    local = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    shared = {"default": redis_cache({"socket_timeout": 5, "socket_connect_timeout": 3})}
    assert mcp_ids(MCP_SERVER=cache_ledger, CACHES=local) == ["mcp_server.W006"]
    assert mcp_ids(MCP_SERVER=cache_ledger, CACHES=shared) == []
    assert mcp_ids(CACHES=local) == []  # the database ledger does not depend on the cache


@pytest.mark.parametrize("key", ["MAX_REQUEST_BYTES", "PAGE_SIZE"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "100", True, None])
def test_e006_sizes_must_be_positive_integers(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == ["mcp_server.E006"]


@pytest.mark.parametrize("key", ["MAX_REQUEST_BYTES", "PAGE_SIZE"])
@pytest.mark.parametrize("value", [1, 100, 4 * 1024 * 1024])
def test_e006_silent_for_positive_integers(key: str, value: int) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == []


@pytest.mark.parametrize(
    ("debug", "origins", "expected"),
    [
        (False, ["*"], ["mcp_server.W001"]),
        (False, ["https://app.example", "*"], ["mcp_server.W001"]),
        (True, ["*"], []),
        (False, ["https://app.example"], []),
        (False, [], []),
    ],
)
def test_w001_any_origin_outside_debug(debug: bool, origins: list[str], expected: list[str]) -> None:
    assert mcp_ids(DEBUG=debug, MCP_SERVER=with_mcp(ALLOWED_ORIGINS=origins)) == expected


def redis_layer(config: dict[str, Any] | None) -> dict[str, Any]:
    layer: dict[str, Any] = {"BACKEND": REDIS}
    if config is not None:
        layer["CONFIG"] = config
    return layer


BOUNDED = {"socket_timeout": 15, "socket_connect_timeout": 3}
"""Host timeouts W002 accepts: a read timeout above channels-redis's 5 s blocking receive, a connect one."""


@pytest.mark.parametrize(
    "config",
    [
        {"hosts": ["redis://127.0.0.1:6379"]},
        {"hosts": [("127.0.0.1", 6379)]},
        {"hosts": [{"address": "redis://127.0.0.1:6379"}]},
        {"hosts": [{"address": "redis://a", "socket_timeout": None, "socket_connect_timeout": 3}]},  # hangs
        {
            "hosts": [{"address": "redis://a", "socket_timeout": 5, "socket_connect_timeout": 3}]
        },  # cuts receive
        {"hosts": [{"address": "redis://a", "socket_timeout": 15}]},  # no connect timeout
        {"hosts": [{"address": "redis://a", "socket_timeout": 15, "socket_connect_timeout": None}]},
        {"hosts": [{"address": "redis://a", "socket_timeout": "15", "socket_connect_timeout": True}]},
        {"hosts": [{"address": "redis://a", **BOUNDED}, "redis://b"]},
        {"hosts": []},
        {},
        None,
    ],
)
def test_w002_redis_layer_without_bounded_socket_timeouts(config: dict[str, Any] | None) -> None:
    assert mcp_ids(CHANNEL_LAYERS={"default": redis_layer(config)}) == ["mcp_server.W002"]


@pytest.mark.parametrize(
    "layers",
    [
        {"default": redis_layer({"hosts": [{"address": "redis://127.0.0.1:6379", **BOUNDED}]})},
        {
            "default": redis_layer(
                {"hosts": [{"address": "redis://a", "socket_timeout": 30.5, "socket_connect_timeout": 1}]}
            )
        },
        {"default": redis_layer({"hosts": ["redis://a/0?socket_timeout=15&socket_connect_timeout=2"]})},
        {"default": MEMORY},
        {"default": MEMORY, "unused": redis_layer(None)},  # W002 looks at the layer MCP uses only
    ],
)
def test_w002_silent_with_bounded_timeouts_or_another_backend(layers: dict[str, Any]) -> None:
    assert mcp_ids(CHANNEL_LAYERS=layers) == []


def test_w002_follows_the_alias_mcp_uses() -> None:
    layers = {"default": MEMORY, "mcp": redis_layer(None)}
    assert mcp_ids(CHANNEL_LAYERS=layers, MCP_SERVER=with_mcp(CHANNEL_LAYER="mcp")) == ["mcp_server.W002"]


def test_w002_is_silent_when_the_layer_is_not_a_dict() -> None:
    assert mcp_ids(CHANNEL_LAYERS={"default": "redis://127.0.0.1"}) == []


@pytest.mark.parametrize("value", [0, -1, "5", True, None, float("inf"), float("nan"), [5]])
def test_e014_store_timeout_must_be_positive_seconds(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(STORE_TIMEOUT=value)) == ["mcp_server.E014"]


@pytest.mark.parametrize(("store", "deadline"), [(5, 5), (10, 5.0), (0.5, 0.5)])
def test_e014_store_timeout_must_be_below_the_request_deadline(store: float, deadline: float) -> None:
    """A request waiting on a store must be answered with an error before its deadline answers it."""
    overrides = with_mcp(STORE_TIMEOUT=store, REQUEST_TIMEOUT=deadline)
    assert mcp_ids(MCP_SERVER=overrides) == ["mcp_server.E014"]


@pytest.mark.parametrize(("store", "deadline"), [(5, 300), (0.5, 1), (60, None)])
def test_e014_silent_below_the_deadline_or_without_one(store: float, deadline: float | None) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(STORE_TIMEOUT=store, REQUEST_TIMEOUT=deadline)) == []


def redis_cache(options: dict[str, Any] | None) -> dict[str, Any]:
    cache: dict[str, Any] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://x",
    }
    if options is not None:
        cache["OPTIONS"] = options
    return cache


@pytest.mark.parametrize(
    "options",
    [
        None,
        {},
        {"socket_timeout": 5},
        {"socket_connect_timeout": 3},
        {"socket_timeout": None, "socket_connect_timeout": 3},
        {"socket_timeout": 5, "socket_connect_timeout": 0},
    ],
)
def test_w008_redis_cache_without_socket_timeouts(options: dict[str, Any] | None) -> None:
    assert mcp_ids(CACHES={"default": redis_cache(options)}) == ["mcp_server.W008"]


def test_w008_follows_the_cache_alias_mcp_uses() -> None:
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "mcp": redis_cache(None),
    }
    assert mcp_ids(CACHES=caches) == []
    assert mcp_ids(CACHES=caches, MCP_SERVER=with_mcp(LEDGER_CACHE_ALIAS="mcp")) == ["mcp_server.W008"]
    bounded = {**caches, "mcp": redis_cache({"socket_timeout": 5, "socket_connect_timeout": 3.0})}
    assert mcp_ids(CACHES=bounded, MCP_SERVER=with_mcp(LEDGER_CACHE_ALIAS="mcp")) == []


def test_the_demo_settings_on_redis_pass_w002_and_w008() -> None:
    """The demo's Redis timeouts (project/settings.py, with REDIS_URL set) satisfy both checks."""

    from tests.support.live import ROOT, base_env, manage_py_check

    env = base_env(
        ROOT / "unused.sqlite3", REDIS_URL="redis://127.0.0.1:1/0", DJANGO_SETTINGS_MODULE="project.settings"
    )
    done = manage_py_check(env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "W002" not in done.stderr
    assert "W008" not in done.stderr


# -- checks/auth, site ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (["no.such.Authentication"], 1),
        (["django.contrib.auth.models.User"], 1),
        (["mcp_server.auth.tokens.TokenAuthentication", "mcp_server.auth.nothing.Here"], 1),
        ("mcp_server.auth.tokens.TokenAuthentication", 1),
        ([None], 1),
    ],
)
def test_e007_authentication_classes(value: Any, count: int) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(AUTHENTICATION_CLASSES=value)) == ["mcp_server.E007"] * count


@pytest.mark.parametrize("value", [True, False])
def test_e007_silent_for_real_classes(value: bool) -> None:
    classes = ["mcp_server.auth.session.SessionAuthentication", "mcp_server.auth.tokens.TokenAuthentication"]
    assert mcp_ids(MCP_SERVER=with_mcp(AUTHENTICATION_CLASSES=classes, ALLOW_ANONYMOUS=value)) == []


@pytest.mark.parametrize("value", ["no", 0, None])
def test_e008_allow_anonymous_must_be_a_bool(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(ALLOW_ANONYMOUS=value)) == ["mcp_server.E008"]


@pytest.mark.parametrize(
    "issuers",
    [
        ["issuer.example"],
        ["http://issuer.example"],
        ["ftp://issuer.example"],
        ["https://issuer.example/?tenant=1"],
        ["https://issuer.example/#top"],
        ["https://"],
        [42],
        "https://issuer.example?tenant=1",
    ],
)
def test_e009_authorization_servers_must_be_issuer_urls(issuers: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(ALLOW_ANONYMOUS=False, OAUTH_AUTHORIZATION_SERVERS=issuers)) == [
        "mcp_server.E009"
    ]


@pytest.mark.parametrize("value", [[], "{}", None])
def test_e009_resource_metadata_must_be_a_dict(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(OAUTH_RESOURCE_METADATA=value)) == ["mcp_server.E009"]


@pytest.mark.parametrize(
    "issuers",
    [
        ["https://issuer.example"],
        ["https://issuer.example/tenant", "http://127.0.0.1:9000", "http://localhost", "http://[::1]:8000"],
    ],
)
def test_e009_silent_for_issuer_urls(issuers: list[str]) -> None:
    metadata = {"resource_name": "Books"}
    overrides = with_mcp(
        ALLOW_ANONYMOUS=False, OAUTH_AUTHORIZATION_SERVERS=issuers, OAUTH_RESOURCE_METADATA=metadata
    )
    assert mcp_ids(MCP_SERVER=overrides) == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (None, ["mcp_server.W003"]),
        ("", ["mcp_server.W003"]),
        ("no.such.application", ["mcp_server.W003"]),
        ("project.asgi.no_such_name", ["mcp_server.W003"]),
        ("django.core.asgi.get_asgi_application", ["mcp_server.W003"]),
        ("project.asgi.application", []),
    ],
)
def test_w003_asgi_application_must_route_mcp(path: str | None, expected: list[str]) -> None:
    assert mcp_ids(ASGI_APPLICATION=path) == expected


@pytest.mark.parametrize(
    ("anonymous", "classes", "expected"),
    [
        (False, [], ["mcp_server.W004"]),
        (False, ["mcp_server.auth.tokens.TokenAuthentication"], []),
        (True, [], []),
    ],
)
def test_w004_nobody_can_connect(anonymous: bool, classes: list[str], expected: list[str]) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(ALLOW_ANONYMOUS=anonymous, AUTHENTICATION_CLASSES=classes)) == expected


@pytest.mark.parametrize(
    ("anonymous", "issuers", "expected"),
    [
        (True, ["https://issuer.example"], ["mcp_server.W005"]),
        (False, ["https://issuer.example"], []),
        (True, [], []),
    ],
)
def test_w005_authorization_server_with_anonymous_access(
    anonymous: bool, issuers: list[str], expected: list[str]
) -> None:
    overrides = with_mcp(ALLOW_ANONYMOUS=anonymous, OAUTH_AUTHORIZATION_SERVERS=issuers)
    assert mcp_ids(MCP_SERVER=overrides) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("SESSION_RETENTION", -1),
        ("SESSION_RETENTION", float("inf")),
        ("SESSION_RETENTION", "an hour"),
        ("SESSION_RETENTION", True),
        ("MAX_CLIENT_METADATA_BYTES", 0),
        ("MAX_CLIENT_METADATA_BYTES", 1.5),
        ("MAX_CLIENT_METADATA_BYTES", None),
        ("MAX_SESSIONS_PER_CLIENT", 0),
        ("MAX_SESSIONS_PER_CLIENT", "10"),
        ("MAX_SESSIONS_PER_CLIENT", False),
    ],
)
def test_e012_bounds_on_stored_state(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == ["mcp_server.E012"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("SESSION_RETENTION", 0),
        ("SESSION_RETENTION", 86400.0),
        ("MAX_CLIENT_METADATA_BYTES", 1),
        ("MAX_SESSIONS_PER_CLIENT", None),
        ("MAX_SESSIONS_PER_CLIENT", 5),
    ],
)
def test_e012_silent_for_good_bounds(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == []


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_e013_error_detail_must_be_a_bool(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(ERROR_DETAIL=value)) == ["mcp_server.E013"]


@pytest.mark.parametrize(
    ("debug", "detail", "expected"),
    [
        (False, True, ["mcp_server.W007"]),
        (True, True, []),
        (False, False, []),
        (True, False, []),
    ],
)
def test_w007_error_detail_outside_debug(debug: bool, detail: bool, expected: list[str]) -> None:
    assert mcp_ids(DEBUG=debug, MCP_SERVER=with_mcp(ERROR_DETAIL=detail)) == expected


def test_several_problems_are_reported_together() -> None:
    overrides = with_mcp(RESPONSE_MODE="stream", PAGE_SIZE=0, ALLOW_ANONYMOUS="yes", ALLOWED_ORIGINS=["*"])
    assert mcp_ids(DEBUG=False, MCP_SERVER=overrides) == [
        "mcp_server.E002",
        "mcp_server.E006",
        "mcp_server.E008",
        "mcp_server.W001",
    ]


# -- manage.py check -----------------------------------------------------------------------------------------


def test_manage_py_check_fails_on_an_error_and_passes_on_the_test_site() -> None:
    out = StringIO()
    call_command("check", "--fail-level", "WARNING", stdout=out, stderr=StringIO())
    assert "System check identified no issues" in out.getvalue()
    with (
        override_settings(MCP_SERVER=with_mcp(RESPONSE_MODE="stream")),
        pytest.raises(SystemCheckError) as raised,
    ):
        call_command("check", stdout=StringIO(), stderr=StringIO())
    assert "mcp_server.E002" in str(raised.value)


def test_manage_py_check_fails_on_a_warning_only_at_warning_level() -> None:
    with override_settings(DEBUG=False, MCP_SERVER=with_mcp(ALLOWED_ORIGINS=["*"])):
        out, err = StringIO(), StringIO()
        call_command("check", stdout=out, stderr=err)  # warnings alone do not fail by default
        assert "mcp_server.W001" in out.getvalue() + err.getvalue()
        with pytest.raises(SystemCheckError) as raised:
            call_command("check", "--fail-level", "WARNING", stdout=StringIO(), stderr=StringIO())
    assert "mcp_server.W001" in str(raised.value)


@pytest.mark.parametrize(
    "hints",
    [
        [],
        {"tools/call": {"ttl_ms": 0}},
        {"tools/list": {"ttl_ms": -1}},
        {"tools/list": {"ttl_ms": 1.5}},
        {"tools/list": {"ttl_ms": True}},
        {"tools/list": {"cache_scope": "shared"}},
        {"tools/list": {"ttl": 5}},
    ],
)
def test_e015_malformed_cache_hints(hints: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(CACHE_HINTS=hints)) == ["mcp_server.E015"]


def test_e015_names_the_cacheable_methods_and_the_defaults_cover_each() -> None:
    """The cacheable methods are one list (``wire.v2026_07_28.CACHEABLE_METHODS``): E015's message names them
    in order, and ``CACHE_HINTS``' defaults are what they were, one per method."""
    with override_settings(MCP_SERVER=with_mcp(CACHE_HINTS={"ping": {}})):
        (message,) = [m for m in run_checks() if m.id == "mcp_server.E015"]
    assert message.msg == (
        "MCP_SERVER['CACHE_HINTS']: 'ping' is not a method with caching hints (server/discover, tools/list, "
        "prompts/list, resources/list, resources/templates/list, resources/read)."
    )
    assert DEFAULTS["CACHE_HINTS"] == {
        "server/discover": {"ttl_ms": 0, "cache_scope": "public"},
        "tools/list": {"ttl_ms": 0, "cache_scope": "private"},
        "prompts/list": {"ttl_ms": 0, "cache_scope": "private"},
        "resources/list": {"ttl_ms": 0, "cache_scope": "private"},
        "resources/templates/list": {"ttl_ms": 0, "cache_scope": "private"},
        "resources/read": {"ttl_ms": 0, "cache_scope": "private"},
    }
    assert tuple(DEFAULTS["CACHE_HINTS"]) == CACHEABLE_METHODS


def test_e015_partial_cache_hints_are_fine() -> None:
    assert (
        mcp_ids(MCP_SERVER=with_mcp(CACHE_HINTS={"tools/list": {"ttl_ms": 60000, "cache_scope": "public"}}))
        == []
    )


@pytest.mark.parametrize("value", [0, -1, "5", True, None, float("inf"), [5]])
def test_e016_request_state_max_age_must_be_positive_seconds(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(REQUEST_STATE_MAX_AGE=value)) == ["mcp_server.E016"]


def test_e016_is_silent_for_a_positive_max_age() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(REQUEST_STATE_MAX_AGE=600)) == []


@pytest.mark.parametrize("key", ["TASK_TTL", "TASK_POLL_INTERVAL"])
@pytest.mark.parametrize("value", [0, -1, "5", True, float("inf"), [5]])
def test_e017_task_settings_must_be_none_or_positive_seconds(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == ["mcp_server.E017"]


@pytest.mark.parametrize("value", [None, 0.5, 86400])
def test_e017_is_silent_for_none_or_positive_seconds(value: Any) -> None:
    settings = with_mcp(TASK_TTL=value, TASK_POLL_INTERVAL=value, TASK_MAX_DURATION=0.5)
    assert mcp_ids(MCP_SERVER=settings) == []


@pytest.mark.parametrize("value", [0, -1, "5", True, float("inf"), [5]])
def test_e030_task_max_duration_must_be_none_or_positive_seconds(value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(TASK_MAX_DURATION=value)) == ["mcp_server.E030"]


@pytest.mark.parametrize("key", ["MAX_TASKS_PER_OWNER", "MAX_TASKS"])
@pytest.mark.parametrize("value", [0, -1, "5", True, 1.5])
def test_e031_task_limits_must_be_none_or_positive_integers(key: str, value: Any) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**{key: value})) == ["mcp_server.E031"]


def test_task_limits_may_be_off() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(MAX_TASKS_PER_OWNER=None, MAX_TASKS=None)) == []


def test_w030_a_task_that_never_times_out() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(TASK_TTL=None, TASK_MAX_DURATION=None)) == ["mcp_server.W030"]


def test_w031_a_task_live_past_its_ttl() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(TASK_TTL=60, TASK_MAX_DURATION=120)) == ["mcp_server.W031"]
    assert mcp_ids(MCP_SERVER=with_mcp(TASK_TTL=60, TASK_MAX_DURATION=60)) == []


def test_e020_event_store_backend_must_import() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(EVENT_STORE_BACKEND="nowhere.Store")) == ["mcp_server.E020"]


@pytest.mark.parametrize(
    "path",
    [
        "nowhere.TaskStore",  # does not import
        "mcp_server.stores.tasks.cache.CacheTaskStore",  # the cache store one might expect: there is none
        "mcp_server.stores.ledger.database.DatabaseLedger",  # imports, but is no task store
        "mcp_server.stores.tasks.base.NO_CACHE_STORE",  # not even a class
        5,
    ],
)
def test_e022_task_store_backend_must_be_a_task_store(path: Any) -> None:
    with override_settings(MCP_SERVER=with_mcp(TASK_STORE_BACKEND=path)):
        messages = [m for m in run_checks() if m.id == "mcp_server.E022"]
    assert [m.is_serious() for m in messages] == [True]
    assert repr(path) in messages[0].msg
    assert "a cache task store is not offered" in str(messages[0].hint)
    assert "mcp_server.stores.tasks.database.DatabaseTaskStore" in str(messages[0].hint)


def test_e022_silent_for_the_database_store_and_its_old_path() -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(TASK_STORE_BACKEND=DEFAULTS["TASK_STORE_BACKEND"])) == []
    old = "mcp_server.ledger.tasks.DatabaseTaskStore"
    with pytest.warns(DeprecationWarning, match="TASK_STORE_BACKEND.* is deprecated"):
        assert mcp_ids(MCP_SERVER=with_mcp(TASK_STORE_BACKEND=old)) == []


@pytest.mark.parametrize(
    ("key", "old"),
    [
        ("LEDGER_BACKEND", "mcp_server.ledger.database.DatabaseLedger"),
        ("EVENT_STORE_BACKEND", "mcp_server.ledger.events.CacheEventStore"),
    ],
)
def test_e011_e020_silent_for_an_old_store_path(key: str, old: str) -> None:
    from mcp_server.stores import ledger

    ledger._build.cache_clear()  # a ledger built before for the same value gives no second warning
    with pytest.warns(DeprecationWarning, match=f"{key}.* is deprecated"):
        assert mcp_ids(MCP_SERVER=with_mcp(**{key: old})) == []


@pytest.mark.parametrize(
    "setting",
    [
        {"EVENT_RETENTION": 0},
        {"EVENT_RETENTION": None},
        {"MAX_STREAM_EVENTS": 0},
        {"MAX_STREAM_EVENTS": True},
        {"SSE_RETRY_MS": -1},
        {"SSE_RETRY_MS": 1.5},
        {"SSE_POLL_AFTER": 0},
        {"SSE_POLL_AFTER": "soon"},
    ],
)
def test_e021_stream_settings_out_of_range(setting: dict[str, Any]) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**setting)) == ["mcp_server.E021"]


@pytest.mark.parametrize(
    "setting",
    [
        {"EVENT_STORE_BACKEND": "mcp_server.stores.events.cache.CacheEventStore"},
        {"SSE_RETRY_MS": None, "SSE_POLL_AFTER": 30, "MAX_STREAM_EVENTS": 10, "EVENT_RETENTION": 60},
    ],
)
def test_stream_settings_in_range_are_fine(setting: dict[str, Any]) -> None:
    assert mcp_ids(MCP_SERVER=with_mcp(**setting)) == []


# -- W036: SQLite options --------------------------------------------------------------------------------


def sqlite(options: dict[str, Any] | None) -> dict[str, Any]:
    database = {**settings.DATABASES["default"], "ENGINE": "django.db.backends.sqlite3"}
    database.pop("OPTIONS", None)
    if options is not None:
        database["OPTIONS"] = options
    return {"default": database}


@pytest.mark.parametrize(
    ("options", "problems"),
    [
        (None, 1),  # Django's defaults: deferred, 5 s
        ({}, 1),
        ({"transaction_mode": "DEFERRED", "timeout": 30}, 1),
        ({"transaction_mode": "IMMEDIATE", "timeout": 1}, 1),
        ({"timeout": 0.5}, 2),
    ],
)
def test_w036_sqlite_without_immediate_transactions_or_a_lock_timeout(
    options: dict[str, Any] | None, problems: int
) -> None:
    with override_settings(DATABASES=sqlite(options)):
        messages = [m for m in run_checks() if m.id == "mcp_server.W036"]
    assert len(messages) == problems
    assert all("'transaction_mode': 'IMMEDIATE'" in str(m.hint) for m in messages)


@pytest.mark.parametrize(
    "options",
    [
        {"transaction_mode": "IMMEDIATE"},
        {"transaction_mode": "exclusive", "timeout": 5},
        {"transaction_mode": "IMMEDIATE", "timeout": 30, "init_command": "PRAGMA journal_mode=WAL;"},
    ],
)
def test_w036_silent_with_the_documented_options(options: dict[str, Any]) -> None:
    assert "mcp_server.W036" not in mcp_ids(DATABASES=sqlite(options))


def test_site_checks_is_a_deprecated_alias_of_the_checks_package() -> None:
    import mcp_server.checks as checks

    sys.modules.pop("mcp_server.site_checks", None)
    with pytest.warns(DeprecationWarning, match=r"mcp_server\.site_checks is deprecated"):
        site_checks = importlib.import_module("mcp_server.site_checks")
    for name in site_checks.__all__:
        assert getattr(site_checks, name) is getattr(checks, name)


def test_every_settings_check_is_skipped_by_the_one_guard_when_mcp_server_is_not_a_dict() -> None:
    """Each check that reads ``MCP_SERVER`` is registered through the one guard, ``mcp_check``: called on a
    non-dict it returns nothing (E000 alone says so)."""
    from django.core.checks.registry import registry

    from mcp_server.checks.base import GUARDED

    assert len(GUARDED) == 17
    assert set(GUARDED) <= registry.registered_checks
    with override_settings(MCP_SERVER=["not", "a", "dict"]):
        assert all(check() == [] for check in GUARDED)
