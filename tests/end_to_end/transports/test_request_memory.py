"""A request's memory comes back when it is answered, not at the next full garbage collection: nothing the
endpoint builds for a request (the consumer, the exchange, the pending entry, the context, the Django
request and its body) is kept alive by a reference cycle. The server's collector is paused while the
requests run (the test site's ``test/collect``), so whatever a cycle held is still there to be named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import (
    final_response,
    messages_of,
    open_session,
    rpc,
    sessionless_headers,
    sessionless_meta,
)

pytestmark = pytest.mark.asyncio

LARGE = "x" * 200_000
"""An argument large enough that a request kept alive would show."""


@pytest.fixture(scope="module", params=["auto", "sse", "json"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": request.param})


async def collect(http: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    body = rpc("test/collect", {**params, "_meta": sessionless_meta()}, "collect")
    response = await http.post(url, json=body, headers=sessionless_headers("test/collect"))
    return dict(messages_of(response)[-1]["result"])


def kept_by_cycles(types: dict[str, int]) -> dict[str, int]:
    """What a request of ours left in cycles: our own objects, Django's request and the exchange's."""
    ours = ("mcp_server.", "django.core.handlers.asgi.", "django.http.")
    return {name: count for name, count in types.items() if name.startswith(ours)}


async def test_answered_requests_leave_nothing_to_the_collector(server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)  # handshake era, before the pause
        await collect(http, server.url, pause=True)
        try:
            for index in range(5):  # 2026-07-28: sessionless, one request per POST
                body = rpc(
                    "tools/call",
                    {"name": "echo", "arguments": {"text": LARGE}, "_meta": sessionless_meta()},
                    index,
                )
                answer = final_response(
                    await http.post(server.url, json=body, headers=sessionless_headers("tools/call", "echo")),
                    index,
                )
                assert answer["result"]["content"][0]["text"] == LARGE
            for _ in range(5):  # a session's requests
                answer = await session.call_tool("echo", {"text": LARGE})
                assert answer["result"]["content"][0]["text"] == LARGE
        finally:
            freed = await collect(http, server.url, types=True)
    assert kept_by_cycles(freed["types"]) == {}, freed["types"]
