"""The demo's MCP Apps view over stdio (``manage.py mcp_stdio``), with the official client: the same document,
with no request to take an origin from (``APP_ORIGIN`` gives one), and its button's tool changes the
database."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client import advertise
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.live import ROOT
from tests.support.stdio import COMMAND, database, rows, stdio_env, template

__all__ = ["database", "template"]  # the fixtures this module borrows from tests.support.stdio

pytestmark = pytest.mark.asyncio

CARDS = "ui://django-mcp-demo/catalogue/book_cards.html"
APPS = advertise("io.modelcontextprotocol/ui", {"mimeTypes": ["text/html;profile=mcp-app"]})


def command(database: Path, overrides: dict[str, str] | None = None) -> StdioServerParameters:
    env = stdio_env(database, overrides)
    return StdioServerParameters(command=sys.executable, args=COMMAND, cwd=ROOT, env=env)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_view_over_stdio(database: Path, mode: str) -> None:
    async with Client(stdio_client(command(database)), mode=mode, extensions=[APPS]) as client:
        extensions = client.server_capabilities.extensions or {}
        assert "io.modelcontextprotocol/ui" in extensions
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["search_books"].meta == {"ui": {"resourceUri": CARDS}}
        read = await client.read_resource(CARDS)
        (content,) = read.contents
        assert content.mime_type == "text/html;profile=mcp-app"
        assert content.meta == {"ui": {"csp": {}, "prefersBorder": True}}  # no origin: nothing to allow
        assert "McpApp" in content.text
        assert 'callTool("reserve_copy"' in content.text
        found = await client.call_tool("search_books", {"query": "Earthsea"})
        book = found.structured_content["result"][0]
        reserved = await client.call_tool("reserve_copy", {"book_id": book["id"]})
        assert reserved.structured_content["copies_available"] == book["copies_available"] - 1
    assert ("guest (book cards)",) in rows(
        database, f"select borrower from catalogue_loan where book_id = {int(book['id'])}"
    )


async def test_app_origin_gives_the_view_its_site_over_stdio(database: Path) -> None:
    params = command(database, {"APP_ORIGIN": "https://library.example"})
    async with Client(stdio_client(params), extensions=[APPS]) as client:
        (content,) = (await client.read_resource(CARDS)).contents
    assert content.meta == {
        "ui": {"csp": {"resourceDomains": ["https://library.example"]}, "prefersBorder": True}
    }
