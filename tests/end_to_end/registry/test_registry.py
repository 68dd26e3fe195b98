"""The registry's answers through a live server: tool schemas, failures inside tools and unknown tools as
results or errors, sync handlers beside async ones, raw methods (the unit tests:
``tests/registry/test_registry.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.support.live import LiveServer
from tests.support.raw import RawSession, content_type, open_session, parse_sse, rpc


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0) as client:
        yield client


@pytest.fixture
async def session(http: httpx.AsyncClient, live_server: LiveServer) -> RawSession:
    return await open_session(http, live_server.url)


@pytest.fixture(scope="module")
def sse_server(start: Callable[..., LiveServer]) -> LiveServer:
    """A server streaming every response, so that a batch's answers arrive in completion order."""
    return start({"RESPONSE_MODE": "sse"})


async def test_tools_list_shows_schemas(session: RawSession) -> None:
    tools = {t["name"]: t for t in (await session.request("tools/list"))["result"]["tools"]}
    echo = tools["echo"]
    assert echo["inputSchema"]["required"] == ["text"]
    assert echo["description"] == "Return the text unchanged."
    assert "required" not in tools["slow"]["inputSchema"]
    assert tools["slow"]["inputSchema"]["properties"]["seconds"]["default"] == 30.0
    assert set(tools["progress"]["inputSchema"]["properties"]) == {"steps"}  # the Context is not an argument


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [({}, "text"), ({"text": 5}, "text"), ({"text": "a", "extra": 1}, "extra")],
)
async def test_argument_validation_failure_is_an_is_error_result(
    session: RawSession, arguments: dict[str, Any], mentions: str
) -> None:
    answer = await session.call_tool("echo", arguments)
    assert "error" not in answer
    result = answer["result"]
    assert result["isError"] is True
    assert "Invalid arguments for tool echo" in result["content"][0]["text"]
    assert mentions in result["content"][0]["text"]


async def test_failures_inside_tools_with_the_official_client(live_server: LiveServer) -> None:
    async with Client(live_server.url) as client:
        raised = await client.call_tool("raises", {})
        assert raised.is_error
        assert raised.content[0].text == "Error executing tool raises: internal error"  # not ERROR_DETAIL
        tool_error = await client.call_tool("get_book", {"book_id": 999999})
        assert tool_error.is_error
        assert tool_error.content[0].text == "No book with id 999999"
        fine = await client.call_tool("echo", {"text": "still fine"})
        assert not fine.is_error
        assert fine.content[0].text == "still fine"


async def test_tool_that_raises_is_an_is_error_result(session: RawSession) -> None:
    answer = await session.call_tool("raises")
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == "Error executing tool raises: internal error"


async def test_tool_returning_none_has_empty_content(session: RawSession) -> None:
    answer = await session.call_tool("returns_none")
    result = answer["result"]
    assert result["content"] == []
    assert result.get("isError") in (None, False)
    assert "structuredContent" not in result


async def test_unknown_tool_is_a_jsonrpc_error(session: RawSession) -> None:
    answer = await session.call_tool("does_not_exist", request_id=3)
    assert answer["id"] == 3
    assert "result" not in answer
    assert answer["error"]["code"] == -32602
    assert "does_not_exist" in answer["error"]["message"]


async def test_sync_handlers_do_not_block_the_event_loop(
    http: httpx.AsyncClient, live_server: LiveServer
) -> None:
    session = await open_session(http, live_server.url)
    finished: list[str] = []

    async def call(name: str, arguments: dict[str, Any], request_id: str) -> None:
        answer = await session.call_tool(name, arguments, request_id=request_id)
        assert "error" not in answer, answer
        finished.append(name)

    blockers = [asyncio.create_task(call("blocking_sleep", {"seconds": 0.5}, f"block-{i}")) for i in range(3)]
    for i in range(5):  # one after another, while the blocking calls run
        await call("echo", {"text": str(i)}, f"echo-{i}")
    await asyncio.gather(*blockers)
    assert finished == ["echo"] * 5 + ["blocking_sleep"] * 3


async def test_sync_handlers_run_concurrently_with_async_ones_in_one_batch(
    http: httpx.AsyncClient, sse_server: LiveServer
) -> None:
    """The batch's tasks start in order, blocking ones first; the stream shows the order they finish in."""
    session = await open_session(http, sse_server.url, "2025-03-26")
    batch = [rpc("tools/call", {"name": "blocking_sleep", "arguments": {}}, f"b{i}") for i in range(3)]
    batch += [rpc("tools/call", {"name": "echo", "arguments": {"text": "e"}}, f"e{i}") for i in range(3)]
    response = await session.post(batch)
    assert response.status_code == 200
    assert content_type(response) == "text/event-stream"
    order = [str(message["id"]) for message in parse_sse(response.text)]
    assert sorted(order) == ["b0", "b1", "b2", "e0", "e1", "e2"]
    assert {name[0] for name in order[:3]} == {"e"}, order


async def test_raw_method_returning_none_is_internal_error(session: RawSession) -> None:
    answer = await session.request("test/none", {})
    assert answer["error"]["code"] == -32603
    assert "test/none" in answer["error"]["message"]


async def test_raw_method_raising_is_internal_error(session: RawSession) -> None:
    answer = await session.request("test/raise", {})
    assert answer["error"]["code"] == -32603
    assert "test/raise" in answer["error"]["message"]
    assert "result" not in answer


async def test_raw_sync_method_answers(session: RawSession) -> None:
    answer = await session.request("test/echo", {"a": [1, 2]})
    assert answer["result"] == {"params": {"a": [1, 2]}}


async def test_sessions_stay_usable_after_handler_failures(session: RawSession) -> None:
    for method in ("test/none", "test/raise"):
        assert (await session.request(method, {}))["error"]["code"] == -32603
    assert json.loads(json.dumps((await session.request("ping"))["result"])) == {}
