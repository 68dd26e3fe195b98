"""The reply guarantee in process: :func:`answer` turns every outcome of a handler into one response.

Each test builds a real :class:`Context` on a server of its own and calls ``answer()`` (or the helpers the
ledger and the deadline use) directly: no transport, so each branch of ``guarantee.py`` is pinned down
exactly (codes, states, messages, what ``ERROR_DETAIL`` adds). The same outcomes over real servers are in
``test_guarantee.py``; ``scripts/mutation`` reports what these tests leave unkilled.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcp_server import JSONRPCError
from mcp_server.core.context import Context, SessionState
from mcp_server.core.states import State
from mcp_server.protocol.guarantee import answer, deadline_for, name_of
from mcp_server.protocol.middleware import GetResponse
from mcp_server.registry.server import MCPServer
from tests.support.peers import RecordingPeer

server = MCPServer("guarantee-units")
STARTED: dict[str, asyncio.Event] = {}
"""Events a test waits on, set by ``units/sleep`` when its ``params["tag"]`` names one."""


@server.tool(timeout=0.25)
async def limited() -> str:
    """A tool with its own deadline."""
    return "done"


@server.tool
async def unlimited() -> str:
    """A tool that uses the global deadline."""
    return "done"


@server.method("units/ok")
async def ok(params: dict[str, Any]) -> dict[str, Any]:
    return {"echo": params}


@server.method("units/none")
async def returns_nothing(params: dict[str, Any]) -> dict[str, Any] | None:
    return None


@server.method("units/raise")
async def raises(params: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("boom")


@server.method("units/refuse")
async def refuses(params: dict[str, Any]) -> dict[str, Any]:
    raise JSONRPCError(-32029, "Rate limited", {"retry": 1})


@server.method("units/own-timeout")
async def own_timeout(params: dict[str, Any]) -> dict[str, Any]:
    """Raises ``TimeoutError`` itself (an upstream call timed out): a failure, not the request's deadline."""
    raise TimeoutError("upstream took too long")


@server.method("units/sleep")
async def sleeps(params: dict[str, Any]) -> dict[str, Any]:
    if "tag" in params:
        STARTED[params["tag"]].set()
    await asyncio.sleep(float(params["seconds"]))
    return {"slept": params["seconds"]}


def list_for_units_list(get_response: GetResponse) -> GetResponse:
    """Middleware that answers ``units/list`` with a list: only middleware can hand ``answer`` a non-dict."""

    async def middleware(ctx: Context) -> Any:
        if ctx.method == "units/list":
            return ["not", "an", "object"]
        return await get_response(ctx)

    return middleware


def fresh(text: str) -> str:
    """``text`` as a new string object, as a method name decoded from JSON is (never the interned literal)."""
    value = json.loads(json.dumps(text))
    assert isinstance(value, str)
    return value


def context(method: str, params: dict[str, Any] | None = None, request_id: int | str = 7) -> Context:
    return Context(
        server=server,
        session=SessionState(id=None, protocol_version="2025-11-25"),
        request_id=request_id,
        method=fresh(method),
        params=json.loads(json.dumps(params or {})),
        peer=RecordingPeer(),
    )


@pytest.fixture(autouse=True)
def mcp_config(settings: Any) -> Any:
    settings.MCP_SERVER = {
        **settings.MCP_SERVER,
        "REQUEST_TIMEOUT": 42.0,
        "MIDDLEWARE": ["tests.protocol.test_guarantee.list_for_units_list"],
    }
    settings.DEBUG = False
    return settings


# -- deadline_for and name_of -----------------------------------------------------------------------------


def test_a_tools_own_timeout_is_its_deadline() -> None:
    assert deadline_for(context("tools/call", {"name": "limited"})) == 0.25


def test_a_tool_without_timeout_gets_the_global_deadline() -> None:
    assert deadline_for(context("tools/call", {"name": "unlimited"})) == 42.0


def test_an_unknown_tool_gets_the_global_deadline() -> None:
    assert deadline_for(context("tools/call", {"name": "nope"})) == 42.0


@pytest.mark.parametrize("method", ["prompts/get", "tools/list", "units/ok"])
def test_only_tools_call_uses_a_tools_timeout(method: str) -> None:
    """Another method naming a tool with a timeout (``prompts/get`` sorts before, ``tools/list`` after)."""
    assert deadline_for(context(method, {"name": "limited"})) == 42.0


@pytest.mark.parametrize("timeout", [None, 0])
def test_no_global_deadline(settings: Any, timeout: float | None) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "REQUEST_TIMEOUT": timeout}
    assert deadline_for(context("tools/call", {"name": "unlimited"})) is None
    assert deadline_for(context("tools/call", {"name": "limited"})) == 0.25


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "search", "uri": "x://y"}, "search"),
        ("prompts/get", {"name": "greet"}, "greet"),
        ("resources/read", {"uri": "books://1", "name": "n"}, "books://1"),
        ("resources/subscribe", {"uri": "books://2"}, "books://2"),
        ("tools/list", {"name": "search", "uri": "x://y"}, ""),
        ("ping", {}, ""),
    ],
)
def test_name_of_is_the_tool_prompt_or_resource(method: str, params: dict[str, Any], name: str) -> None:
    assert name_of(fresh(method), params) == name


# -- answer -------------------------------------------------------------------------------------------------


async def test_a_result_is_one_success_response() -> None:
    response, state = await answer(context("units/ok", {"a": 1}, request_id="r-1"), 5.0)
    assert response == {"jsonrpc": "2.0", "id": "r-1", "result": {"echo": {"a": 1}}}
    assert state == State.ANSWERED


async def test_a_raw_method_returning_nothing_is_one_internal_error() -> None:
    response, state = await answer(context("units/none"))
    assert response["id"] == 7
    assert response["error"] == {
        "code": -32603,
        "message": "Handler for method 'units/none' returned no result",
    }
    assert "result" not in response
    assert state == State.ANSWERED


async def test_a_middleware_returning_a_list_is_one_internal_error() -> None:
    response, state = await answer(context("units/list"))
    assert response["error"] == {"code": -32603, "message": "Handler for method 'units/list' returned list"}
    assert state == State.ANSWERED


async def test_an_exception_is_an_internal_error_without_details_unless_debug() -> None:
    response, state = await answer(context("units/raise"), 5.0)
    assert response["error"] == {"code": -32603, "message": "Internal error while handling units/raise"}
    assert state == State.ANSWERED


async def test_error_detail_adds_the_exception_and_traceback(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "ERROR_DETAIL": True}
    response, _ = await answer(context("units/raise"))
    data = response["error"]["data"]
    assert data["exception"] == "ValueError('boom')"
    assert any("ValueError: boom" in line for line in data["traceback"])


async def test_debug_alone_sends_no_traceback(settings: Any) -> None:
    """``DEBUG`` is on in development sites and demos that anyone may reach: only ``ERROR_DETAIL`` opts in."""
    settings.DEBUG = True
    response, _ = await answer(context("units/raise"))
    assert response["error"] == {"code": -32603, "message": "Internal error while handling units/raise"}


async def test_a_jsonrpc_error_is_answered_with_its_own_code_and_data() -> None:
    response, state = await answer(context("units/refuse"), 5.0)
    assert response["error"] == {"code": -32029, "message": "Rate limited", "data": {"retry": 1}}
    assert state == State.ANSWERED


async def test_the_deadline_answers_minus_32001_and_settles_timed_out() -> None:
    response, state = await answer(context("units/sleep", {"seconds": 30}), 0.05)
    assert response["error"] == {
        "code": -32001,
        "message": "Request timed out after 0.05s",
        "data": {"timeout": 0.05},
    }
    assert state == State.TIMED_OUT


@pytest.mark.parametrize("seconds", [None, 30.0])
async def test_a_handlers_own_timeout_error_is_a_failure_not_the_deadline(seconds: float | None) -> None:
    response, state = await answer(context("units/own-timeout"), seconds)
    assert response["error"] == {"code": -32603, "message": "Internal error while handling units/own-timeout"}
    assert state == State.ANSWERED


async def test_a_handler_within_its_deadline_is_answered() -> None:
    response, state = await answer(context("units/sleep", {"seconds": 0}), 30.0)
    assert response["result"] == {"slept": 0}
    assert state == State.ANSWERED


async def test_cancelling_answer_propagates_and_produces_no_response() -> None:
    """Cancellation (the client's cancel, the session's end) is decided by the settler, not answered here."""
    started = STARTED["cancel"] = asyncio.Event()
    task = asyncio.create_task(answer(context("units/sleep", {"seconds": 30, "tag": "cancel"}), 60.0))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
