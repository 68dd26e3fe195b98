"""Several servers at their own URLs (the demo's staff server at /staff/mcp) and models as query tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.auth import http_client, make_fixtures, sdk_client, tool_names
from tests.support.live import LiveServer
from tests.support.raw import RawSession, open_session, rpc

Fixtures = tuple[LiveServer, dict[str, Any]]


@pytest.fixture(scope="module")
def site(start: Callable[..., LiveServer]) -> Fixtures:
    server = start()
    return server, make_fixtures(server)


def structured(result: dict[str, Any]) -> Any:
    assert "error" not in result, result
    assert not result["result"].get("isError"), result
    return result["result"]["structuredContent"]


async def test_each_server_has_its_url_identity_and_sessions(site: Fixtures) -> None:
    server, data = site
    staff_url = f"{server.base}/staff/mcp"
    async with http_client(data["tokens"]["bob"]) as http:
        default = await open_session(http, server.url)
        staff = await open_session(http, staff_url)
        assert default.init_result["serverInfo"]["name"] == "django-mcp-demo"
        assert staff.init_result["serverInfo"]["name"] == "django-mcp-demo-staff"
        assert staff.init_result["serverInfo"]["title"] == "Django MCP demo: library staff tools"
        assert "Staff tools" in staff.init_result["instructions"]
        default_tools = tool_names(await default.request("tools/list", {}))
        staff_tools = tool_names(await staff.request("tools/list", {}))
        assert staff_tools == {"books_list", "books_get", "loans_list", "loans_get"}
        assert "search_books" in default_tools
        assert not default_tools & staff_tools
        # A session belongs to its server: the default server's id is unknown at /staff/mcp.
        crossed = await http.post(staff_url, json=rpc("ping", None, 9), headers=default.headers())
        assert crossed.status_code == 404


async def test_official_client_on_the_second_server(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(f"{server.base}/staff/mcp", data["tokens"]["bob"]) as client:
        result = await client.call_tool("books_get", {"id": 1})
        assert not result.is_error
        assert result.structured_content["title"] == "A Wizard of Earthsea"


async def staff_session(http: httpx.AsyncClient, server: LiveServer) -> RawSession:
    return await open_session(http, f"{server.base}/staff/mcp")


async def test_models_as_tools_list_filter_order_paginate(site: Fixtures) -> None:
    server, data = site
    async with http_client(data["tokens"]["bob"]) as http:
        session = await staff_session(http, server)
        page = structured(await session.call_tool("books_list", {"author__name__icontains": "calvino"}))
        assert {b["title"] for b in page["items"]} == {
            "Invisible Cities",
            "If on a Winter's Night a Traveler",
        }
        assert page["next_cursor"] is None
        assert set(page["items"][0]) == {"id", "title", "author__name", "year", "isbn", "copies_available"}

        everything = structured(await session.call_tool("books_list", {"order_by": "-year", "limit": 50}))
        years = [b["year"] for b in everything["items"]]
        assert years == sorted(years, reverse=True)

        seen: list[int] = []
        cursor = None
        while True:
            arguments: dict[str, Any] = {"order_by": "title", "limit": 2}
            if cursor:
                arguments["cursor"] = cursor
            page = structured(await session.call_tool("books_list", arguments))
            assert len(page["items"]) <= 2
            seen += [b["id"] for b in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(b["id"] for b in everything["items"])
        assert len(seen) == len(set(seen))

        ranged = structured(await session.call_tool("books_list", {"year__gte": 1970, "year__lte": 1979}))
        assert all(1970 <= b["year"] <= 1979 for b in ranged["items"])

        book = structured(await session.call_tool("books_get", {"id": 1}))
        assert book["title"] == "A Wizard of Earthsea"


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("books_get", {"id": 999999}, "No book with id 999999"),
        ("books_list", {"cursor": "!!not-a-cursor"}, "Invalid cursor"),
        ("books_list", {"order_by": "summary"}, "order_by"),
        ("books_list", {"summary__icontains": "x"}, "summary__icontains"),
        ("books_list", {"limit": 51}, "limit"),
    ],
)
async def test_models_as_tools_refuse_bad_arguments(
    site: Fixtures, tool: str, arguments: dict[str, Any], message: str
) -> None:
    server, data = site
    async with http_client(data["tokens"]["bob"]) as http:
        session = await staff_session(http, server)
        result = (await session.call_tool(tool, arguments))["result"]
        assert result["isError"]
        assert message in result["content"][0]["text"]


async def test_models_as_tools_need_the_view_permission(site: Fixtures) -> None:
    server, data = site
    async with http_client(data["tokens"]["alice"]) as http:
        session = await staff_session(http, server)
        assert tool_names(await session.request("tools/list", {})) == set()
        assert (await session.call_tool("books_list", {}))["error"]["code"] == -32602
    async with httpx.AsyncClient() as http:
        session = await staff_session(http, server)
        assert (await session.call_tool("books_get", {"id": 1}))["error"]["code"] == -32602
    async with http_client(data["tokens"]["bob_books"]) as http:  # scoped to tool:books_*
        session = await staff_session(http, server)
        assert tool_names(await session.request("tools/list", {})) == {"books_list", "books_get"}
