"""The system checks of the rate-limit settings: E070 to E076 (E077, the quotas: test_quotas.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_server.checks.limits import check_rate_limits

GOOD = [{"per": "user", "target": "tool:*", "rate": "600/hour", "burst": 10}]


def ids(**keys: Any) -> list[str]:
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, **keys}):
        return [str(m.id) for m in check_rate_limits()]


def test_the_default_and_a_good_list_pass() -> None:
    assert ids() == []
    assert ids(RATE_LIMITS=GOOD, RATE_LIMIT_ERROR_CODE=429) == []


@pytest.mark.parametrize(
    "limits",
    [
        {"per": "user"},
        [{"per": "user", "rate": "0/s"}],
        [{"per": "user", "rate": "5/m", "burst": -1}],
        [{"per": "nobody", "rate": "5/m"}],
        [{"per": "user", "rate": "1000000000000/s"}],
    ],
)
def test_e070_bad_rules(limits: Any) -> None:
    assert ids(RATE_LIMITS=limits) == ["mcp_server.E070"]


def test_e071_e072() -> None:
    assert ids(RATE_LIMIT_CACHE_ALIAS="nowhere") == ["mcp_server.E071"]
    assert ids(RATE_LIMIT_FAIL_OPEN="yes") == ["mcp_server.E072"]


@pytest.mark.parametrize("code", [-32023, -32020, -32099, -32603, -32700, -32005, -32000, "x", True, 1.5])
def test_e073_codes_the_rules_reserve(code: Any) -> None:
    assert ids(RATE_LIMIT_ERROR_CODE=code) == ["mcp_server.E073"]


@pytest.mark.parametrize("code", [-31429, -32019, 429, -1])
def test_e073_allowed_codes(code: int) -> None:
    assert ids(RATE_LIMIT_ERROR_CODE=code) == []


@pytest.mark.parametrize(
    ("value", "expected"), [(None, []), (5.0, []), (0, ["mcp_server.E074"]), ("5", ["mcp_server.E074"])]
)
def test_e074_reload(value: Any, expected: list[str]) -> None:
    assert ids(RATE_LIMIT_RELOAD=value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("error", []), ("tool_result", []), ("result", ["mcp_server.E075"]), (None, ["mcp_server.E075"])],
)
def test_e075_the_refusal_shape(value: Any, expected: list[str]) -> None:
    assert ids(RATE_LIMIT_REFUSAL=value) == expected


@pytest.mark.parametrize(("value", "expected"), [(True, []), (False, []), (1, ["mcp_server.E076"])])
def test_e076_http_429(value: Any, expected: list[str]) -> None:
    assert ids(RATE_LIMIT_HTTP_429=value) == expected
