"""The Streamable HTTP consumer against real servers: what it answers when a request cannot be served."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from django.http import HttpRequest

from mcp_server.auth import AuthResult, BaseAuthentication
from tests.support.live import LiveServer
from tests.support.raw import error_of, initialize, mcp_headers, open_session


class ExplodingAuthentication(BaseAuthentication):
    """An authentication class with a bug (the server imports it from here by its dotted path)."""

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        raise RuntimeError("secret detail of a bug")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0) as client:
        yield client


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_an_unexpected_failure_is_a_500_with_a_jsonrpc_error_and_no_detail(
    start: Callable[..., LiveServer], http: httpx.AsyncClient, method: str
) -> None:
    exploding = "tests.end_to_end.transports.test_consumer.ExplodingAuthentication"
    server = start({"AUTHENTICATION_CLASSES": [exploding]})
    response = await (
        initialize(http, server.url)
        if method == "POST"
        else http.request(method, server.url, headers=mcp_headers("some-session"))
    )
    assert response.status_code == 500
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": "Internal error: RuntimeError"},
    }
    assert "secret detail" not in response.text
    log = server.log()
    assert "MCP endpoint failed" in log
    assert "RuntimeError: secret detail of a bug" in log  # the operator sees it, the client does not


async def test_a_stateless_endpoint_has_no_stream_and_no_session_to_end(
    start: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = start({"STATELESS": True})
    session = await open_session(http, server.url)
    assert session.id is None
    for method, what in (("GET", "no standalone stream"), ("DELETE", "no sessions to end")):
        response = await http.request(method, server.url, headers=mcp_headers(accept="text/event-stream"))
        assert response.status_code == 405
        assert {part.strip() for part in response.headers["allow"].split(",")} == {"GET", "POST", "DELETE"}
        assert what in error_of(response)["message"]
    # Requests that would change a session are answered, and remembered nowhere.
    assert (await session.request("resources/subscribe", {"uri": "test://watched-resource"}))["result"] == {}
    assert (await session.request("logging/setLevel", {"level": "debug"}))["result"] == {}
    assert (await session.call_tool("echo", {"text": "still served"}))["result"]["content"][0]["text"] == (
        "still served"
    )
