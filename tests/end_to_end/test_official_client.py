"""The official MCP client against a real Daphne server, in every response mode."""

from __future__ import annotations

import json

from mcp import Client

from tests.support.live import LiveServer


async def test_list_and_call_tools(any_mode_server: LiveServer) -> None:
    async with Client(
        any_mode_server.url, mode="legacy"
    ) as client:  # the handshake era (2026: test_modern_client)
        assert client.protocol_version == "2025-11-25"
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"search_books", "get_book", "reserve_book", "echo"} <= names
        result = await client.call_tool("search_books", {"query": "Calvino"})
        assert not result.is_error
        titles = {book["title"] for book in result.structured_content["result"]}
        assert titles == {"Invisible Cities", "If on a Winter's Night a Traveler"}
        assert json.loads(result.content[0].text)[0]["author"] == "Italo Calvino"


async def test_read_resource_and_get_prompt(any_mode_server: LiveServer) -> None:
    async with Client(any_mode_server.url) as client:
        templates = await client.list_resource_templates()
        assert "catalogue://books/{pk}" in {t.uri_template for t in templates.resource_templates}
        read = await client.read_resource("catalogue://books/1")
        assert json.loads(read.contents[0].text)["title"] == "A Wizard of Earthsea"
        prompt = await client.get_prompt("summarize_book", {"pk": "3"})
        assert "Invisible Cities" in prompt.messages[0].content.text
