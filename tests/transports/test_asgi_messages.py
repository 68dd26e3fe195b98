"""The exact ASGI messages of responses built with :mod:`mcp_server.wire.asgi`, at the ASGI boundary: the
consumer's refusals (a JSON error: its type first, extra headers in order, its length last) and the OAuth
metadata document (no length: sent as it was before the helpers)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_server.auth.metadata import CORS_HEADERS, ProtectedResourceMetadata
from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.transports.consumer import MCPConsumer
from mcp_server.wire.asgi import Header, Message
from tests.support.runtimes import in_memory_runtime


class Recorder:
    """An ASGI ``send`` that keeps what it is given."""

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.sent.append(message)


@pytest.fixture
async def runtime(settings: Any) -> AsyncIterator[Runtime]:
    async with in_memory_runtime(settings, "worker-asgi") as made:
        yield made


def request_of(body: bytes) -> Any:
    """An ASGI ``receive``: the request's body, then nothing (until the consumer stops reading)."""
    bodies = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if bodies:
            return bodies.pop()
        await asyncio.Event().wait()  # cancelled by the consumer once its response is complete
        raise AssertionError("unreachable")

    return receive


def json_error(sent: list[Message], status: int, extra: list[Header]) -> dict[str, Any]:
    """The error of a JSON refusal, after checking its two messages are exactly these."""
    body = sent[1]["body"]
    assert sent == [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                *extra,
                (b"content-length", str(len(body)).encode()),
            ],
        },
        {"type": "http.response.body", "body": body, "more_body": False},
    ]
    error: dict[str, Any] = json.loads(body)["error"]
    return error


async def test_a_declared_body_too_large_is_refused_with_these_exact_messages(
    settings: Any, runtime: Runtime
) -> None:
    """Answered before the runtime starts or a byte is read."""
    settings.MCP_SERVER = {**settings.MCP_SERVER, "MAX_REQUEST_BYTES": 100}
    send = Recorder()
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"content-length", b"101")]}

    async def receive() -> Message:
        raise AssertionError("the body was read")

    await asyncio.wait_for(MCPConsumer(mcp, runtime)(scope, receive, send), 10)
    assert json_error(send.sent, 413, []) == {"code": -32600, "message": "Request body larger than 100 bytes"}


@pytest.mark.parametrize(
    "declared",
    [[b"\xb2"], [b"\xd9\xa3"], [b"5", b"5"], [b"-1"], [b""], [b"1e3"]],
    ids=["superscript-two", "arabic-digit-bytes", "repeated", "negative", "empty", "float"],
)
async def test_a_content_length_that_is_no_number_leaves_the_running_count_to_decide(
    settings: Any, runtime: Runtime, declared: list[bytes]
) -> None:
    """Read as no declared length (the bytes received are counted): a body over the limit is refused for
    what it is, never a 500."""
    settings.MCP_SERVER = {**settings.MCP_SERVER, "MAX_REQUEST_BYTES": 100}
    send = Recorder()
    headers = [(b"content-length", value) for value in declared]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    await asyncio.wait_for(MCPConsumer(mcp, runtime)(scope, request_of(b"x" * 101), send), 10)
    assert json_error(send.sent, 413, []) == {"code": -32600, "message": "Request body larger than 100 bytes"}


async def test_a_method_not_allowed_names_the_allowed_ones_between_type_and_length(
    settings: Any, runtime: Runtime
) -> None:
    settings.ALLOWED_HOSTS = ["mcp.example.org"]
    send = Recorder()
    scope = {"type": "http", "method": "PUT", "path": "/mcp", "headers": [(b"host", b"mcp.example.org")]}
    await asyncio.wait_for(MCPConsumer(mcp, runtime)(scope, request_of(b""), send), 10)
    error = json_error(send.sent, 405, [(b"allow", b"GET, POST, DELETE")])
    assert error == {"code": -32600, "message": "Method PUT not allowed"}


@pytest.mark.parametrize(
    ("method", "host", "status", "body", "extra"),
    [
        ("OPTIONS", b"mcp.example.org", 204, b"", []),
        ("PUT", b"mcp.example.org", 405, b'{"error": "method not allowed"}', [(b"allow", b"GET, OPTIONS")]),
        ("GET", b"evil.example", 403, b'{"error": "host not allowed"}', []),
    ],
)
async def test_the_metadata_document_answers_with_these_exact_messages(
    settings: Any, method: str, host: bytes, status: int, body: bytes, extra: list[Header]
) -> None:
    settings.ALLOWED_HOSTS = ["mcp.example.org"]
    send = Recorder()
    path = "/.well-known/oauth-protected-resource/mcp"
    scope = {"type": "http", "method": method, "path": path, "headers": [(b"host", host)]}
    await ProtectedResourceMetadata("/mcp")(scope, request_of(b""), send)
    typed = [(b"content-type", b"application/json")] if body else []
    assert send.sent == [
        {"type": "http.response.start", "status": status, "headers": [*CORS_HEADERS, *extra, *typed]},
        {"type": "http.response.body", "body": body, "more_body": False},
    ]
