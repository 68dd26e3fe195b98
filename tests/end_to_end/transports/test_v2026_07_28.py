"""2026-07-28 on the same endpoint as the handshake era: HTTP statuses and JSON-RPC codes of the ladder,
results' ``resultType`` and caching hints, and that no session is opened (raw HTTP on a live server)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.admin import query
from tests.support.live import LiveServer
from tests.support.raw import (
    ACCEPT_BOTH,
    MODERN,
    final_response,
    messages_of,
    mode_of,
    rpc,
    sessionless_headers,
    sessionless_meta,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio

META = sessionless_meta(client_info={"name": "modern-tests", "version": "1"})


@pytest.fixture(scope="module", params=["auto", "sse", "json"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": request.param})


headers = sessionless_headers


def body(method: str, params: dict[str, Any] | None = None, request_id: int | str = 7) -> dict[str, Any]:
    return rpc(method, {**(params or {}), "_meta": META}, request_id)


async def post(server: LiveServer, payload: Any, head: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(server.url, json=payload, headers=head)


def error(response: httpx.Response, status: int, code: int, request_id: Any = 7) -> dict[str, Any]:
    assert response.status_code == status, response.text
    message = messages_of(response)[-1]
    assert message["id"] == request_id, message
    assert message["error"]["code"] == code, message
    return dict(message["error"])


async def test_discover_is_served_without_a_session(server: LiveServer) -> None:
    response = await post(server, body("server/discover"), headers("server/discover"))
    result = final_response(response, 7)["result"]
    assert "mcp-session-id" not in response.headers
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [MODERN]
    assert "tools" in result["capabilities"]
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "public"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]


@pytest.mark.parametrize(
    "method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"]
)
async def test_lists_carry_result_type_and_cache_hints(server: LiveServer, method: str) -> None:
    result = final_response(await post(server, body(method), headers(method)), 7)["result"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "private"


async def test_tool_call_and_resource_read(server: LiveServer) -> None:
    call = body("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    result = final_response(await post(server, call, headers("tools/call", "echo")), 7)["result"]
    assert result["resultType"] == "complete"
    assert result["content"][0]["text"] == "hi"
    read = body("resources/read", {"uri": "test://static-text"})
    result = final_response(await post(server, read, headers("resources/read", "test://static-text")), 7)
    assert result["result"]["contents"][0]["text"]
    assert result["result"]["cacheScope"] == "private"


@pytest.mark.parametrize(
    ("meta", "served"),
    [
        ({"progressToken": "BIG"}, False),
        ({"com.example/size": "BIG"}, True),
        ({"io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1", "size": "BIG"}}, True),
    ],
)
async def test_a_number_past_every_float_in_meta_gets_the_schemas_answer(
    server: LiveServer, meta: dict[str, Any], served: bool
) -> None:
    """``1e400`` is JSON, read as infinity: in a key the schema types it is refused as the schema refuses it
    (-32602), elsewhere the call is served; never an internal error (the remembered verdicts' key once
    failed to read it back)."""
    call = rpc("tools/call", {"name": "echo", "arguments": {"text": "hi"}, "_meta": {**META, **meta}}, 7)
    text = json.dumps(call).replace('"BIG"', "1e400")
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(server.url, content=text, headers=headers("tools/call", "echo"))
    if served:
        assert final_response(response, 7)["result"]["content"][0]["text"] == "hi"
    else:
        assert "progressToken" in error(response, 400, -32602)["message"]


async def test_missing_resource_is_invalid_params_with_the_uri(server: LiveServer) -> None:
    uri = "test://nowhere"
    response = await post(server, body("resources/read", {"uri": uri}), headers("resources/read", uri))
    assert error(response, 400, -32602)["data"] == {"uri": uri}


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {"io.modelcontextprotocol/clientCapabilities": {}},
        {"io.modelcontextprotocol/protocolVersion": MODERN},
    ],
)
async def test_envelope_missing_keys_is_32602(server: LiveServer, meta: Any) -> None:
    params = {} if meta is None else {"_meta": meta}
    response = await post(server, rpc("server/discover", params, 7), headers("server/discover"))
    error(response, 400, -32602)


async def test_unsupported_version_is_32022(server: LiveServer) -> None:
    payload = rpc(
        "server/discover", {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "v999"}}, 7
    )
    response = await post(server, payload, headers("server/discover", **{"MCP-Protocol-Version": "v999"}))
    assert error(response, 400, -32022)["data"] == {"supported": [MODERN], "requested": "v999"}


@pytest.mark.parametrize(
    "head",
    [
        {"MCP-Protocol-Version": "2026-01-01"},  # header differs from the body (checked before the version)
        {"Mcp-Method": "prompts/list"},
        {"Mcp-Name": "other"},
        {"Mcp-Name": "=?base64?ZWNobw?=", "x": "bad padding"},
    ],
)
async def test_header_mismatch_is_32020(server: LiveServer, head: dict[str, str]) -> None:
    call = body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    sent = {**headers("tools/call", "echo"), **head}
    error(await post(server, call, sent), 400, -32020)


async def test_base64_name_is_decoded(server: LiveServer) -> None:
    call = body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    encoded = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    final_response(await post(server, call, headers("tools/call", encoded)), 7)


async def test_missing_method_header_and_duplicates_are_32020(server: LiveServer) -> None:
    head = headers("tools/list")
    del head["Mcp-Method"]
    error(await post(server, body("tools/list"), head), 400, -32020)
    raw = [(k, v) for k, v in headers("tools/list").items()] + [("Mcp-Method", "tools/list")]
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(server.url, json=body("tools/list"), headers=raw)
    error(response, 400, -32020)


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"]
)
async def test_removed_and_unknown_methods_are_404(server: LiveServer, method: str) -> None:
    error(await post(server, body(method), headers(method)), 404, -32601)


async def test_envelope_without_modern_header_is_32020(server: LiveServer) -> None:
    head = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json", "Mcp-Method": "server/discover"}
    error(await post(server, body("server/discover"), head), 400, -32020)


async def test_missing_capability_is_32021(server: LiveServer) -> None:
    call = body("tools/call", {"name": "test_missing_capability"})
    response = await post(server, call, headers("tools/call", "test_missing_capability"))
    assert error(response, 400, -32021)["data"] == {"requiredCapabilities": {"sampling": {}}}


async def test_param_header_rules(server: LiveServer) -> None:
    def call(value: str | None) -> dict[str, Any]:
        return body(
            "tools/call",
            {"name": "test_x_mcp_header", "arguments": {} if value is None else {"region": value}},
        )

    async def send(value: str | None, header: str | None) -> httpx.Response:
        extra = {} if header is None else {"Mcp-Param-Region": header}
        return await post(server, call(value), headers("tools/call", "test_x_mcp_header", **extra))

    ok = final_response(await send("Hello", "=?base64?SGVsbG8=?="), 7)["result"]
    assert ok["content"][0]["text"] == "region=Hello"
    final_response(await send("SGVsbG8=", "SGVsbG8="), 7)
    final_response(await send(None, None), 7)
    for value, header in (("Hello", "=?base64?SGVsbG8?="), ("Hello", "=?base64?SGVs!!!bG8=?="), ("v", None)):
        error(await send(value, header), 400, -32020)
    error(await send(None, "Hello"), 400, -32020)


async def test_unparseable_and_notifications(server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(server.url, content=b"{nope", headers=headers("tools/list"))
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32700
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        response = await client.post(server.url, json=note, headers=headers("notifications/cancelled"))
        assert response.status_code == 202
        assert not response.content


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
async def test_get_and_delete_are_405(server: LiveServer, verb: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.request(verb, server.url, headers=headers("server/discover"))
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


async def test_handshake_era_is_unchanged(server: LiveServer) -> None:
    init = rpc(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
    )
    response = await post(server, init, {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"})
    assert final_response(response)["result"]["protocolVersion"] == "2025-11-25"
    assert response.headers["mcp-session-id"]


async def test_log_level_and_progress_travel_on_the_request_stream(server: LiveServer) -> None:
    def call(tool: str, **meta: Any) -> dict[str, Any]:
        payload = body("tools/call", {"name": tool})
        payload["params"]["_meta"] = {**META, **meta}
        return payload

    quiet = messages_of(
        await post(server, call("test_logging_tool"), headers("tools/call", "test_logging_tool"))
    )
    assert [m for m in quiet if m.get("method") == "notifications/message"] == []
    logged = call("test_logging_tool", **{"io.modelcontextprotocol/logLevel": "info"})
    response = await post(server, logged, headers("tools/call", "test_logging_tool"))
    progressed = call("test_tool_with_progress", progressToken="p-1")
    with_progress = await post(server, progressed, headers("tools/call", "test_tool_with_progress"))
    if mode_of(server) == "json":  # one JSON body: nothing but the answer
        assert len(messages_of(response)) == 1
        return
    notes = [m for m in messages_of(response) if m.get("method") == "notifications/message"]
    assert [n["params"]["data"] for n in notes] == ["Logging tool ran"]
    assert messages_of(response)[-1]["result"]["resultType"] == "complete"
    steps = [m["params"] for m in messages_of(with_progress) if m.get("method") == "notifications/progress"]
    assert [(s["progressToken"], s["progress"]) for s in steps] == [("p-1", 0), ("p-1", 50), ("p-1", 100)]
    assert "id:" not in with_progress.text  # no SSE event ids at 2026: nothing to resume


async def test_closing_the_response_cancels_the_request(server: LiveServer) -> None:
    call = body("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, "cancel-me")

    async def state() -> list[str]:
        rows = query(server, "SELECT state FROM mcp_server_ledgerentry WHERE request_key = 's:cancel-me'")
        return [row["state"] for row in rows]

    async def pending() -> bool:
        return await state() == ["pending"]

    async def cancelled() -> bool:
        return await state() == ["cancelled"]

    posting = asyncio.ensure_future(post(server, call, headers("tools/call", "slow")))
    await wait_for(pending)
    posting.cancel()  # the client goes away: at 2026 that is the cancellation
    with contextlib.suppress(asyncio.CancelledError):
        await posting
    await wait_for(cancelled)


async def test_every_refused_request_is_recorded_once(server: LiveServer) -> None:
    error(
        await post(server, body("ping", request_id="refused-ping"), headers("ping")),
        404,
        -32601,
        "refused-ping",
    )

    async def recorded() -> bool:
        rows = query(
            server,
            "SELECT state, outcome, protocol_version FROM mcp_server_ledgerentry "
            "WHERE request_key = 's:refused-ping'",
        )
        return len(rows) == 1 and rows[0]["state"] == "answered"

    await wait_for(recorded)
    [row] = query(
        server,
        "SELECT outcome, protocol_version FROM mcp_server_ledgerentry WHERE request_key = 's:refused-ping'",
    )
    assert '"code": -32601' in row["outcome"] or '"code":-32601' in row["outcome"]
    assert row["protocol_version"] == MODERN


@pytest.mark.parametrize("field", ["clientCapabilities", "clientInfo"])
async def test_client_metadata_is_capped_as_at_initialize(server: LiveServer, field: str) -> None:
    """``MAX_CLIENT_METADATA_BYTES`` (16384) caps a 2026 request's ``clientCapabilities`` and ``clientInfo``
    as it caps the same data at ``initialize``: -32602 with the size and the limit in data."""
    big = {"experimental": {"x": {"y": "é" * 600_000}}} if field == "clientCapabilities" else None
    info = {"name": "n" * 1_000_000, "version": "1"} if field == "clientInfo" else None
    meta = sessionless_meta(capabilities=big, client_info=info)
    payload = rpc("tools/list", {"_meta": meta}, 7)
    refused = error(await post(server, payload, headers("tools/list")), 400, -32602)
    assert refused["data"]["limit"] == 16384
    assert refused["data"]["size"] > 1_000_000
    assert "MAX_CLIENT_METADATA_BYTES" in refused["message"]
    # just under the cap is served; numbers that grow when measured (1e15: 18 bytes) are measured all the same
    under = sessionless_meta(capabilities={"experimental": {"x": {"y": "y" * 16_000}}})
    assert "result" in final_response(
        await post(server, rpc("tools/list", {"_meta": under}, 8), headers("tools/list")), 8
    )
    grown = sessionless_meta(
        capabilities={"experimental": {"n": {"v": [1e15] * 1000}}}
    )  # 4 KB sent, 19 KB measured
    assert grown["io.modelcontextprotocol/clientCapabilities"]["experimental"]["n"]["v"][0] == 1e15
    text = json.dumps(rpc("tools/list", {"_meta": grown}, 9), separators=(",", ":")).replace(
        "1000000000000000.0", "1e15"
    )
    assert len(text) < 16384 // 3
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(server.url, content=text, headers=headers("tools/list"))
    assert error(response, 400, -32602, 9)["data"]["size"] > 16384
