"""A raw-HTTP MCP session for tests that need control the official client does not give (ids, timing)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

ACCEPT_BOTH = "application/json, text/event-stream"


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | str = 1) -> dict[str, Any]:
    """A JSON-RPC request."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages carried by the ``data:`` lines of an event stream, in order."""
    messages: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, framed as JSON (object or array) or as an event stream."""
    kind = str(response.headers.get("content-type", "")).split(";")[0].strip()
    if kind == "application/json":
        body = response.json()
        return body if isinstance(body, list) else [body]
    if kind == "text/event-stream":
        return parse_sse(response.text)
    if response.status_code == 202 and not response.content:
        return []
    raise AssertionError(f"unexpected response {response.status_code} {kind!r}: {response.text[:200]}")


async def wait_for(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, what: str = "condition"
) -> None:
    """Poll ``check`` until it holds; fail after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.01)
    return None


@dataclass
class RawSession:
    """One MCP session over raw HTTP."""

    client: httpx.AsyncClient
    url: str
    version: str = "2025-11-25"
    session_id: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    _next_id: int = 1000

    def headers(self) -> dict[str, str]:
        headers = {
            "Accept": ACCEPT_BOTH,
            "Content-Type": "application/json",
            "MCP-Protocol-Version": self.version,
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        return headers

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def initialize(self) -> dict[str, Any]:
        params = {
            "protocolVersion": self.version,
            "capabilities": self.capabilities,
            "clientInfo": {"name": "raw-tests", "version": "1.0"},
        }
        response = await self.client.post(self.url, headers=self.headers(), json=rpc("initialize", params, 0))
        assert response.status_code == 200, response.text
        self.session_id = response.headers.get("mcp-session-id")
        await self.notify("notifications/initialized")
        return messages_of(response)[-1]

    async def post(self, body: Any) -> httpx.Response:
        return await self.client.post(self.url, headers=self.headers(), json=body)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = await self.post(message)
        assert response.status_code == 202, response.text
        return response

    async def cancel(self, request_id: int | str, reason: str = "test") -> None:
        await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    async def call(
        self, method: str, params: dict[str, Any] | None = None, request_id: int | None = None
    ) -> Any:
        """Send a request and return its response message."""
        rid = request_id if request_id is not None else self.next_id()
        response = await self.post(rpc(method, params, rid))
        answers = [m for m in messages_of(response) if m.get("id") == rid and "method" not in m]
        assert len(answers) == 1, messages_of(response)
        return answers[0]

    async def tool(
        self, name: str, arguments: dict[str, Any] | None = None, request_id: int | None = None
    ) -> Any:
        return await self.call("tools/call", {"name": name, "arguments": arguments or {}}, request_id)

    async def stats(self) -> dict[str, Any]:
        """The server process's in-flight counts (``test/stats``)."""
        answer = await self.call("test/stats", {})
        return dict(answer["result"])

    async def wait_pending(self, *request_ids: int | str, timeout: float = 10.0) -> None:
        """Wait until the server holds every one of ``request_ids`` in flight."""

        async def held() -> bool:
            return set(request_ids) <= set((await self.stats())["pending"])

        await wait_for(held, timeout=timeout, what=f"requests {request_ids} in flight")
