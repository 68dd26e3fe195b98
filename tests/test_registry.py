"""The registry: decorators, schemas from type hints, and how tool and method outcomes are answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from mcp import Client
from pydantic import BaseModel

from mcp_server import Context, MCPServer, ToolError
from tests.live import LiveServer
from tests.raw import RawSession, content_type, open_session, parse_sse, rpc


class Point(BaseModel):
    x: int
    y: int


# -- decorators (plain unit tests on a fresh server) ---------------------------------------------------------


def test_decorators_with_and_without_arguments() -> None:
    server = MCPServer("x")

    @server.tool
    async def plain(a: int) -> int:
        """Plain tool.

        More text that is not part of the description."""
        return a

    @server.tool(name="renamed", title="Renamed", description="Given description")
    def original_name() -> str:
        return "x"

    @server.prompt
    async def bare_prompt(topic: str) -> str:
        return topic

    @server.prompt(name="named_prompt", title="Named")
    def other_prompt() -> str:
        return "p"

    @server.resource("res://fixed", mime_type="text/plain")
    async def fixed() -> str:
        return "fixed"

    @server.resource("res://items/{item_id}")
    async def item(item_id: int) -> str:
        return str(item_id)

    @server.method("x/custom")
    async def custom(params: dict[str, Any]) -> dict[str, Any]:
        return params

    # The decorators hand back the function itself.
    assert server.tools["plain"].fn is plain
    assert server.tools["renamed"].fn is original_name
    assert server.prompts["bare_prompt"].fn is bare_prompt
    assert server.prompts["named_prompt"].fn is other_prompt
    assert server.resources["res://fixed"].fn is fixed
    assert server.methods["x/custom"] is custom

    assert set(server.tools) == {"plain", "renamed"}
    assert set(server.prompts) == {"bare_prompt", "named_prompt"}
    assert server.tools["plain"].definition()["description"] == "Plain tool."
    renamed = server.tools["renamed"].definition()
    assert (renamed["name"], renamed["title"], renamed["description"]) == (
        "renamed",
        "Renamed",
        "Given description",
    )
    assert server.prompts["named_prompt"].definition()["title"] == "Named"
    assert server.prompts["bare_prompt"].definition()["arguments"] == [{"name": "topic", "required": True}]
    assert not server.resources["res://fixed"].is_template
    assert server.resources["res://items/{item_id}"].is_template
    found = server.find_resource("res://items/7")
    assert found is not None
    assert found[0].fn is item
    assert found[1] == {"item_id": "7"}


def _register_twice(register: Callable[[Callable[..., Any]], Any]) -> None:
    async def first() -> str:
        return "1"

    async def second() -> str:
        return "2"

    register(first)
    register(second)


@pytest.mark.parametrize(
    "kind",
    ["tool", "named tool", "prompt", "named prompt", "resource", "method"],
)
def test_duplicate_names_raise_improperly_configured(kind: str) -> None:
    server = MCPServer("x")
    registrars: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "tool": lambda fn: server.tool(name="same")(fn),
        "named tool": lambda fn: server.tool(name="dup")(fn),
        "prompt": lambda fn: server.prompt(name="same")(fn),
        "named prompt": lambda fn: server.prompt(name="dup")(fn),
        "resource": lambda fn: server.resource("res://same")(fn),
        "method": lambda fn: server.method("x/same")(fn),
    }
    with pytest.raises(ImproperlyConfigured, match="already registered"):
        _register_twice(registrars[kind])


def test_duplicate_bare_tool_name_raises() -> None:
    server = MCPServer("x")

    async def echo(text: str) -> str:
        return text

    server.tool(echo)
    with pytest.raises(ImproperlyConfigured):
        server.tool(echo)
    # A different name for the same function is fine.
    server.tool(name="echo2")(echo)
    assert set(server.tools) == {"echo", "echo2"}


@pytest.mark.parametrize("name", ["tools/call", "initialize", "ping", "notifications/anything"])
def test_builtin_methods_cannot_be_overridden(name: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        MCPServer("x").method(name)


def test_servers_are_independent() -> None:
    first, second = MCPServer("a"), MCPServer("b")

    @first.tool
    async def only_here() -> str:
        return ""

    assert "only_here" in first.tools
    assert "only_here" not in second.tools


# -- input schema from type hints ----------------------------------------------------------------------------


async def plot(
    label: str, point: Point, ctx: Context, scale: float = 1.0, tags: list[str] | None = None
) -> str:
    """Plot a point."""
    return f"{label} {point.x},{point.y} x{scale} {tags}"


def test_input_schema_from_type_hints() -> None:
    server = MCPServer("x")
    server.tool(plot)
    schema = server.tools["plot"].definition()["inputSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"label", "point", "scale", "tags"}  # no ctx
    assert set(schema["required"]) == {"label", "point"}
    assert schema["properties"]["label"]["type"] == "string"
    assert schema["properties"]["scale"]["type"] == "number"
    assert schema["properties"]["scale"]["default"] == 1.0
    assert schema["properties"]["tags"]["default"] is None
    ref = schema["properties"]["point"]["$ref"]
    model = schema["$defs"][ref.rsplit("/", 1)[-1]]
    assert set(model["required"]) == {"x", "y"}
    assert model["properties"]["x"]["type"] == "integer"


def test_tool_without_parameters_has_an_object_schema() -> None:
    server = MCPServer("x")

    @server.tool
    async def nothing() -> str:
        return ""

    schema = server.tools["nothing"].definition()["inputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"] == {}
    assert "required" not in schema


async def test_pydantic_argument_is_validated_and_built() -> None:
    server = MCPServer("x")
    server.tool(plot)
    tool = server.tools["plot"]
    good = await tool.call({"label": "p", "point": {"x": 1, "y": 2}, "scale": 2}, None)
    assert good.get("isError") is not True
    assert good["content"] == [{"type": "text", "text": "p 1,2 x2.0 None"}]
    bad = await tool.call({"label": "p", "point": {"x": 1, "y": "north"}}, None)
    assert bad["isError"] is True
    assert "point.y" in bad["content"][0]["text"]
    missing = await tool.call({"point": {"x": 1, "y": 2}}, None)
    assert missing["isError"] is True
    assert "label" in missing["content"][0]["text"]


async def test_tool_error_becomes_is_error_with_its_message() -> None:
    server = MCPServer("x")

    @server.tool
    def refuse(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    result = await server.tools["refuse"].call({"reason": "closed"}, None)
    assert result == {"content": [{"type": "text", "text": "refused: closed"}], "isError": True}


# -- behaviour through a live server -------------------------------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0) as client:
        yield client


@pytest.fixture
async def session(http: httpx.AsyncClient, live_server: LiveServer) -> RawSession:
    return await open_session(http, live_server.url)


@pytest.fixture(scope="session")
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
        assert "boom" in raised.content[0].text
        tool_error = await client.call_tool("get_book", {"book_id": 999999})
        assert tool_error.is_error
        assert tool_error.content[0].text == "No book with id 999999"
        fine = await client.call_tool("echo", {"text": "still fine"})
        assert not fine.is_error
        assert fine.content[0].text == "still fine"


async def test_tool_that_raises_is_an_is_error_result(session: RawSession) -> None:
    answer = await session.call_tool("raises")
    assert answer["result"]["isError"] is True
    assert "boom" in answer["result"]["content"][0]["text"]


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
