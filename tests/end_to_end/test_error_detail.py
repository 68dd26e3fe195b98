"""No traceback reaches a client unless ``ERROR_DETAIL`` asks for it: the test site, like the demo, runs with
``DEBUG`` on, and an anonymous client calling a failing method or tool learns nothing of the exception."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import open_session


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0) as client:
        yield client


async def test_debug_site_sends_no_exception_detail(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    assert live_server.env.get("DJANGO_DEBUG", "1") == "1"  # DEBUG is on, as in the demo
    session = await open_session(http, live_server.url)
    raw = await session.request("test/raise")
    assert raw["error"] == {"code": -32603, "message": "Internal error while handling test/raise"}
    tool = await session.call_tool("raises")
    assert tool["result"]["isError"] is True
    # no type, no text, no trace: an exception's text is the server's (a database error's, say)
    assert tool["result"]["content"][0]["text"] == "Error executing tool raises: internal error"
    assert "Traceback" in live_server.log()  # the operator still has it


async def test_a_database_error_in_a_tool_stays_on_the_server(
    http: httpx.AsyncClient, live_server: LiveServer
) -> None:
    """An id past 64 bits reaches the database, which refuses it; its words (SQLite's "too large to
    convert", PostgreSQL's "bigint out of range") are the server's, not the caller's."""
    session = await open_session(http, live_server.url)
    tool = await session.call_tool("stored_integer", {"value": 2**64})
    assert tool["result"]["isError"] is True
    assert tool["result"]["content"][0]["text"] == "Error executing tool stored_integer: internal error"


async def test_error_detail_sends_the_traceback(
    http: httpx.AsyncClient, start: Callable[..., LiveServer]
) -> None:
    server = start({"ERROR_DETAIL": True})
    session = await open_session(http, server.url)
    data = (await session.request("test/raise"))["error"]["data"]
    assert data["exception"] == "ValueError('raw failure')"
    assert any("ValueError: raw failure" in line for line in data["traceback"])
    tool = await session.call_tool("raises")
    assert tool["result"]["content"][0]["text"] == "Error executing tool raises: RuntimeError: boom"
