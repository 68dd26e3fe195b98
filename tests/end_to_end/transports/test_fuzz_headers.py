"""Property test of I10 for headers: hypothesis sends hostile values (any byte HTTP can carry, latin-1
letters, near-miss ids, Base64 sentinels, long values, repeated headers) in every header the endpoint reads —
``Last-Event-ID``, ``Mcp-Session-Id``, ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``,
``Mcp-Param-*`` — on GET, POST and DELETE, in both eras, to a live server.

Properties: the status is below 500, and the answer is well-formed: a 202 has no body, a JSON body holds
JSON-RPC messages a strict client reads, an event stream opens with an event or a comment.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.hostile import FUZZ, sentinel, strict_json
from tests.support.live import LiveServer, shared_site, start_server
from tests.support.raw import ACCEPT_BOTH, LATEST, MODERN, content_type, open_session, rpc, sessionless_meta

TIMEOUT = 20.0
HTTP_BYTES = bytes([9, *range(0x20, 0x7F), *range(0x80, 0x100)])
"""What a header value may hold on the wire (h11 refuses control characters)."""


def carried(value: bytes) -> bytes:
    """``value`` as HTTP can carry it: only the bytes a field value may hold, no space at either end."""
    return bytes(b for b in value if b in HTTP_BYTES).strip(b" \t")


STREAM = "p" + "0123456789abcdef" * 2
near_misses = st.sampled_from(
    [
        b"",
        b":",
        b"p!:1",
        b"p/x:1",
        b"p@x:1",
        b"p%41:1",
        b"p a:1",
        b"p\xe9:1",
        b"g\xe9:0",
        b"g!:0",
        f"{STREAM}:1".encode(),
        f"{STREAM}:\xb2".encode("latin-1"),
        f"{STREAM}:{'9' * 30}".encode(),
        f"g{STREAM[1:]}:0".encode(),
        b"2025-11-25",
        b"2025-03-26",
        MODERN.encode(),
        b"2026-07-28\t(x)",
        b"9999-99-99",
        b"tools/call",
        b"echo",
        b"=?base64?ZWNobw==?=",
        b"=?base64?!!?=",
        b"=?base64?/w==?=",  # decodes to a byte that is not UTF-8
        sentinel("é\u0000".encode()),
        sentinel(b"\xed\xa0\x80"),  # an encoded lone surrogate
        b"\xff\xfe",
        b"a,b",
        b"x" * 4000,
    ]
).map(carried)
header_values = st.one_of(
    near_misses,
    st.binary(max_size=60).map(carried),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=30).map(
        lambda t: carried(t.encode("latin-1"))
    ),
)
HANDSHAKE_HEADERS = ["mcp-session-id", "mcp-protocol-version", "last-event-id", "mcp-method", "mcp-name"]
MODERN_HEADERS = [*HANDSHAKE_HEADERS, "mcp-param-region"]


@st.composite
def header_sets(draw: st.DrawFn, names: list[str]) -> dict[str, list[bytes] | None]:
    """For some of ``names``: ``None`` (left out), or one or two hostile values (a repeated header)."""
    out: dict[str, list[bytes] | None] = {}
    for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True)):
        out[name] = draw(st.one_of(st.none(), st.lists(header_values, min_size=1, max_size=2)))
    return out


def raw_headers(base: dict[str, str], changes: dict[str, list[bytes] | None]) -> list[tuple[bytes, bytes]]:
    """``base`` with ``changes`` applied (a header left out, or sent with each of its values)."""
    out = [(k.lower().encode(), v.encode()) for k, v in base.items() if k.lower() not in changes]
    for name, values in changes.items():
        out += [(name.encode(), value) for value in values or []]
    return out


def check_message(message: Any) -> None:
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "method" not in message:
        assert ("result" in message) != ("error" in message), message
        if "error" in message:
            assert isinstance(message["error"].get("code"), int), message
            assert isinstance(message["error"].get("message"), str), message


async def exchange(http: httpx.AsyncClient, method: str, url: str, head: list[Any], body: Any) -> None:
    """Send one request; check the status and the answer (an event stream is read up to its first block,
    then let go: a GET stream the headers happened to open stays open)."""
    content = None if body is None else json.dumps(body).encode()
    async with http.stream(method, url, headers=head, content=content) as response:
        assert response.status_code < 500, (response.status_code, await response.aread())
        kind = content_type(response)
        if kind == "text/event-stream":
            assert response.status_code == 200
            first = await anext(response.aiter_raw())
            assert first.startswith((b":", b"id:", b"event:", b"data:", b"retry:")), first
            return
        data = await response.aread()
        if response.status_code == 202 or not data:
            assert response.status_code in (200, 202, 405), (response.status_code, data)
            assert data == b"", data
            return
        if kind == "text/html":  # the HTTP server's own refusal (Daphne: a NEL, say), before the application
            assert response.status_code == 400, data
            assert b"Invalid header value" in data, data
            return
        assert kind == "application/json", (response.status_code, response.headers, data)
        answer = strict_json(data)
        for message in answer if isinstance(answer, list) else [answer]:
            check_message(message)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server on SQLite, and one on PostgreSQL with Redis (which see what a header carries into a lookup
    differently)."""
    with contextlib.ExitStack() as stack:
        env = stack.enter_context(shared_site()) if request.param == "postgresql" else {}
        directory = tmp_path_factory.mktemp(f"fuzz-headers-{request.param}")
        started = start_server(directory, {"RESPONSE_MODE": "auto"}, **env)
        stack.callback(started.stop)
        yield started


@pytest.fixture(scope="module")
def session_id(server: LiveServer) -> str:
    """A real session: hostile headers around a valid id reach deeper than an unknown id would."""

    async def opened() -> str:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            session = await open_session(http, server.url)
            assert session.id is not None
            return session.id

    return asyncio.run(opened())


@FUZZ
@given(
    verb=st.sampled_from(["GET", "POST", "DELETE"]),
    changes=header_sets(HANDSHAKE_HEADERS),
)
def test_handshake_era_headers_never_get_a_5xx(
    server: LiveServer, session_id: str, verb: str, changes: dict[str, list[bytes] | None]
) -> None:
    base = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json", "MCP-Protocol-Version": LATEST}
    base["Mcp-Session-Id"] = session_id
    if verb == "DELETE" and "mcp-session-id" not in changes:  # the session serves the other examples
        changes["mcp-session-id"] = [b"not-this-session"]
    body = rpc("ping", None, 1) if verb == "POST" else None

    async def run() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            await exchange(http, verb, server.url, raw_headers(base, changes), body)

    asyncio.run(run())


@FUZZ
@given(values=st.lists(header_values, min_size=1, max_size=2), version=st.sampled_from([LATEST, None]))
def test_last_event_id_never_gets_a_5xx(
    server: LiveServer, session_id: str, values: list[bytes], version: str | None
) -> None:
    """A GET resuming a stream: the id is the client's string; only the ids the server issues are read."""
    base = {"Accept": "text/event-stream", "Mcp-Session-Id": session_id}
    if version is not None:
        base["MCP-Protocol-Version"] = version

    async def run() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            await exchange(http, "GET", server.url, raw_headers(base, {"last-event-id": values}), None)

    asyncio.run(run())


@FUZZ
@given(
    verb=st.sampled_from(["POST", "POST", "POST", "GET", "DELETE"]),
    changes=header_sets(MODERN_HEADERS),
    region=st.one_of(st.none(), st.sampled_from(["Hello", "é", "a,b", "\u0000"])),
)
def test_2026_headers_never_get_a_5xx(
    server: LiveServer, verb: str, changes: dict[str, list[bytes] | None], region: str | None
) -> None:
    base = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_x_mcp_header",
    }
    if region is not None:
        base["Mcp-Param-Region"] = "=?base64?" + base64.b64encode(region.encode()).decode() + "?="
    arguments = {} if region is None else {"region": region}
    params = {"name": "test_x_mcp_header", "arguments": arguments, "_meta": sessionless_meta()}
    body = rpc("tools/call", params, 1) if verb == "POST" else None

    async def run() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            await exchange(http, verb, server.url, raw_headers(base, changes), body)

    asyncio.run(run())
