"""``LazyASGIRequest``: Django's ``ASGIRequest``, built on first use, and the header reads that need no build.

Each test compares with a real ``ASGIRequest`` of the same scope; the last ones drive the MCP consumer
in-process (a real runtime, a real server) and look at the request a tool was handed.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIRequest

from mcp_server.core.asgi_request import LazyASGIRequest, client_address, header_value, meta_view
from mcp_server.core.context import Context
from mcp_server.registry.server import MCPServer
from mcp_server.runtime import Runtime
from mcp_server.transports.consumer import MCPConsumer
from mcp_server.transports.rules import headers_of
from mcp_server.wire.asgi import Message
from tests.support.runtimes import in_memory_runtime

HEADERS = [
    (b"host", b"mcp.example.org"),
    (b"content-type", b"application/json; charset=latin-1"),
    (b"content-length", b"2"),
    (b"accept", b"application/json, text/event-stream"),
    (b"cookie", b"sessionid=abc; theme=dark"),
    (b"x-forwarded-for", b"10.0.0.1"),
    (b"x-forwarded-for", b"10.0.0.2"),
    (b"x_spoofed", b"dropped by Django"),
    (b"authorization", b"Bearer t0ken"),
]
SCOPE: dict[str, Any] = {
    "type": "http",
    "method": "post",
    "path": "/mcp",
    "query_string": b"a=1&b=two",
    "headers": HEADERS,
    "client": ("192.0.2.7", 50123),
    "server": ("127.0.0.1", 8000),
}
FIELDS = ("META", "path", "path_info", "script_name", "method", "content_type", "content_params", "encoding")


def built(scope: dict[str, Any]) -> ASGIRequest:
    return ASGIRequest(scope, io.BytesIO(b"{}"))


def lazy(scope: dict[str, Any]) -> LazyASGIRequest:
    return LazyASGIRequest(scope, io.BytesIO(b"{}"), headers_of(scope["headers"]))


def is_built(request: Any) -> bool:
    return "_unbuilt_body" not in vars(request)


@pytest.mark.parametrize("field", FIELDS)
def test_each_field_reads_as_djangos_own(field: str) -> None:
    request = lazy(SCOPE)
    assert not is_built(request)
    assert getattr(request, field) == getattr(built(SCOPE), field)
    assert is_built(request)


def test_the_query_cookies_and_body_read_as_djangos_own(settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["mcp.example.org"]
    request, expected = lazy(SCOPE), built(SCOPE)
    assert request.GET == expected.GET
    assert request.COOKIES == {"sessionid": "abc", "theme": "dark"} == expected.COOKIES
    assert request.body == b"{}" == expected.body
    assert request.headers == expected.headers
    assert request.get_host() == "mcp.example.org"


def test_what_is_set_before_it_is_built_is_kept() -> None:
    request: Any = lazy(SCOPE)
    request.user = "ada"
    request.auth = "token"
    assert request.META["REQUEST_METHOD"] == "POST"
    assert (request.user, request.auth) == ("ada", "token")


def test_an_attribute_nobody_set_is_missing_after_the_build_as_before() -> None:
    request = lazy(SCOPE)
    assert getattr(request, "auth", None) is None
    assert is_built(request)
    with pytest.raises(AttributeError, match="no attribute 'auth'"):
        request.auth  # noqa: B018
    assert not hasattr(lazy(SCOPE), "_post")  # Django's own probes (``_get_post``) see what they expect


def test_setting_the_encoding_builds_it_first() -> None:
    request = lazy(SCOPE)
    request.encoding = "utf-8"
    assert request.encoding == "utf-8"
    assert request.META["HTTP_HOST"] == "mcp.example.org"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("authorization", "Bearer t0ken"),
        ("cookie", "sessionid=abc; theme=dark"),
        ("x-forwarded-for", "10.0.0.1,10.0.0.2"),
        ("content-type", "application/json; charset=latin-1"),
        ("content-length", "2"),
        ("x_spoofed", None),
        ("x-absent", None),
    ],
)
def test_a_header_reads_as_djangos_meta_has_it_without_building(name: str, expected: str | None) -> None:
    request = lazy(SCOPE)
    assert header_value(request, name) == expected
    assert not is_built(request)
    assert header_value(built(SCOPE), name) == expected  # and from a built one, through META


def test_the_client_address_is_remote_addr_without_building() -> None:
    request = lazy(SCOPE)
    assert client_address(request) == "192.0.2.7" == built(SCOPE).META["REMOTE_ADDR"]
    assert not is_built(request)
    assert client_address(lazy({**SCOPE, "client": None})) == ""
    assert client_address(None) == ""
    assert client_address(built(SCOPE)) == "192.0.2.7"


def test_the_meta_view_reads_headers_unbuilt_and_the_rest_from_meta() -> None:
    request = lazy(SCOPE)
    view = meta_view(request)
    assert view is not None
    assert view["HTTP_AUTHORIZATION"] == "Bearer t0ken"
    assert view.get("HTTP_X_FORWARDED_FOR") == "10.0.0.1,10.0.0.2"
    assert view.get("HTTP_X_SPOOFED") is None
    assert view.get("HTTP_TRACEPARENT") is None
    assert view.get("HTTP_TRACEPARENT", "none sent") == "none sent"
    assert "HTTP_AUTHORIZATION" in view
    assert "HTTP_TRACEPARENT" not in view
    number: Any = 42
    assert number not in view  # (a key that is no text is in no META)
    with pytest.raises(KeyError):
        view["HTTP_TRACEPARENT"]
    assert not is_built(request)
    assert view["REMOTE_ADDR"] == "192.0.2.7"  # not a header: Django's META, built for it
    assert dict(view) == request.META == built(SCOPE).META
    assert len(view) == len(request.META)
    assert meta_view(None) is None
    assert meta_view(object()) is None


# -- through the consumer -------------------------------------------------------------------------------

server = MCPServer("lazy-request-units")
handed: list[Any] = []


@server.tool
async def look(ctx: Context) -> str:
    """Keep the request this call was handed, and whether it was built before the tool read it."""
    handed.append((ctx.request, is_built(ctx.request)))
    return "seen"


@pytest.fixture
async def runtime(settings: Any) -> AsyncIterator[Runtime]:
    settings.ALLOWED_HOSTS = ["localhost"]
    async with in_memory_runtime(settings, "worker-lazy") as made:
        yield made


async def post(runtime: Runtime, extra: list[tuple[bytes, bytes]]) -> list[Message]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "units", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "look", "_meta": meta}}
    body = json.dumps(message).encode()
    headers = [
        (b"host", b"localhost"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-length", str(len(body)).encode()),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"look"),
        *extra,
    ]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "client": ("127.0.0.1", 1)}
    bodies = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[Message] = []

    async def receive() -> Message:
        if bodies:
            return bodies.pop()
        await asyncio.Event().wait()  # until the consumer stops listening for a disconnect
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await asyncio.wait_for(MCPConsumer(server, runtime)(scope, receive, send), 10)
    return sent


@pytest.mark.django_db(transaction=True)
async def test_an_anonymous_call_reaches_its_tool_with_the_request_unbuilt(runtime: Runtime) -> None:
    handed.clear()
    sent = await post(runtime, [(b"x-trace", b"kept")])
    assert sent[0]["status"] == 200
    assert json.loads(sent[1]["body"])["result"]["content"] == [{"type": "text", "text": "seen"}]
    [(request, was_built)] = handed
    assert not was_built
    assert request.META["HTTP_X_TRACE"] == "kept"  # and Django's own, once the tool reads it
    assert request.META["REMOTE_ADDR"] == "127.0.0.1"
    assert request.user.is_anonymous


@pytest.mark.django_db(transaction=True)
async def test_an_unknown_bearer_token_is_refused_as_before(runtime: Runtime) -> None:
    handed.clear()
    sent = await post(runtime, [(b"authorization", b"Bearer not-a-token")])
    assert sent[0]["status"] == 401
    challenge = dict(sent[0]["headers"])[b"www-authenticate"].decode()
    assert challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in challenge
    assert handed == []
