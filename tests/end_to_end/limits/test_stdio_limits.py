"""A stdio session (one user) obeys the user's rate limits, answered with the refusal like HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.live import ROOT
from tests.support.raw import rpc
from tests.support.stdio import RawStdio, database, rows, start, stdio_env, template

__all__ = ["database", "start", "template"]  # the fixtures this module borrows from tests.support.stdio

USER_LIMIT = {"per": "user", "target": "tool:echo", "rate": "2/hour", "name": "echo per user"}


def create_user(database: Path) -> str:
    create = "from django.contrib.auth.models import User; User.objects.create_user('dora')"
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", create],
        cwd=ROOT,
        env=stdio_env(database),
        check=True,
        capture_output=True,
    )
    return "dora"


async def test_a_stdio_user_is_limited(start: Any, database: Path) -> None:
    raw: RawStdio = await start("--user", create_user(database), overrides={"RATE_LIMITS": [USER_LIMIT]})
    await raw.initialize()
    answers = [
        await raw.request(rpc("tools/call", {"name": "echo", "arguments": {"text": "x"}}, n))
        for n in (1, 2, 3)
    ]
    assert await raw.finish() == 0
    assert [("result" in a) for a in answers] == [True, True, False]
    error = answers[2]["error"]
    assert error["code"] == -31429
    assert error["data"]["limit"]["per"] == "user"
    assert error["data"]["limit"]["name"] == "echo per user"
    assert 3500 < error["data"]["retryAfter"] <= 3600
    assert len(raw.answers_to(3)) == 1
    recorded = rows(database, "select state, outcome from mcp_server_ledgerentry where method = 'tools/call'")
    assert len(recorded) == 3
    # the refusal is its own ledger outcome: rate_limited, with the error as what was answered
    assert sorted(state for state, _ in recorded) == ["answered", "answered", "rate_limited"]
    assert [state for state, outcome in recorded if "-31429" in outcome] == ["rate_limited"]


async def test_a_stdio_user_is_held_to_a_daily_quota(start: Any, database: Path) -> None:
    quota = {"per": "user", "target": "tool:*", "quota": 2, "period": "day", "name": "two a day"}
    raw: RawStdio = await start("--user", create_user(database), overrides={"QUOTAS": [quota]})
    await raw.initialize()
    answers = [
        await raw.request(rpc("tools/call", {"name": tool, "arguments": arguments}, n))
        for n, (tool, arguments) in enumerate(
            [("echo", {"text": "x"}), ("search_books", {"query": "x"}), ("echo", {"text": "y"})], 1
        )
    ]
    assert await raw.finish() == 0
    assert [("result" in a) for a in answers] == [True, True, False]
    limit = answers[2]["error"]["data"]["limit"]
    assert (limit["name"], limit["quota"], limit["period"]) == ("two a day", 2, "day")
    recorded = rows(database, "select state from mcp_server_ledgerentry where method = 'tools/call'")
    assert sorted(state for (state,) in recorded) == ["answered", "answered", "rate_limited"]
