"""Raw-HTTP MCP sessions, for tests that need control the official client does not give (ids, timing,
headers, framing)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support.live import LiveServer
from tests.support.wait import wait_for

ACCEPT_BOTH = "application/json, text/event-stream"
LATEST = "2025-11-25"
CLIENT_INFO = {"name": "raw-http-tests", "version": "1.0"}


MODERN = "2026-07-28"


def sessionless_meta(
    capabilities: dict[str, Any] | None = None, client_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``_meta`` envelope of a 2026-07-28 request."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }
    if client_info is not None:
        meta["io.modelcontextprotocol/clientInfo"] = client_info
    return meta


def sessionless_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    """The HTTP headers of a 2026-07-28 request (``Mcp-Name`` for the tool, prompt, resource or task)."""
    out = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if name is not None:
        out["Mcp-Name"] = name
    return {**out, **extra}


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | str = 1) -> dict[str, Any]:
    """A JSON-RPC request."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def mcp_headers(
    session_id: str | None = None, *, version: str | None = None, accept: str = ACCEPT_BOTH, **extra: str
) -> dict[str, str]:
    """Headers of a well-behaved client."""
    headers = {"Accept": accept, "Content-Type": "application/json"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    return {**headers, **extra}


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages carried by the ``data:`` lines of an event stream, in order (priming events,
    with empty data, carry none)."""
    messages: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if data and any(data):  # (a priming event has an id and empty data: no message)
            messages.append(json.loads("\n".join(data)))
    return messages


def content_type(response: httpx.Response) -> str:
    """The media type of a response, without parameters."""
    return str(response.headers.get("content-type", "")).split(";")[0].strip()


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: a JSON object or array, an event stream, or a bodiless 202."""
    kind = content_type(response)
    if kind == "application/json":
        body = response.json()
        return body if isinstance(body, list) else [body]
    if kind == "text/event-stream":
        return parse_sse(response.text)
    if response.status_code == 202 and not response.content:
        return []
    raise AssertionError(f"unexpected content type {kind!r} (status {response.status_code})")


def final_response(response: httpx.Response, request_id: int | str = 1) -> dict[str, Any]:
    """The last message of a response, checked to be the JSON-RPC response to ``request_id``."""
    assert response.status_code == 200, response.text
    messages = messages_of(response)
    assert messages, "a request must get a response"
    last = messages[-1]
    assert last.get("id") == request_id, messages
    assert "method" not in last, messages
    return last


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error of an HTTP-level refusal (a JSON body with ``id: null``)."""
    assert content_type(response) == "application/json", response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    return dict(body["error"])


def mode_of(server: LiveServer) -> str:
    """The ``RESPONSE_MODE`` a live server runs with."""
    return str(json.loads(server.env["MCP_TEST_OVERRIDES"]).get("RESPONSE_MODE", "auto"))


async def initialize(
    http: httpx.AsyncClient,
    url: str,
    version: str = LATEST,
    capabilities: dict[str, Any] | None = None,
    **headers: str,
) -> httpx.Response:
    """POST ``initialize`` and return the raw response."""
    params = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": CLIENT_INFO}
    return await http.post(url, json=rpc("initialize", params), headers=mcp_headers(**headers))


@dataclass
class RawSession:
    """A session opened with raw HTTP (``id`` is ``None`` on a stateless server)."""

    http: httpx.AsyncClient
    url: str
    id: str | None
    version: str = LATEST
    init_result: dict[str, Any] = field(default_factory=dict)
    _last_id: int = 1000

    def headers(self, **extra: str) -> dict[str, str]:
        version = self.version if self.version != "2024-11-05" else None
        return mcp_headers(self.id, version=version, **extra)

    def next_id(self) -> int:
        self._last_id += 1
        return self._last_id

    async def post(self, payload: Any, **extra: str) -> httpx.Response:
        return await self.http.post(self.url, json=payload, headers=self.headers(**extra))

    async def delete(self) -> httpx.Response:
        return await self.http.delete(self.url, headers=self.headers())

    async def request(
        self, method: str, params: dict[str, Any] | None = None, request_id: int | str | None = None
    ) -> dict[str, Any]:
        """Send one request and return its JSON-RPC response (checked to be HTTP 200)."""
        rid = self.next_id() if request_id is None else request_id
        return final_response(await self.post(rpc(method, params, rid)), rid)

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, request_id: int | str | None = None
    ) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, request_id)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        response = await self.post(message)
        assert response.status_code == 202, response.text
        return response

    async def cancel(self, request_id: int | str, reason: str = "test") -> None:
        await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    async def stats(self) -> dict[str, Any]:
        """What the serving process holds in flight (the test app's ``test/stats`` method)."""
        return dict((await self.request("test/stats", {}))["result"])

    async def wait_pending(self, *request_ids: int | str, within: float = 10.0) -> None:
        """Wait until the server holds every one of ``request_ids`` in flight."""

        async def held() -> bool:
            return set(request_ids) <= set((await self.stats())["pending"])

        await wait_for(held, within=within)


async def open_session(
    http: httpx.AsyncClient, url: str, version: str = LATEST, capabilities: dict[str, Any] | None = None
) -> RawSession:
    """``initialize`` then ``notifications/initialized``, as a client does."""
    response = await initialize(http, url, version, capabilities)
    answer = final_response(response)
    session = RawSession(http, url, response.headers.get("mcp-session-id"), version, answer["result"])
    await session.notify("notifications/initialized")
    return session


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The messages of an open event stream, as they arrive; ends when the server closes it."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif not line and data:
            if any(data):  # (a priming event has an id and empty data: no message)
                yield json.loads("\n".join(data))
            data = []
