"""Property test of I10 on the 2026-07-28 path (no session: the revision in each request's ``_meta`` and in
its routing headers): hypothesis sends hostile requests, each with an envelope that is mostly right and
sometimes not (a value of the wrong type, a number past every float, a lone surrogate), and with the
``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers a client derives from the body (ASCII as
is, the rest in the Base64 sentinel), sometimes left out or wrong. To a server on SQLite and to one on
PostgreSQL with Redis.

Properties: no 5xx; a body a strict client reads; an error answered with an HTTP status its code maps to
(``http_status``), with the request's id when the request is plainly valid; on a 200 each request whose id
is acceptable answered once, never -32603 but for a reply the wire cannot carry; and after each example
nothing is left in flight, in the worker or in the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_server.wire.v2026_07_28 import http_status
from tests.support.hostile import (
    FUZZ,
    Huge,
    check_answers,
    deep_reader,  # noqa: F401 (an autouse fixture: reading the deep echoes)
    hostile_text,
    json_values,
    may_fail_to_parse,
    params_for,
    plainly_valid_request,
    read_http,
    render,
    requests,
    sentinel,
)
from tests.support.live import LiveServer, shared_site, start_server
from tests.support.raw import ACCEPT_BOTH, MODERN, rpc, sessionless_meta

TIMEOUT = 20.0
ENVELOPE_KEYS = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
]
HEADER_BYTES = 4000
NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId"}


def header_value(value: str) -> bytes:
    """``value`` as a client writes it in a header: printable ASCII as is, anything else as the Base64
    sentinel of its UTF-8 (a lone surrogate's three bytes included: the server must refuse those). Cut to
    4,000 bytes: the HTTP server refuses a request whose headers pass 16 KB before the application sees it,
    with no JSON to read."""
    if value.isascii() and value.isprintable() and value == value.strip() and value:
        written = value.encode()
    else:
        written = sentinel(value.encode("utf-8", "surrogatepass"))
    return written[:HEADER_BYTES]


@st.composite
def modern_requests(draw: st.DrawFn) -> tuple[Any, list[tuple[bytes, bytes]]]:
    """A 2026-07-28 request (or something like one) and its headers."""
    message = draw(requests())
    params = message.get("params")
    if "method" in message and (params is None or isinstance(params, dict)):
        params = dict(params or {})
        given = params.get("_meta")
        meta: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
        meta.update(sessionless_meta(client_info={"name": "fuzz", "version": "1"}))
        if draw(st.integers(0, 3)) == 0:  # one key of the envelope hostile, or left out
            key = draw(st.sampled_from(ENVELOPE_KEYS))
            value = draw(st.one_of(st.none(), json_values, st.just(Huge()), hostile_text))
            if value is None:
                del meta[key]
            else:
                meta[key] = value
        params["_meta"] = meta
        message["params"] = params
    headers = [(b"accept", ACCEPT_BOTH.encode()), (b"content-type", b"application/json")]
    version = draw(st.sampled_from([MODERN] * 6 + ["2025-11-25", "2099-01-01"]))
    headers.append((b"mcp-protocol-version", version.encode()))
    method = message.get("method")
    if isinstance(method, str) and draw(st.integers(0, 7)):
        headers.append((b"mcp-method", header_value(method)))
        field = NAME_FIELDS.get(method)
        named = params.get(field) if field and isinstance(params, dict) else None
        if isinstance(named, str) and draw(st.integers(0, 7)):
            headers.append((b"mcp-name", header_value(named if draw(st.integers(0, 7)) else named + "x")))
    return message, headers


def check_modern(body: Any, response: httpx.Response, modern: bool) -> None:
    """``modern``: the request named 2026-07-28 in its header (else the handshake era's rules answer it,
    which need a session: 400 with -32000 and a null id, before the message is read)."""
    messages = read_http(response)
    if response.status_code >= 400:
        [error] = messages
        code = error["error"]["code"]
        if code == -32700:
            assert may_fail_to_parse(body), error
        if modern:
            assert http_status(code) == response.status_code, (code, response.status_code)
            if plainly_valid_request(body):
                assert error["id"] == body["id"], (error, body)
        return
    if response.status_code == 202:
        assert messages == []
        return
    elements = body if isinstance(body, list) else [body]
    check_answers(elements, [m for m in messages if "method" not in m])


async def post_modern(server: LiveServer, body: Any, headers: list[tuple[bytes, bytes]]) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        response = await http.post(server.url, content=render(body), headers=headers)
        check_modern(body, response, (b"mcp-protocol-version", MODERN.encode()) in headers)
        stats = rpc("test/stats", {"_meta": sessionless_meta()}, "stats-probe")
        routed = {"accept": ACCEPT_BOTH, "mcp-protocol-version": MODERN, "mcp-method": "test/stats"}
        probe = await http.post(server.url, json=stats, headers=routed)
        [answer] = [m for m in read_http(probe) if m.get("id") == "stats-probe"]
        left = answer["result"]
        assert (left["inflight"], left["ledger_pending"], left["outbound"]) == (0, 0, 0), left


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of this module's own (the ledger check reads every pending row of its database)."""
    sites: contextlib.AbstractContextManager[dict[str, str]] = (
        shared_site() if request.param == "postgresql" else contextlib.nullcontext({})
    )
    with sites as env:
        started = start_server(
            tmp_path_factory.mktemp(f"fuzz-modern-{request.param}"), {"RESPONSE_MODE": "auto"}, **env
        )
        try:
            yield started
        finally:
            started.stop()


@FUZZ
@given(request=modern_requests())
def test_every_hostile_2026_request_is_answered_once(
    server: LiveServer, request: tuple[Any, list[tuple[bytes, bytes]]]
) -> None:
    body, headers = request
    asyncio.run(post_modern(server, body, headers))


@FUZZ
@given(method=st.sampled_from(sorted(NAME_FIELDS)), data=st.data())
def test_a_well_routed_2026_request_with_hostile_params_is_served_or_refused_by_its_code(
    server: LiveServer, method: str, data: st.DataObject
) -> None:
    """The request as a well-behaved client routes it, only its params hostile: it reaches the handler."""
    params = data.draw(params_for(method))
    if not isinstance(params, dict):
        params = {}
    params["_meta"] = {**(params.get("_meta") or {}), **sessionless_meta()}
    body = rpc(method, params, 7)
    headers = [
        (b"accept", ACCEPT_BOTH.encode()),
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", MODERN.encode()),
        (b"mcp-method", method.encode()),
    ]
    named = params.get(NAME_FIELDS[method])
    if isinstance(named, str):
        headers.append((b"mcp-name", header_value(named)))
    asyncio.run(post_modern(server, body, headers))
