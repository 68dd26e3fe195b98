"""The official Python client in its default mode negotiates 2026-07-28 with a live server: its probe
(``server/discover``) succeeds, it never falls back to ``initialize``, and every request it makes is in
the ledger without a session."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from mcp import Client

from tests.support.admin import query
from tests.support.live import LiveServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module", params=["auto", "sse", "json"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": request.param})


async def test_the_official_client_speaks_2026_without_initialize(server: LiveServer) -> None:
    async with Client(server.url) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("search_books", {"query": "Calvino"})
        assert not result.is_error
        assert json.loads(result.content[0].text)[0]["author"] == "Italo Calvino"
        read = await client.read_resource("catalogue://books/1")
        assert json.loads(read.contents[0].text)["title"] == "A Wizard of Earthsea"
        prompt = await client.get_prompt("summarize_book", {"pk": "3"})
        assert "Invisible Cities" in prompt.messages[0].content.text

    wanted = {"server/discover", "tools/call", "resources/read", "prompts/get"}

    async def recorded() -> bool:
        rows = query(server, "SELECT method FROM mcp_server_ledgerentry WHERE state = 'answered'")
        return wanted <= {row["method"] for row in rows}

    await wait_for(recorded)
    rows = query(server, "SELECT method, session_id, outcome, protocol_version FROM mcp_server_ledgerentry")
    assert "initialize" not in {row["method"] for row in rows}  # no failed probe, no fallback
    modern = [row for row in rows if row["method"] in wanted]
    assert all(row["session_id"] is None for row in modern)
    assert {row["protocol_version"] for row in modern} == {"2026-07-28"}  # what the admin shows
    assert all("error" not in json.loads(row["outcome"]) for row in modern)
    assert query(server, "SELECT id FROM mcp_server_session") == []
