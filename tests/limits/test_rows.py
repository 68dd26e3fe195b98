"""The admin's rows of rate limits: validated by the form, laid over ``RATE_LIMITS``, read again in time."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.test import override_settings

from mcp_server.models import RateLimit
from mcp_server.protocol import rate_limit
from mcp_server.protocol.rate_limit import current_rules

pytestmark = pytest.mark.django_db(transaction=True)

SETTING = [
    {"per": "user", "target": "tool:echo", "rate": "5/minute", "name": "echo"},
    {"per": "user", "target": "tool:other", "rate": "5/minute", "name": "other"},
    {"per": "address", "target": "*", "rate": "5/minute", "name": "anon"},
]


def limits(**keys: Any) -> Any:
    return override_settings(MCP_SERVER={**settings.MCP_SERVER, "RATE_LIMITS": SETTING, **keys})


@pytest.fixture(autouse=True)
def _fresh_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rate_limit._Rows, "read_at", -float("inf"))
    monkeypatch.setattr(rate_limit._Rows, "rows", ())


@pytest.mark.parametrize(
    ("rate", "burst"), [("0/minute", None), ("-5/minute", None), ("5/minute", 6), ("5/1000d", None)]
)
def test_the_form_refuses_bad_values(rate: str, burst: int | None) -> None:
    row = RateLimit(name="bad", per="user", target="tool:*", rate=rate, burst=burst)
    with pytest.raises(ValidationError):
        row.full_clean()


async def test_rows_are_not_read_unless_reload_is_set() -> None:
    await RateLimit.objects.acreate(name="row", per="user", target="tool:echo", rate="1/hour")
    with limits():
        assert [r.name for r in await current_rules()] == ["echo", "other", "anon"]


async def test_a_row_replaces_the_rule_with_its_who_and_what_and_a_disabled_row_removes_it() -> None:
    await RateLimit.objects.acreate(name="echo row", per="user", target="tool:echo", rate="1/hour")
    await RateLimit.objects.acreate(name="off", per="address", target="*", rate="1/hour", enabled=False)
    await RateLimit.objects.acreate(name="new", per="token", target="method:*", rate="9/s")
    with limits(RATE_LIMIT_RELOAD=60.0):
        rules = await current_rules()
    assert sorted(r.name for r in rules) == ["echo row", "new", "other"]


async def test_a_change_is_read_again_after_reload_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    with limits(RATE_LIMIT_RELOAD=60.0):
        assert len(await current_rules()) == 3
        await RateLimit.objects.acreate(name="later", per="token", target="*", rate="1/s")
        assert len(await current_rules()) == 3  # read less than a minute ago
        monkeypatch.setattr(rate_limit._Rows, "read_at", -float("inf"))  # a minute later
        assert len(await current_rules()) == 4
