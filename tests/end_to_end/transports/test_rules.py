"""The Streamable HTTP rules, checked with raw HTTP against real Daphne servers."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import (
    CLIENT_INFO,
    LATEST,
    RawSession,
    content_type,
    error_of,
    final_response,
    initialize,
    mcp_headers,
    mode_of,
    open_session,
    parse_sse,
    rpc,
)
from tests.support.sockets import read_response


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0, follow_redirects=False) as client:
        yield client


@pytest.fixture
async def session(http: httpx.AsyncClient, live_server: LiveServer) -> RawSession:
    return await open_session(http, live_server.url)


# -- 1. both paths -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_endpoint_is_served_with_and_without_slash(
    http: httpx.AsyncClient, live_server: LiveServer, path: str
) -> None:
    url = live_server.base + path
    response = await initialize(http, url)
    assert not response.is_redirect
    assert response.status_code == 200, response.text
    assert final_response(response)["result"]["protocolVersion"] == LATEST
    session = RawSession(http, url, response.headers["mcp-session-id"], LATEST, {})
    answer = await session.call_tool("echo", {"text": f"via {path}"})
    assert answer["result"]["content"] == [{"type": "text", "text": f"via {path}"}]


async def test_a_session_opened_on_one_path_works_on_the_other(
    http: httpx.AsyncClient, live_server: LiveServer
) -> None:
    opened = await open_session(http, live_server.url)
    other = RawSession(http, live_server.url + "/", opened.id, opened.version, {})
    answer = await other.call_tool("echo", {"text": "slash"})
    assert answer["result"]["content"][0]["text"] == "slash"


# -- 2. initialize -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2099-01-01", LATEST),
        ("not-a-version", LATEST),
    ],
)
async def test_initialize_negotiates_the_revision(
    http: httpx.AsyncClient, live_server: LiveServer, requested: str, answered: str
) -> None:
    response = await initialize(http, live_server.url, requested)
    result = final_response(response)["result"]
    assert result["protocolVersion"] == answered
    assert result["serverInfo"]["name"]
    assert "tools" in result["capabilities"]
    session = RawSession(http, live_server.url, response.headers["mcp-session-id"], answered, result)
    answer = await session.call_tool("echo", {"text": requested})
    assert answer["result"]["content"][0]["text"] == requested


async def test_session_ids_are_visible_ascii_long_and_distinct(
    http: httpx.AsyncClient, live_server: LiveServer
) -> None:
    responses = await asyncio.gather(*(initialize(http, live_server.url) for _ in range(5)))
    ids = [response.headers["mcp-session-id"] for response in responses]
    assert len(set(ids)) == len(ids)
    for session_id in ids:
        assert len(session_id) >= 32
        assert all(0x21 <= ord(char) <= 0x7E for char in session_id), session_id


async def test_initialize_inside_a_batch_is_refused(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    params = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": CLIENT_INFO}
    response = await http.post(live_server.url, json=[rpc("initialize", params)], headers=mcp_headers())
    assert response.status_code == 400
    assert "mcp-session-id" not in response.headers


# -- 3. session header ---------------------------------------------------------------------------------------


async def test_request_without_session_id_is_400(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    response = await http.post(live_server.url, json=rpc("tools/list"), headers=mcp_headers(version=LATEST))
    assert response.status_code == 400
    assert "Mcp-Session-Id" in error_of(response)["message"]


async def test_unknown_session_id_is_404(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    headers = mcp_headers("no-such-session-" + "x" * 32, version=LATEST)
    response = await http.post(live_server.url, json=rpc("tools/list"), headers=headers)
    assert response.status_code == 404
    assert error_of(response)["message"] == "Session not found"
    assert (await http.get(live_server.url, headers=headers)).status_code == 404
    assert (await http.delete(live_server.url, headers=headers)).status_code == 404


async def test_delete_ends_the_session(session: RawSession) -> None:
    assert (await session.request("ping"))["result"] == {}
    deleted = await session.delete()
    assert deleted.status_code == 200
    after = await session.post(rpc("ping"))
    assert after.status_code == 404
    assert (await session.http.get(session.url, headers=session.headers())).status_code == 404
    assert (await session.delete()).status_code == 404


async def test_delete_without_session_id_is_400(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    response = await http.delete(live_server.url, headers=mcp_headers())
    assert response.status_code == 400


# -- 4. MCP-Protocol-Version ---------------------------------------------------------------------------------


async def test_unsupported_protocol_version_header_is_400(session: RawSession) -> None:
    """A header naming no handshake revision selects the 2026-07-28 path (whatever session id comes with
    it), whose ladder refuses a request without the ``_meta`` envelope (the rest: test_v2026_07_28.py)."""
    response = await session.post(rpc("ping"), **{"MCP-Protocol-Version": "1999-01-01"})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


async def test_absent_protocol_version_header_is_accepted(session: RawSession) -> None:
    response = await session.http.post(session.url, json=rpc("ping"), headers=mcp_headers(session.id))
    assert final_response(response)["result"] == {}


async def test_matching_protocol_version_header_is_accepted(session: RawSession) -> None:
    response = await session.post(rpc("ping"), **{"MCP-Protocol-Version": LATEST})
    assert final_response(response)["result"] == {}


# -- 5. HTTP-level rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "accept", ["application/json", "text/event-stream", "text/html", "application/xml, text/plain"]
)
async def test_post_without_both_media_types_in_accept_is_406(session: RawSession, accept: str) -> None:
    response = await session.post(rpc("ping"), Accept=accept)
    assert response.status_code == 406
    assert error_of(response)["code"] == -32600


async def test_initialize_without_both_media_types_in_accept_is_406(
    http: httpx.AsyncClient, live_server: LiveServer
) -> None:
    response = await initialize(http, live_server.url, accept="application/json")
    assert response.status_code == 406
    assert "mcp-session-id" not in response.headers


async def test_accept_with_parameters_and_quality_values_passes(session: RawSession) -> None:
    response = await session.post(rpc("ping"), Accept="application/json;q=0.9, text/event-stream;q=0.8")
    assert final_response(response)["result"] == {}


async def test_get_without_event_stream_in_accept_is_406(session: RawSession) -> None:
    response = await session.http.get(session.url, headers=session.headers(Accept="application/json"))
    assert response.status_code == 406


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx"])
async def test_non_json_content_type_is_415(session: RawSession, kind: str) -> None:
    headers = session.headers(**{"Content-Type": kind})
    response = await session.http.post(session.url, content=json.dumps(rpc("ping")), headers=headers)
    assert response.status_code == 415


async def test_json_content_type_with_charset_passes(session: RawSession) -> None:
    headers = session.headers(**{"Content-Type": "application/json; charset=utf-8"})
    response = await session.http.post(session.url, content=json.dumps(rpc("ping")), headers=headers)
    assert final_response(response)["result"] == {}


async def test_body_over_max_request_bytes_is_413(session: RawSession) -> None:
    big = await session.post(rpc("tools/call", {"name": "echo", "arguments": {"text": "x" * 70_000}}))
    assert big.status_code == 413
    assert "65536" in error_of(big)["message"]
    # Just under the limit goes through, so the limit is the configured one.
    text = "y" * 60_000
    answer = await session.call_tool("echo", {"text": text})
    assert answer["result"]["content"][0]["text"] == text


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "localhost.evil.example"])
async def test_bad_host_is_403(session: RawSession, host: str) -> None:
    response = await session.post(rpc("ping"), Host=host)
    assert response.status_code == 403
    assert "Host" in error_of(response)["message"]


@pytest.mark.parametrize("origin", ["http://evil.example", "https://localhost.evil.example", "null"])
async def test_foreign_origin_is_403(session: RawSession, origin: str) -> None:
    response = await session.post(rpc("ping"), Origin=origin)
    assert response.status_code == 403
    assert "Origin" in error_of(response)["message"]


async def test_foreign_origin_is_403_on_initialize_get_and_delete(
    http: httpx.AsyncClient, live_server: LiveServer, session: RawSession
) -> None:
    evil = {"Origin": "http://evil.example"}
    refused = await initialize(http, live_server.url, **evil)
    assert refused.status_code == 403
    assert "mcp-session-id" not in refused.headers
    assert (await http.get(session.url, headers=session.headers(**evil))).status_code == 403
    assert (await http.delete(session.url, headers=session.headers(**evil))).status_code == 403
    # The refused DELETE did not end the session.
    assert (await session.request("ping"))["result"] == {}


async def test_localhost_and_same_origin_pass(session: RawSession, live_server: LiveServer) -> None:
    for origin in (f"http://localhost:{live_server.port}", live_server.base):
        response = await session.post(rpc("ping"), Origin=origin)
        assert final_response(response)["result"] == {}, origin
    response = await session.post(rpc("ping"), Host=f"localhost:{live_server.port}")
    assert final_response(response)["result"] == {}


async def test_a_production_site_allows_only_its_hosts_and_listed_origins(
    http: httpx.AsyncClient, start: Callable[..., LiveServer]
) -> None:
    """``DEBUG`` off, ``MCP_SERVER`` lists the hosts and origins: no leniency for localhost."""
    config = {"ALLOWED_HOSTS": ["127.0.0.1"], "ALLOWED_ORIGINS": ["https://app.example.org"]}
    server = start(config, DJANGO_DEBUG="0")
    session = await open_session(http, server.url)
    listed = await session.post(rpc("ping"), Origin="https://app.example.org")  # cross-origin, but listed
    assert final_response(listed)["result"] == {}
    same = await session.post(rpc("ping"), Origin=server.base)
    assert final_response(same)["result"] == {}
    refused_origins = [
        f"http://localhost:{server.port}",  # fine under DEBUG only
        "https://app.example.org.evil.example",
        "app.example.org",  # no scheme: not an origin at all
        "https://",  # no host
    ]
    for origin in refused_origins:
        response = await session.post(rpc("ping"), Origin=origin)
        assert response.status_code == 403, origin
        assert error_of(response)["message"] == f"Origin {origin!r} is not allowed"
    response = await session.post(rpc("ping"), Host=f"localhost:{server.port}")
    assert response.status_code == 403
    assert error_of(response)["message"] == f"Host 'localhost:{server.port}' is not allowed"


async def test_any_origin_when_the_allowlist_says_so(
    http: httpx.AsyncClient, start: Callable[..., LiveServer]
) -> None:
    server = start({"ALLOWED_ORIGINS": ["*"]}, DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="127.0.0.1")
    session = await open_session(http, server.url)
    for origin in ("https://anywhere.example", "http://evil.example:8080"):
        assert final_response(await session.post(rpc("ping"), Origin=origin))["result"] == {}
    assert (await session.post(rpc("ping"), Origin="null")).status_code == 403  # "null" must be listed itself


def raw_post(server: LiveServer, headers: list[tuple[str, str]]) -> tuple[int, dict[str, Any]]:
    """POST ``initialize`` over a raw socket with exactly ``headers`` (repeats kept: httpx would join
    them); returns the status and the JSON body."""
    body = json.dumps(
        rpc("initialize", {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": CLIENT_INFO})
    )
    lines = [
        "POST /mcp HTTP/1.1",
        *(f"{name}: {value}" for name, value in headers),
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n" + body).encode())
        status, content = read_response(sock)
    return status, json.loads(content)


@pytest.mark.parametrize(
    "origins",
    [
        ["http://evil.example", "x.localhost"],  # joined: "http://evil.example,x.localhost", a localhost name
        ["http://localhost", "http://evil.example"],
        ["http://localhost", "http://localhost"],  # even the same one twice
    ],
)
def test_repeated_origin_headers_are_403_even_under_debug(
    live_server: LiveServer, origins: list[str]
) -> None:
    host = ("Host", f"127.0.0.1:{live_server.port}")
    status, body = raw_post(live_server, [host, *(("Origin", origin) for origin in origins)])
    assert status == 403
    assert body["error"]["message"] == (
        "Origin must be one value: repeated or comma-joined Origin headers are refused"
    )
    status, _ = raw_post(live_server, [host, ("Origin", origins[0].replace("evil.example", "localhost"))])
    assert status == 200  # one Origin header, allowed under DEBUG: served


def test_a_comma_joined_origin_is_403(live_server: LiveServer) -> None:
    host = ("Host", f"127.0.0.1:{live_server.port}")
    status, body = raw_post(live_server, [host, ("Origin", "http://evil.example,x.localhost")])
    assert status == 403
    assert "comma-joined Origin" in body["error"]["message"]


def test_repeated_host_headers_are_403(live_server: LiveServer) -> None:
    hosts = [("Host", f"127.0.0.1:{live_server.port}"), ("Host", "evil.example")]
    status, body = raw_post(live_server, hosts)
    assert status == 403
    assert (
        body["error"]["message"]
        == "Host must be one value: repeated or comma-joined Host headers are refused"
    )


def test_repeated_origins_are_refused_even_when_any_origin_is_allowed(
    start: Callable[..., LiveServer],
) -> None:
    server = start({"ALLOWED_ORIGINS": ["*"]}, DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="127.0.0.1")
    host = ("Host", f"127.0.0.1:{server.port}")
    status, _ = raw_post(server, [host, ("Origin", "https://a.example"), ("Origin", "https://b.example")])
    assert status == 403


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_other_http_methods_are_405(session: RawSession, method: str) -> None:
    response = await session.http.request(
        method, session.url, content=json.dumps(rpc("ping")), headers=session.headers()
    )
    assert response.status_code == 405
    assert {part.strip() for part in response.headers["allow"].split(",")} == {"GET", "POST", "DELETE"}


# -- 6. JSON-RPC errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"{not json", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"\xff\xfe"])
async def test_unparseable_json_is_parse_error_with_400(session: RawSession, body: bytes) -> None:
    response = await session.http.post(session.url, content=body, headers=session.headers())
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32700
    assert response.json()["id"] is None


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "2.0"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 42},
        42,
        "ping",
        None,
        [],
    ],
)
async def test_invalid_message_is_invalid_request_with_400(session: RawSession, payload: Any) -> None:
    body = json.dumps(payload).encode()
    response = await session.http.post(session.url, content=body, headers=session.headers())
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600


async def test_unknown_method_is_method_not_found_with_200(session: RawSession) -> None:
    answer = await session.request("no/such/method", {}, request_id="u-1")
    assert answer["error"]["code"] == -32601
    assert "no/such/method" in answer["error"]["message"]
    assert "result" not in answer


async def test_unknown_tool_is_an_error_with_200(session: RawSession) -> None:
    answer = await session.call_tool("no_such_tool", {}, request_id=7)
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32602
    assert "no_such_tool" in answer["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"arguments": {}}),
        ("tools/call", {"name": 42}),
        ("resources/read", {}),
        ("logging/setLevel", {"level": "loud"}),
    ],
)
async def test_bad_params_are_invalid_params_with_200(
    session: RawSession, method: str, params: dict[str, Any]
) -> None:
    answer = await session.request(method, params)
    assert answer["error"]["code"] == -32602, answer


async def test_batches_only_in_2025_03_26(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    batch = [
        rpc("ping", None, "a"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        rpc("ping", None, "b"),
    ]
    modern = await open_session(http, live_server.url)
    refused = await modern.post(batch)
    assert refused.status_code == 400
    assert error_of(refused)["code"] == -32600
    old = await open_session(http, live_server.url, "2025-03-26")
    response = await old.post(batch)
    assert response.status_code == 200
    answers = response.json()
    assert isinstance(answers, list)
    assert sorted(a["id"] for a in answers) == ["a", "b"]
    assert all(a["result"] == {} for a in answers)


WRONG_TYPED_IDS: list[Any] = [{"not": "an id"}, [1], 1.5, 1.0, True]
"""Ids a request cannot have (MCP: a string or an integer); such a message is no notification either."""


async def test_an_invalid_member_of_a_batch_is_answered_in_the_batch(
    http: httpx.AsyncClient, live_server: LiveServer
) -> None:
    """A bad member does not spoil the batch: it gets its own -32600, with its id where that is usable."""
    old = await open_session(http, live_server.url, "2025-03-26")
    batch = [
        {"jsonrpc": "1.0", "id": "bad-version", "method": "ping"},
        {"jsonrpc": "2.0", "id": 5, "method": 42},
        "not even an object",
        *({"jsonrpc": "2.0", "id": bad, "method": "ping"} for bad in WRONG_TYPED_IDS),
        rpc("ping", None, "good"),
    ]
    response = await old.post(batch)
    assert response.status_code == 200
    answers = response.json()
    assert isinstance(answers, list)
    assert len(answers) == len(batch)
    good = [a for a in answers if a["id"] == "good"]
    assert good == [{"jsonrpc": "2.0", "id": "good", "result": {}}]
    errors = [a for a in answers if a["id"] != "good"]
    assert [a["id"] for a in errors if a["id"] is not None] == ["bad-version", 5]
    assert all(a["error"]["code"] == -32600 and "result" not in a for a in errors)
    wrong_typed = [a for a in errors if "must be a string or an integer" in a["error"]["message"]]
    assert [a["id"] for a in wrong_typed] == [None] * len(WRONG_TYPED_IDS)


@pytest.mark.parametrize("request_id", WRONG_TYPED_IDS)
async def test_a_request_with_a_wrong_typed_id_is_refused_not_taken_for_a_notification(
    session: RawSession, request_id: Any
) -> None:
    response = await session.post({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
    assert response.status_code == 400
    message = "Invalid request: a request id must be a string or an integer"
    assert error_of(response) == {"code": -32600, "message": message}


# -- 7. 202 for notifications and responses ------------------------------------------------------------------


async def test_notification_gets_202_with_empty_body(
    any_mode_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await open_session(http, any_mode_server.url)
    for method in ("notifications/initialized", "notifications/roots/list_changed"):
        response = await session.post({"jsonrpc": "2.0", "method": method})
        assert response.status_code == 202
        assert response.content == b""
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "nothing"}}
    response = await session.post(cancel)
    assert (response.status_code, response.content) == (202, b"")


async def test_jsonrpc_response_body_gets_202_with_empty_body(
    any_mode_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await open_session(http, any_mode_server.url)
    for payload in (
        {"jsonrpc": "2.0", "id": "s-1", "result": {}},
        {"jsonrpc": "2.0", "id": "s-2", "error": {"code": -32601, "message": "nope"}},
    ):
        response = await session.post(payload)
        assert response.status_code == 202
        assert response.content == b""
    # The session still works afterwards.
    assert (await session.request("ping"))["result"] == {}


# -- 8. framing per response mode ----------------------------------------------------------------------------


async def test_plain_call_framing_per_mode(any_mode_server: LiveServer, http: httpx.AsyncClient) -> None:
    session = await open_session(http, any_mode_server.url)
    response = await session.post(rpc("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, 11))
    mode = mode_of(any_mode_server)
    if mode == "sse":
        assert content_type(response) == "text/event-stream"
        messages = parse_sse(response.text)
        assert messages[-1]["id"] == 11
        assert messages[-1]["result"]["content"] == [{"type": "text", "text": "hi"}]
    else:
        assert content_type(response) == "application/json"
        assert response.json()["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert final_response(response, 11)["result"]["content"][0]["text"] == "hi"


async def test_progress_call_framing_per_mode(any_mode_server: LiveServer, http: httpx.AsyncClient) -> None:
    session = await open_session(http, any_mode_server.url)
    params = {"name": "progress", "arguments": {"steps": 4}, "_meta": {"progressToken": "tok-1"}}
    response = await session.post(rpc("tools/call", params, "p-1"))
    mode = mode_of(any_mode_server)
    final = final_response(response, "p-1")
    assert final["result"]["content"][0]["text"] == "done"
    if mode == "json":
        # A JSON body has room for the response only.
        assert content_type(response) == "application/json"
        return
    assert content_type(response) == "text/event-stream"
    messages = parse_sse(response.text)
    assert messages[-1] == final
    progress = [m for m in messages[:-1] if m.get("method") == "notifications/progress"]
    assert len(progress) == 4
    assert all(m["params"]["progressToken"] == "tok-1" for m in progress)
    values = [m["params"]["progress"] for m in progress]
    assert values == sorted(values)
    assert len(set(values)) == len(values)
    assert progress[-1]["params"]["total"] == 4


async def test_progress_without_token_answers_json_in_auto_mode(session: RawSession) -> None:
    response = await session.post(rpc("tools/call", {"name": "progress", "arguments": {"steps": 3}}))
    assert content_type(response) == "application/json"
    assert response.json()["result"]["content"][0]["text"] == "done"


async def test_initialize_framing_per_mode(any_mode_server: LiveServer, http: httpx.AsyncClient) -> None:
    response = await initialize(http, any_mode_server.url)
    expected = "text/event-stream" if mode_of(any_mode_server) == "sse" else "application/json"
    assert content_type(response) == expected
    assert final_response(response)["result"]["protocolVersion"] == LATEST
    assert response.headers["mcp-session-id"]


# -- 9. the standalone GET stream ----------------------------------------------------------------------------


async def test_get_opens_a_stream_that_delete_closes(session: RawSession) -> None:
    async with session.http.stream("GET", session.url, headers=session.headers()) as stream:
        assert stream.status_code == 200
        assert content_type(stream) == "text/event-stream"
        chunks = stream.aiter_bytes()
        async with asyncio.timeout(10):
            first = await anext(chunks)
        # the priming event (2025-11-25: an id, empty data) or a comment: the stream is open and subscribed
        assert first.startswith(b"id: g"), first
        assert first.endswith(b"\ndata: \n\n"), first
        deleted = await session.delete()
        assert deleted.status_code == 200
        async with asyncio.timeout(10):
            rest = [chunk async for chunk in chunks]
        assert b"".join(rest).strip() == b""
    assert (await session.post(rpc("ping"))).status_code == 404


async def test_get_needs_a_session(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    response = await http.get(live_server.url, headers={"Accept": "text/event-stream"})
    assert response.status_code == 400
