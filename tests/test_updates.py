"""Server-initiated notifications: ``resources/updated`` to subscribers, ``list_changed`` to every session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import pytest
from channels.layers import get_channel_layer
from django.utils import timezone

from mcp_server.models import Session
from mcp_server.registry.server import MCPServer
from mcp_server.transports.signals import session_group
from mcp_server.updates import anotify_list_changed, anotify_resource_updated, watch_registry
from tests.live import LiveServer

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

    async def stream(self) -> AsyncGenerator[dict[str, Any], None]:
        """The standalone GET stream's messages (the generator starts once the stream is open)."""
        headers = {**self.headers, "Accept": "text/event-stream"}
        async with self.client.stream("GET", self.url, headers=headers) as response:
            assert response.status_code == 200
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif not line and data:
                    yield json.loads("\n".join(data))
                    data = []


async def _next_message(stream: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(anext(stream), 5.0)


async def test_resource_updated_reaches_only_subscribers(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        watcher, bystander = _Session(client, live_server.url), _Session(client, live_server.url)
        await watcher.open()
        await bystander.open()
        assert await watcher.call("resources/subscribe", {"uri": WATCHED}) == {}
        stream = watcher.stream()
        reader = asyncio.ensure_future(_next_message(stream))
        await asyncio.sleep(0.3)  # let the GET stream join its group
        told = await bystander.call(
            "tools/call", {"name": "update_watched_resource", "arguments": {"text": "v2"}}
        )
        assert "notified 1 subscribed session(s)" in told["content"][0]["text"]
        message = await reader
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
        await stream.aclose()


async def _session_row(
    session_id: str, server: str, *, ended: bool = False, uris: list[str] | None = None
) -> None:
    now = timezone.now()
    await Session.objects.acreate(
        id=session_id,
        server=server,
        protocol_version="2025-11-25",
        last_seen=now,
        ended_at=now if ended else None,
        subscriptions=uris or [],
    )


async def _listen(session_id: str) -> tuple[Any, str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(session_group(session_id), channel)
    return layer, channel


@pytest.mark.django_db(transaction=True)
async def test_resource_updated_skips_ended_and_unsubscribed_sessions() -> None:
    await _session_row("live-subscribed", "default", uris=["test://a"])
    await _session_row("live-other", "default", uris=["test://b"])
    await _session_row("ended-subscribed", "default", ended=True, uris=["test://a"])
    layer, channel = await _listen("live-subscribed")
    assert await anotify_resource_updated("test://a") == 1
    event = await asyncio.wait_for(layer.receive(channel), 2)
    assert event["message"]["params"] == {"uri": "test://a"}


@pytest.mark.django_db(transaction=True)
async def test_list_changed_when_the_registry_changes_at_run_time() -> None:
    server = MCPServer("updates-test")
    watch_registry(server)
    watch_registry(server)  # idempotent: one notification per change, not two
    await _session_row("watching", server.name)
    await _session_row("gone", server.name, ended=True)
    layer, channel = await _listen("watching")

    @server.tool
    async def late_tool() -> str:
        """Registered while sessions are live."""
        return "late"

    event = await asyncio.wait_for(layer.receive(channel), 2)
    assert event["message"] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), 0.2)
    with pytest.raises(ValueError, match="unknown feature"):
        await anotify_list_changed("roots", server)
