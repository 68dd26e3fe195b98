"""What the official ``mcp`` client's caller sees of a refusal, on live servers, in both eras: the tool result
that tells the model when to retry (``RATE_LIMIT_REFUSAL = "tool_result"``), and HTTP 429 with
``Retry-After`` (``RATE_LIMIT_HTTP_429``), which this client still turns into the JSON-RPC error with its
``data``. Why 429 stays off by default: docs/howto/rate-limits.md."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from mcp import Client, MCPError

from mcp_server.protocol.limit_refusal import RATE_LIMIT_KEY
from tests.support.live import LiveServer
from tests.support.raw import MODERN, rpc, sessionless_headers, sessionless_meta

ECHO = {"per": "address", "target": "tool:echo", "rate": "1/minute", "name": "echo"}
NONE = {"per": "address", "target": "tool:returns_none", "rate": "1/minute", "name": "none"}


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_the_tool_result_through_the_official_client(
    start: Callable[..., LiveServer], mode: str
) -> None:
    server = start({"RATE_LIMITS": [ECHO, NONE], "RATE_LIMIT_REFUSAL": "tool_result"})
    async with Client(server.url, **({"mode": "legacy"} if mode == "legacy" else {})) as client:
        assert (client.protocol_version == MODERN) is (mode == "modern")
        assert not (await client.call_tool("echo", {"text": "hi"})).is_error
        refused = await client.call_tool("echo", {"text": "hi"})  # no exception: a result the model reads
        assert not (await client.call_tool("returns_none", {})).is_error
        bare = await client.call_tool("returns_none", {})
    assert refused.is_error
    (block,) = refused.content
    data = (refused.meta or {})[RATE_LIMIT_KEY]
    wait = data["retryAfter"]
    assert 1 <= wait <= 60
    assert f"wait {wait} seconds before calling it again" in getattr(block, "text", "")
    assert data["limit"]["name"] == "echo"
    assert refused.structured_content is None  # echo declares an outputSchema: the data is in _meta only
    assert bare.is_error
    assert bare.structured_content == (bare.meta or {})[RATE_LIMIT_KEY]
    assert bare.structured_content is not None
    assert bare.structured_content["limit"]["name"] == "none"


@pytest.mark.parametrize("mode", ["legacy", "modern"])
async def test_429_still_reaches_the_caller_as_the_json_rpc_error(
    start: Callable[..., LiveServer], mode: str
) -> None:
    """The official client reads a JSON-RPC error from the body of a non-2xx JSON response (its
    ``_handle_post_request``): with 429 on, its caller gets exactly what it gets without it."""
    server = start({"RATE_LIMITS": [ECHO], "RATE_LIMIT_HTTP_429": True, "RESPONSE_MODE": "json"})
    async with Client(server.url, **({"mode": "legacy"} if mode == "legacy" else {})) as client:
        assert not (await client.call_tool("echo", {"text": "hi"})).is_error
        with pytest.raises(MCPError) as refused:
            await client.call_tool("echo", {"text": "hi"})
        assert not (await client.call_tool("search_books", {"query": "x"})).is_error  # the session goes on
    assert refused.value.code == -31429
    assert refused.value.data["limit"]["name"] == "echo"
    assert 1 <= refused.value.data["retryAfter"] <= 60
    assert refused.value.message.startswith("Rate limit 'echo' exceeded; retry after")


async def test_the_wire_carries_429_and_retry_after(start: Callable[..., LiveServer]) -> None:
    server = start({"RATE_LIMITS": [ECHO], "RATE_LIMIT_HTTP_429": True, "RESPONSE_MODE": "json"})
    params = {"name": "echo", "arguments": {"text": "x"}, "_meta": sessionless_meta()}
    async with httpx.AsyncClient(timeout=30) as http:
        responses = [
            await http.post(
                server.url,
                json=rpc("tools/call", params, n),
                headers=sessionless_headers("tools/call", "echo"),
            )
            for n in (1, 2)
        ]
    assert [r.status_code for r in responses] == [200, 429]
    refused = responses[1]
    assert refused.headers["content-type"].startswith("application/json")
    assert refused.headers["retry-after"] == str(refused.json()["error"]["data"]["retryAfter"])
