"""MCP Apps (SEP-1865) on the wire, with the official Python client against a live server, in both eras: the
extension in the server's capabilities, the tools' ``_meta.ui``, the views' documents, app-only tools, and
what a client without the extension gets."""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client import advertise
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from tests.support.admin import query
from tests.support.auth import sdk_client, shell
from tests.support.live import LiveServer
from tests.support.raw import final_response, initialize, open_session, rpc

pytestmark = pytest.mark.asyncio

EXTENSION = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
CARDS = "ui://django-mcp-demo/catalogue/book_cards.html"
PROBE = "ui://django-mcp-demo/probe"
HOSTILE = '<img src=x onerror="parent.postMessage(1)">&"\'</script>'


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({})


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    """The handshake era (``initialize``) and 2026-07-28 (``server/discover``, per-request ``_meta``)."""
    return str(request.param)


@asynccontextmanager
async def connect(
    server: LiveServer, mode: str, *, apps: bool = True, name: str = "apps-test"
) -> AsyncIterator[Client]:
    extensions = [advertise(EXTENSION, {"mimeTypes": [MIME]})] if apps else None
    info = Implementation(name=name, version="1.0")
    async with Client(server.url, mode=mode, extensions=extensions, client_info=info) as client:
        yield client


def tools_by_name(listed: Any) -> dict[str, Any]:
    return {tool.name: tool for tool in listed.tools}


async def test_the_server_declares_the_extension_in_both_eras(server: LiveServer, mode: str) -> None:
    async with connect(server, mode) as client:
        extensions = client.server_capabilities.extensions or {}
        assert extensions[EXTENSION] == {"mimeTypes": [MIME]}
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")


async def test_tools_name_their_view_and_the_handler_knows_the_client_declared_it(
    server: LiveServer, mode: str
) -> None:
    async with connect(server, mode) as client:
        tools = tools_by_name(await client.list_tools())
        assert tools["search_books"].meta == {"ui": {"resourceUri": CARDS}}
        assert tools["reserve_copy"].meta == {"ui": {"resourceUri": CARDS, "visibility": ["app"]}}
        assert "_meta" not in json.dumps(tools["get_book"].model_dump(by_alias=True, exclude_none=True))
        probe = await client.call_tool("apps_probe", {})
        assert probe.structured_content == {"apps": True}
    async with connect(server, mode, apps=False) as client:
        assert (await client.call_tool("apps_probe", {})).structured_content == {"apps": False}


async def test_the_view_is_the_rendered_template_with_its_ui_meta(server: LiveServer, mode: str) -> None:
    async with connect(server, mode) as client:
        resources = {r.uri: r for r in (await client.list_resources()).resources}
        assert resources[CARDS].mime_type == MIME
        assert resources[CARDS].meta == {"ui": {"prefersBorder": True}}
        read = await client.read_resource(CARDS)
    (content,) = read.contents
    assert content.mime_type == MIME
    assert content.meta == {"ui": {"csp": {"resourceDomains": [server.base]}, "prefersBorder": True}}
    document = content.text
    assert document.startswith("<!DOCTYPE html>")
    assert "global.McpApp = McpApp;" in document  # the bridge, inline
    assert 'callTool("reserve_copy"' in document
    assert "Reserving as a guest · shown in apps-test" in document
    assert "<script src=" not in document  # nothing to fetch: the view needs no network access


async def test_everything_from_the_client_is_escaped_and_no_csrf_token_is_rendered(
    server: LiveServer, mode: str
) -> None:
    async with connect(server, mode, name=HOSTILE) as client:
        read = await client.read_resource(PROBE)
    (content,) = read.contents
    document = content.text
    assert HOSTILE not in document
    assert "<img" not in document
    assert f'<p id="client">{html.escape(HOSTILE)}</p>' in document
    assert "csrfmiddlewaretoken" not in document  # no RequestContext: {% csrf_token %} renders nothing
    assert '<input type="hidden" value="">' in document
    assert f'<p id="view">{PROBE} apps_probe</p>' in document
    assert f'<p id="static">{server.base}/static/</p>' in document
    assert content.meta == {
        "ui": {
            "csp": {"resourceDomains": [server.base]},
            "permissions": {"clipboardWrite": {}},
            "prefersBorder": False,
            "domain": "probe.example",
        }
    }


async def test_app_only_tools_are_listed_only_with_the_extension_and_callable(
    server: LiveServer, mode: str
) -> None:
    async with connect(server, mode, apps=False) as client:
        tools = tools_by_name(await client.list_tools())
        assert "reserve_copy" not in tools  # the model of a client without views never sees it
        assert tools["search_books"].meta == {"ui": {"resourceUri": CARDS}}
        found = await client.call_tool("search_books", {"query": "Earthsea"})
        assert not found.is_error  # degrades: the text and the structured result, as without a view
        assert json.loads(found.content[0].text)[0]["title"] == "A Wizard of Earthsea"
        book = found.structured_content["result"][0]
        reserved = await client.call_tool("reserve_copy", {"book_id": book["id"]})
        assert not reserved.is_error, reserved
        assert reserved.structured_content["copies_available"] == book["copies_available"] - 1
    async with connect(server, mode) as client:
        assert "reserve_copy" in tools_by_name(await client.list_tools())

    # The loan commits before the call is answered (its handler's transaction), so it is there now.
    rows = query(server, "SELECT borrower FROM catalogue_loan WHERE book_id = ? ORDER BY id DESC", book["id"])
    assert rows[0]["borrower"] == "guest (book cards)"


async def test_views_follow_the_resources_permission_and_scope_rules(server: LiveServer) -> None:
    async with connect(server, "auto") as client:
        uris = {r.uri for r in (await client.list_resources()).resources}
        assert "ui://django-mcp-demo/staff-probe" not in uris  # its permission: staff only
        with pytest.raises(MCPError, match="not found"):
            await client.read_resource("ui://django-mcp-demo/staff-probe")
    made = shell(
        server,
        "from django.contrib.auth.models import User; from mcp_server.auth.models import AccessToken\n"
        "u = User.objects.create_user('viewer')\n"
        "print(AccessToken.objects.create_token(u, 'a', scopes=['tool:search_books'])[1])\n"
        "print(AccessToken.objects.create_token(u, 'b', scopes=['tool:search_books', 'resource:ui://*'])[1])\n",
    )
    narrow, wide = made.strip().splitlines()[-2:]
    async with sdk_client(server.url, narrow) as client:
        assert CARDS not in {r.uri for r in (await client.list_resources()).resources}
        with pytest.raises(MCPError, match=rf"authorize resource:{re.escape(CARDS)}$"):
            await client.read_resource(CARDS)
    async with sdk_client(server.url, wide) as client:
        read = await client.read_resource(CARDS)
        assert "Reserving as viewer" in read.contents[0].text


MALFORMED_DECLARATIONS = [
    "ui",
    {EXTENSION: []},
    {EXTENSION: {"mimeTypes": MIME}},  # a string, not a list
    {EXTENSION: {"mimeTypes": [1, None, {}, "x" * 1_000]}},
]

MADE_UP_VIEWS = [
    "ui://django-mcp-demo/../../project/settings.py",
    "ui://django-mcp-demo/catalogue/book_cards.html?x=1",
    "ui://another-server/catalogue/book_cards.html",
    "ui://django-mcp-demo/" + "x" * 5_000,
    "ui://django-mcp-demo/\u0000\ud7ff\u00e9",
    "ui://",
]


@pytest.mark.parametrize("extensions", MALFORMED_DECLARATIONS, ids=range(len(MALFORMED_DECLARATIONS)))
async def test_a_malformed_declaration_is_no_declaration_and_never_a_5xx(
    server: LiveServer, extensions: Any
) -> None:
    """Whatever a client puts where the extension goes, it is a client without views: no app-only tool is
    listed to it, and nothing fails."""
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url, capabilities={"extensions": extensions})
        listed = await session.post(rpc("tools/list", {}, 2))
    assert listed.status_code == 200, listed.text
    names = {tool["name"] for tool in final_response(listed, 2)["result"]["tools"]}
    assert "search_books" in names
    assert "reserve_copy" not in names


@pytest.mark.parametrize("uri", MADE_UP_VIEWS, ids=range(len(MADE_UP_VIEWS)))
async def test_a_made_up_view_is_not_found_and_reads_nothing_else(server: LiveServer, uri: str) -> None:
    """A ``ui://`` URI no tool registered (a path out of the templates, another server's, an oversized or
    odd one) is refused as an unknown resource: no template is rendered for it, no file is read."""
    async with connect(server, "legacy") as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
    assert refused.value.error.code in (-32002, -32602), refused.value.error


async def test_an_oversized_declaration_is_refused_at_initialize(server: LiveServer) -> None:
    """Client metadata past ``MAX_CLIENT_METADATA_BYTES`` (a declaration of 5,000 MIME types) is refused
    with a JSON-RPC error naming the cap, never a 5xx, and opens no session."""
    huge = {"extensions": {EXTENSION: {"mimeTypes": ["text/html"] * 5_000}}}
    async with httpx.AsyncClient(timeout=30) as http:
        response = await initialize(http, server.url, capabilities=huge)
    assert response.status_code < 500, response.text
    answer = final_response(response)
    assert answer["error"]["code"] == -32602, answer
    assert "MAX_CLIENT_METADATA_BYTES" in answer["error"]["message"]
    assert response.headers.get("mcp-session-id") is None
