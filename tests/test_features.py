"""The 2025-11-25 feature set beyond what the conformance suite checks: pagination, output schemas,
completion, missing resources, logging levels."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from typing_extensions import TypedDict

from mcp_server import MCPServer
from mcp_server.registry.results import output_schema_for
from tests.live import LiveServer
from tests.raw import RawSession, open_session


@pytest.fixture(scope="module")
def paged_server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"PAGE_SIZE": 2})


@pytest.fixture
async def session(paged_server: LiveServer) -> AsyncIterator[RawSession]:
    async with httpx.AsyncClient(timeout=20) as http:
        yield await open_session(http, paged_server.url)


async def test_lists_are_paginated_with_opaque_cursors(session: RawSession) -> None:
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = (await session.request("tools/list", params))["result"]
        assert len(result["tools"]) <= 2
        names += [tool["name"] for tool in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if not cursor:
            break
    assert pages > 2
    assert len(names) == len(set(names))
    assert {"echo", "search_books", "test_simple_text"} <= set(names)


@pytest.mark.parametrize("cursor", ["not-a-cursor", "eyJvIjogLTF9", "eyJvIjogOTk5OX0="])
async def test_a_bad_cursor_is_invalid_params(session: RawSession, cursor: str) -> None:
    answer = await session.request("tools/list", {"cursor": cursor})
    assert answer["error"]["code"] == -32602


async def test_the_official_client_follows_cursors(paged_server: LiveServer) -> None:
    async with Client(paged_server.url) as client:
        first = await client.list_tools()
        assert first.next_cursor is not None
        second = await client.list_tools(cursor=first.next_cursor)
        assert {t.name for t in first.tools}.isdisjoint({t.name for t in second.tools})


async def test_missing_resource_is_minus_32002(session: RawSession) -> None:
    answer = await session.request("resources/read", {"uri": "catalogue://nothing-here"})
    assert answer["error"]["code"] == -32002


async def test_completion_of_prompt_arguments(session: RawSession) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": ""},
    }
    answer = await session.request("completion/complete", params)
    assert "values" in answer["result"]["completion"]


async def test_logging_set_level_rejects_unknown_levels(session: RawSession) -> None:
    assert (await session.request("logging/setLevel", {"level": "warning"}))["result"] == {}
    assert (await session.request("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602


async def test_unknown_prompt_is_invalid_params(paged_server: LiveServer) -> None:
    async with Client(paged_server.url) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("no_such_prompt", {})
        assert raised.value.error.code == -32602


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Size:
    width: float
    height: float


class Label(TypedDict):
    text: str


@pytest.mark.parametrize(
    ("annotation", "wrapped", "required"),
    [
        (Point, False, {"x", "y"}),
        (Size, False, {"width", "height"}),
        (Label, False, {"text"}),
        (int, True, {"result"}),
        (list[Point], True, {"result"}),
        (dict[str, int], False, set()),
    ],
)
def test_output_schemas_from_return_types(annotation: object, wrapped: bool, required: set[str]) -> None:
    schema, is_wrapped = output_schema_for(annotation)
    assert schema is not None
    assert schema["type"] == "object"
    assert is_wrapped is wrapped
    assert set(schema.get("required", [])) == required


async def test_structured_content_carries_a_text_copy() -> None:
    server = MCPServer("features")

    @server.tool
    async def where() -> Point:
        return Point(x=1, y=2)

    result = server.tools["where"].to_result(Point(x=1, y=2))
    assert result["structuredContent"] == {"x": 1, "y": 2}
    assert result["content"][0]["text"] == '{"x": 1, "y": 2}'
    assert server.tools["where"].definition()["outputSchema"]["required"] == ["x", "y"]


def test_a_server_can_include_another() -> None:
    base, extra = MCPServer("base"), MCPServer("extra")

    @extra.tool
    async def ping_tool() -> str:
        return "pong"

    @extra.resource("extra://thing")
    async def thing() -> str:
        return "thing"

    base.include(extra)
    assert base.tools["ping_tool"] is extra.tools["ping_tool"]
    assert base.find_resource("extra://thing") is not None
    with pytest.raises(ImproperlyConfigured):
        base.include(extra)
