"""Daily and monthly quotas (``QUOTAS`` and the admin's *Quotas* rows): parsed, checked, matched apart from
the rate rules, counted per UTC calendar period, refused with data naming the quota."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ValidationError
from django.test import override_settings

from mcp_server.checks.limits import check_rate_limits
from mcp_server.core.limit_rules import (
    calendar_period,
    matching_rules,
    parse_quota,
    parse_quotas,
    parse_rules,
)
from mcp_server.models import Quota
from mcp_server.protocol import rate_limit
from mcp_server.protocol.rate_limit import current_rules, rate_refusal, window_key
from tests.limits.test_refusal import SignedIn, context

DAILY = {"per": "user", "target": "tool:echo", "quota": 2, "period": "day", "name": "echo a day"}


def limits(**keys: Any) -> Any:
    return override_settings(MCP_SERVER={**settings.MCP_SERVER, **keys})


def test_a_quota_is_one_calendar_window() -> None:
    quota = parse_quota(DAILY)
    assert quota.period == "day"
    assert [(w.kind, w.count) for w in quota.windows] == [("day", 2)]
    assert quota.describe() == {
        "name": "echo a day",
        "per": "user",
        "target": "tool:echo",
        "quota": 2,
        "period": "day",
    }
    monthly = parse_quota({"per": "token", "quota": 10_000, "period": "month"})
    assert monthly.name == "token * per month"
    assert monthly.key != parse_quota({"per": "token", "quota": 10_001, "period": "month"}).key


@pytest.mark.parametrize(
    "bad",
    [
        {"per": "user", "quota": 0, "period": "day"},
        {"per": "user", "quota": -3, "period": "day"},
        {"per": "user", "quota": 10**12, "period": "day"},
        {"per": "user", "quota": True, "period": "day"},
        {"per": "user", "quota": "5", "period": "day"},
        {"per": "user", "quota": 5, "period": "week"},
        {"per": "user", "quota": 5},
        {"per": "user", "quota": 5, "period": "day", "rate": "5/day"},
        {"per": "robot", "quota": 5, "period": "day"},
        {"per": "user", "target": "tools:*", "quota": 5, "period": "day"},
    ],
)
def test_bad_quotas_are_refused_by_e077_and_the_form(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="quota 0: "):
        parse_quotas([bad])
    with limits(QUOTAS=[bad]):
        assert [str(m.id) for m in check_rate_limits()] == ["mcp_server.E077"]


def test_e077_a_quotas_setting_that_is_not_a_list() -> None:
    with limits(QUOTAS={"per": "user"}):
        assert [str(m.id) for m in check_rate_limits()] == ["mcp_server.E077"]
    with limits(QUOTAS=[DAILY]):
        assert list(check_rate_limits()) == []


@pytest.mark.parametrize(("quota", "period"), [(0, "day"), (10**10, "month"), (5, "week")])
def test_the_admin_form_refuses_a_bad_quota(quota: int, period: str) -> None:
    row = Quota(name="bad", per="user", target="tool:*", quota=quota, period=period)
    with pytest.raises(ValidationError):
        row.full_clean(validate_unique=False)


def test_calendar_periods_are_utc_days_and_months() -> None:
    moment = datetime(2026, 7, 28, 23, 59, 30, tzinfo=UTC).timestamp()
    assert calendar_period("day", moment) == ("2026-07-28", 30, 86400)
    assert calendar_period("month", moment) == ("2026-07", 3 * 86400 + 30, 31 * 86400)
    february = datetime(2027, 2, 1, tzinfo=UTC).timestamp()
    assert calendar_period("month", february) == ("2027-02", 28 * 86400, 28 * 86400)
    assert calendar.monthrange(2028, 2)[1] * 86400 == calendar_period("month", february + 366 * 86400)[2]


def test_a_quotas_counter_is_keyed_by_its_period_and_ends_with_it() -> None:
    quota = parse_quota(DAILY)
    moment = datetime(2026, 7, 28, 12, 0, tzinfo=UTC).timestamp()
    key, timeout = window_key(quota, quota.windows[0], "u:5", moment)
    assert key == f"mcp-rl:{quota.key}:2026-07-28:u:5"
    assert timeout == 12 * 3600
    next_day = window_key(quota, quota.windows[0], "u:5", moment + 86400)[0]
    assert next_day.endswith(":2026-07-29:u:5")  # a new day counts afresh


def test_a_default_quota_and_a_default_rate_rule_do_not_hide_each_other() -> None:
    rules = (
        *parse_rules([{"per": "user", "target": "tool:echo", "rate": "5/m", "name": "echo rate"}]),
        *parse_rules([{"per": "user", "target": "default", "rate": "9/m", "name": "other rate"}]),
        *parse_quotas([{"per": "user", "target": "default", "quota": 100, "period": "day", "name": "daily"}]),
    )
    found = matching_rules(rules, "tools/call", {"name": "echo"}, frozenset({"user"}))
    assert [r.name for r in found] == ["echo rate", "daily"]
    found = matching_rules(rules, "tools/list", {}, frozenset({"user"}))
    assert [r.name for r in found] == ["other rate", "daily"]


async def test_a_user_over_the_quota_is_refused_until_the_next_period() -> None:
    caches["default"].clear()
    with limits(QUOTAS=[DAILY]):
        assert await rate_refusal(context(user=SignedIn())) is None
        assert await rate_refusal(context(user=SignedIn())) is None
        refused = await rate_refusal(context(user=SignedIn()))
        assert await rate_refusal(context()) is None  # anonymous: per address, no quota for it
    assert refused is not None
    assert refused.code == -31429
    assert refused.message == f"Rate limit 'echo a day' exceeded; retry after {refused.retry_after} seconds"
    limit = refused.data["limit"]
    assert (limit["quota"], limit["period"], limit["window"], limit["count"]) == (2, "day", "day", 2)
    assert limit["seconds"] == 86400
    left = calendar_period("day", datetime.now(UTC).timestamp())[1]
    assert abs(refused.retry_after - left) <= 2  # until midnight UTC


@pytest.mark.django_db(transaction=True)
async def test_quota_rows_replace_the_setting_s_quota_and_a_disabled_row_removes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rate_limit._Rows, "read_at", -float("inf"))
    monkeypatch.setattr(rate_limit._Rows, "rows", ())
    others = {"per": "user", "target": "tool:other", "quota": 5, "period": "month", "name": "other"}
    same_rate = {"per": "user", "target": "tool:echo", "rate": "5/minute", "name": "echo rate"}
    await Quota.objects.acreate(name="echo row", per="user", target="tool:echo", quota=1, period="month")
    await Quota.objects.acreate(name="off", per="user", target="tool:other", quota=1, enabled=False)
    with limits(QUOTAS=[DAILY, others], RATE_LIMITS=[same_rate], RATE_LIMIT_RELOAD=60.0):
        rules = await current_rules()
    # the row replaced the quota with its per and target, not the rate rule that shares them
    assert sorted((r.name, r.period) for r in rules) == [("echo rate", None), ("echo row", "month")]


def test_a_rate_window_s_key_owes_nothing_to_the_worker_s_clock() -> None:
    """Two workers whose clocks are an hour apart count one window: the cache opens and expires it."""
    rule = parse_rules([{"per": "user", "target": "*", "rate": "600/hour", "burst": 10}])[0]
    moment = datetime(2026, 7, 28, 12, 0, tzinfo=UTC).timestamp()
    for window in rule.windows:
        assert window_key(rule, window, "u:5", moment) == window_key(rule, window, "u:5", moment + 3600)
