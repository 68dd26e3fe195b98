"""The ASGI message helpers: the exact dicts they build and send (their call sites' messages are pinned in
``tests/transports/test_asgi_messages.py``)."""

from __future__ import annotations

import pytest

from mcp_server.transports.exchange import content_length as exchange_content_length
from mcp_server.wire.asgi import (
    JSON_CONTENT_TYPE,
    Header,
    Message,
    body_chunk,
    body_end,
    content_length,
    header,
    response_start,
    send_empty_response,
    send_json_response,
    send_response,
)

EXTRA: list[Header] = [(b"mcp-session-id", b"abc"), (b"www-authenticate", b'Bearer realm="x"')]


class Recorder:
    """An ASGI ``send`` that keeps what it is given."""

    def __init__(self) -> None:
        self.sent: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.sent.append(message)


def test_each_builder_returns_the_exact_message() -> None:
    headers = [(b"content-type", b"text/event-stream")]
    assert response_start(200, headers) == {"type": "http.response.start", "status": 200, "headers": headers}
    assert response_start(200, headers)["headers"] is headers  # passed as given, not copied
    assert body_chunk(b"data") == {"type": "http.response.body", "body": b"data", "more_body": True}
    assert body_end() == {"type": "http.response.body", "body": b"", "more_body": False}
    assert body_end(b"last") == {"type": "http.response.body", "body": b"last", "more_body": False}


def test_each_message_is_a_new_dict() -> None:
    """A server (or a middleware) may change a message it was given: the next one is not affected."""
    first = body_end()
    first["body"] = b"changed"
    assert body_end() == {"type": "http.response.body", "body": b"", "more_body": False}
    assert body_chunk(b"x") is not body_chunk(b"x")


def test_headers_are_encoded_in_one_place() -> None:
    assert header("Mcp-Session-Id", "tok_1-2") == (b"mcp-session-id", b"tok_1-2")
    assert header("www-authenticate", 'Bearer error="x", realm="é"') == (
        b"www-authenticate",
        'Bearer error="x", realm="é"'.encode("latin-1"),
    )
    with pytest.raises(UnicodeEncodeError):  # HTTP cannot carry it: never sent mangled
        header("www-authenticate", "Bearer realm=\u2603")
    assert content_length(b"") == (b"content-length", b"0")
    assert content_length(b"12345") == (b"content-length", b"5")
    assert exchange_content_length is content_length  # its old import path still works


async def test_send_response_sends_the_start_then_one_body_that_ends_it() -> None:
    send = Recorder()
    await send_response(send, 403, [(b"allow", b"GET")], b"no")
    assert send.sent == [
        {"type": "http.response.start", "status": 403, "headers": [(b"allow", b"GET")]},
        {"type": "http.response.body", "body": b"no", "more_body": False},
    ]


async def test_a_json_response_has_its_type_first_the_extra_headers_in_order_and_its_length_last() -> None:
    send = Recorder()
    body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    await send_json_response(send, 200, body, EXTRA)
    assert send.sent == [
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [JSON_CONTENT_TYPE, *EXTRA, (b"content-length", str(len(body)).encode())],
        },
        {"type": "http.response.body", "body": body, "more_body": False},
    ]
    assert JSON_CONTENT_TYPE == (b"content-type", b"application/json")


async def test_an_empty_response_has_the_extra_headers_then_a_zero_length() -> None:
    send = Recorder()
    await send_empty_response(send, 202, EXTRA)
    await send_empty_response(send, 200)
    assert send.sent == [
        {"type": "http.response.start", "status": 202, "headers": [*EXTRA, (b"content-length", b"0")]},
        {"type": "http.response.body", "body": b"", "more_body": False},
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]
