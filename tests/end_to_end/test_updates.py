"""Server-initiated notifications through a live server: ``resources/updated`` reaches the subscribed
session's standalone GET stream and no other (how they are sent: ``tests/transports/test_updates.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer

WATCHED = "test://watched-resource"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    blocks = response.text.replace("\r\n", "\n").split("\n\n")
    data = ["\n".join(ln[5:].lstrip() for ln in b.split("\n") if ln.startswith("data:")) for b in blocks]
    return [json.loads(d) for d in data if d]


class _Session:
    """A raw Streamable HTTP session."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self.client, self.url = client, url
        self.headers = dict(HEADERS)
        self.next_id = 0

    async def open(self) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        response = await self.client.post(
            self.url,
            headers=self.headers,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
        )
        self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        notified = await self.client.post(
            self.url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert notified.status_code == 202

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        response = await self.client.post(self.url, headers=self.headers, json=message)
        final = [m for m in _messages(response) if m.get("id") == self.next_id]
        assert len(final) == 1, response.text
        assert "result" in final[0], final[0]
        result: dict[str, Any] = final[0]["result"]
        return result

    @contextlib.asynccontextmanager
    async def stream(self) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """The standalone GET stream's messages, once the server has joined it to the session's group.

        The server writes the priming event (or, before 2025-11-25, the comment ``: stream open``) right
        after ``group_add``: reading it is the proof that a notification sent from now on reaches this
        stream.
        """
        headers = {**self.headers, "Accept": "text/event-stream"}
        async with self.client.stream("GET", self.url, headers=headers) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            first = await asyncio.wait_for(anext(lines), 5.0)
            assert first == ": stream open" or first.startswith("id: g"), first
            yield _events(lines)


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            if any(data):  # (a priming event has empty data)
                yield json.loads("\n".join(data))
            data = []


async def _next_message(stream: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(anext(stream), 5.0)


@pytest.fixture(scope="module")
def own_server(start: Callable[..., LiveServer]) -> LiveServer:
    """A server of this module's own: sessions of other tests may subscribe to the same URI elsewhere."""
    return start({})


async def test_resource_updated_reaches_only_subscribers(own_server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        watcher, bystander = _Session(client, own_server.url), _Session(client, own_server.url)
        await watcher.open()
        await bystander.open()
        assert await watcher.call("resources/subscribe", {"uri": WATCHED}) == {}
        async with watcher.stream() as stream:
            told = await bystander.call(
                "tools/call", {"name": "update_watched_resource", "arguments": {"text": "v2"}}
            )
            assert "notified 1 subscribed session(s)" in told["content"][0]["text"]
            message = await _next_message(stream)
            assert message == {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": WATCHED},
            }
            read = await watcher.call("resources/read", {"uri": WATCHED})
            assert read["contents"][0]["text"] == "v2"
            assert await watcher.call("resources/unsubscribe", {"uri": WATCHED}) == {}
            told = await bystander.call(
                "tools/call", {"name": "update_watched_resource", "arguments": {"text": "v3"}}
            )
            assert "notified 0 subscribed session(s)" in told["content"][0]["text"]
