"""2026-07-28 results in process: ``server/discover``, ``resultType``, caching hints (settings and a
resource's own), ``serverInfo``, -32602 for a missing resource, results of other types passed through
unchanged, and ``McpHeader`` refused where the revision does not allow it."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from django.test import override_settings

from mcp_server import McpHeader
from mcp_server.core.context import Context, SessionState
from mcp_server.protocol.dispatcher import dispatch
from mcp_server.protocol.v2026_07_28 import finish_result, sessionless_state
from mcp_server.registry.server import MCPServer
from mcp_server.wire.errors import JSONRPCError
from tests.support.peers import RecordingPeer

pytestmark = pytest.mark.asyncio

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
server = MCPServer("modern-units", version="9.9", title="Units")


@server.tool
async def region(where: Annotated[str, McpHeader("Region")] = "none") -> str:
    """Echoes its region."""
    return where


@server.resource("units://cached", ttl_ms=60000, cache_scope="public")
async def cached() -> str:
    """A resource with its own caching hints."""
    return "cached"


@server.resource("units://plain")
async def plain() -> str:
    """A resource with the configured hints."""
    return "plain"


@server.method("units/raw")
async def raw(params: dict[str, Any]) -> dict[str, Any]:
    return {"echo": params.get("x")}


def context(method: str, params: dict[str, Any] | None = None) -> Context:
    params = {**(params or {}), "_meta": META}
    return Context(
        server=server,
        session=sessionless_state(server, method, params),
        request_id=1,
        method=method,
        params=params,
        peer=RecordingPeer(),
    )


async def test_discover() -> None:
    result = await dispatch(context("server/discover"))
    assert result is not None
    assert result["supportedVersions"] == [MODERN]
    assert result["resultType"] == "complete"
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert (result["ttlMs"], result["cacheScope"]) == (0, "public")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "modern-units",
        "version": "9.9",
        "title": "Units",
    }


async def test_the_session_of_a_modern_request() -> None:
    caps: dict[str, Any] = {"sampling": {}}
    meta = {
        **META,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/logLevel": "info",
    }
    session = sessionless_state(server, "tools/list", {"_meta": meta})
    assert session == SessionState(
        id=None, protocol_version=MODERN, client_capabilities=caps, client_info={}, log_level="info"
    )
    with pytest.raises(JSONRPCError) as caught:
        sessionless_state(server, "tools/list", {"_meta": {**meta, "io.modelcontextprotocol/logLevel": "x"}})
    assert caught.value.code == -32602


async def test_resource_hints_override_the_settings() -> None:
    own = await dispatch(context("resources/read", {"uri": "units://cached"}))
    assert own is not None
    assert (own["ttlMs"], own["cacheScope"]) == (60000, "public")
    hints = {"resources/read": {"ttl_ms": 5, "cache_scope": "private"}}
    with override_settings(MCP_SERVER={"CACHE_HINTS": hints}):
        configured = await dispatch(context("resources/read", {"uri": "units://plain"}))
    assert configured is not None
    assert (configured["ttlMs"], configured["cacheScope"]) == (5, "private")


async def test_a_missing_resource_is_invalid_params() -> None:
    with pytest.raises(JSONRPCError) as caught:
        await dispatch(context("resources/read", {"uri": "units://nothing"}))
    assert (caught.value.code, caught.value.data) == (-32602, {"uri": "units://nothing"})


async def test_raw_methods_and_tool_results_get_a_result_type() -> None:
    assert await dispatch(context("units/raw", {"x": 1})) == {
        "echo": 1,
        "resultType": "complete",
        "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "modern-units", "version": "9.9", "title": "Units"}
        },
    }
    called = await dispatch(context("tools/call", {"name": "region", "arguments": {"where": "eu"}}))
    assert called is not None
    assert called["resultType"] == "complete"
    assert called["content"][0]["text"] == "eu"


async def test_an_input_required_result_is_passed_through() -> None:
    ctx = context("tools/call", {"name": "region"})
    interim = {
        "resultType": "input_required",
        "inputRequests": {"k": {"method": "roots/list", "params": {}}},
        "requestState": "opaque",
    }
    out = finish_result(ctx, interim)
    assert out["inputRequests"] == interim["inputRequests"]
    assert out["requestState"] == "opaque"
    assert "ttlMs" not in out


async def test_a_task_result_is_passed_through_with_its_task() -> None:
    ctx = context("tools/call", {"name": "region"})
    task = {
        "resultType": "task",
        "taskId": "t-1",
        "status": "working",
        "createdAt": "2026-07-28T00:00:00Z",
        "lastUpdatedAt": "2026-07-28T00:00:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 500,
    }
    assert finish_result(ctx, task) == {
        **task,
        "_meta": {
            "io.modelcontextprotocol/serverInfo": {"name": "modern-units", "version": "9.9", "title": "Units"}
        },
    }


async def test_mcp_header_on_a_number_is_refused_at_registration() -> None:
    other = MCPServer("refusing")

    async def bad(amount: Annotated[float, McpHeader("Amount")]) -> str:
        return str(amount)

    with pytest.raises(TypeError, match=r"x-mcp-header .Amount.*string, integer or boolean"):
        other.tool(bad)
    assert "bad" not in other.tools


def test_a_server_info_is_vouched_for_once_it_passes_the_schema_as_it_is() -> None:
    """The key of a ``serverInfo`` with a title and icons reads back to the same value, which the 2026
    schema keeps as it is; a key that does not read back is never vouched for."""
    import ast

    from mcp_server.protocol.v2026_07_28 import _info_key, _server_info_passes

    info = {"name": "demo", "version": "1.0", "title": "Démo «x»", "icons": [{"src": "https://e.x/i.png"}]}
    key = _info_key(info)
    assert isinstance(key, str)
    assert ast.literal_eval(key) == info
    assert _server_info_passes("2026-07-28", key)
    plain = {"name": "demo", "version": "1.0", "title": "Démo"}
    assert _info_key(plain) == (("name", "demo"), ("version", "1.0"), ("title", "Démo"))
    assert _server_info_passes("2026-07-28", _info_key(plain))
    assert not _server_info_passes("2026-07-28", "not a literal (")
