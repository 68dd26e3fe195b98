"""``MCP_SERVER["MIDDLEWARE"]``: users' middleware runs around dispatch and inside the reply guarantee."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import RawSession, open_session

MIDDLEWARE = ["tests.testapp.middleware.count_calls", "tests.testapp.middleware.misbehave"]


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"MIDDLEWARE": MIDDLEWARE, "RESPONSE_MODE": "json"})


@pytest.fixture
async def session(server: LiveServer) -> AsyncIterator[RawSession]:
    async with httpx.AsyncClient(timeout=20) as http:
        yield await open_session(http, server.url)


async def test_middleware_sees_and_shapes_results(session: RawSession) -> None:
    first = (await session.request("ping", {}))["result"]["_meta"]["seen"]
    second = (await session.request("ping", {}))["result"]["_meta"]["seen"]
    assert second == first + 1


async def test_an_error_raised_by_middleware_is_the_one_reply(session: RawSession) -> None:
    answer = await session.request("test/echo", {"x": 1})
    assert answer["error"] == {"code": -32029, "message": "Rate limited"}


async def test_middleware_returning_nothing_cannot_leave_a_request_unanswered(session: RawSession) -> None:
    answer = await session.request("tools/list", {})
    assert answer["error"]["code"] == -32603
    assert "tools/list" in answer["error"]["message"]


async def test_middleware_raising_is_answered_minus_32603(session: RawSession) -> None:
    answer = await session.request("prompts/list", {})
    assert answer["error"]["code"] == -32603
    assert (await session.stats())["inflight"] == 0
