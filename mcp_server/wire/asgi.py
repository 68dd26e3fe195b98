"""The ASGI messages of an HTTP response, built in one place: its start, its body chunks, its end.

Plain functions that return the dicts an ASGI server reads, and three that send a whole response: no class per
message, as they run on the request path of every call. Headers are lists of ``(name, value)`` byte pairs,
names in lower case, as ASGI carries them; :func:`header` is the one place a header given as text is encoded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = [
    "JSON_CONTENT_TYPE",
    "Header",
    "Message",
    "Send",
    "body_chunk",
    "body_end",
    "content_length",
    "header",
    "response_start",
    "send_empty_response",
    "send_json_response",
    "send_response",
]

Message = dict[str, Any]
"""One ASGI message."""

Send = Callable[[Message], Awaitable[None]]
"""The ASGI ``send`` callable (or a consumer's ``send`` method)."""

Header = tuple[bytes, bytes]
"""One header as ASGI carries it: ``(lower-case name, value)``, both bytes."""

JSON_CONTENT_TYPE: Header = (b"content-type", b"application/json")


def header(name: str, value: str) -> Header:
    """A header given as text, as ASGI carries it: the name in lower case, both encoded as Latin-1 (raises
    ``UnicodeEncodeError`` for a value that HTTP cannot carry)."""
    return (name.lower().encode("latin-1"), value.encode("latin-1"))


def content_length(body: bytes) -> Header:
    """The ``Content-Length`` header of a whole body: the server sends it as is, in one write, rather than
    as chunks with a terminator (one system call fewer per response)."""
    return (b"content-length", str(len(body)).encode())


def response_start(status: int, headers: list[Header]) -> Message:
    """``http.response.start``: the status line and the headers (sent by the server with the first body)."""
    return {"type": "http.response.start", "status": status, "headers": headers}


def body_chunk(body: bytes) -> Message:
    """``http.response.body`` with more to come (a stream's event, a comment)."""
    return {"type": "http.response.body", "body": body, "more_body": True}


def body_end(body: bytes = b"") -> Message:
    """``http.response.body`` that ends the response: its last bytes (none by default)."""
    return {"type": "http.response.body", "body": body, "more_body": False}


async def send_response(send: Send, status: int, headers: list[Header], body: bytes = b"") -> None:
    """A whole response: its start with ``headers`` as given, then ``body`` in one message that ends it."""
    await send(response_start(status, headers))
    await send(body_end(body))


async def send_json_response(send: Send, status: int, body: bytes, headers: Iterable[Header] = ()) -> None:
    """A whole response of encoded JSON: ``Content-Type`` first, then ``headers``, then ``Content-Length``."""
    await send_response(send, status, [JSON_CONTENT_TYPE, *headers, content_length(body)], body)


async def send_empty_response(send: Send, status: int, headers: Iterable[Header] = ()) -> None:
    """A whole response without a body (a 202, a DELETE's 200): ``headers``, then ``Content-Length: 0``."""
    await send_response(send, status, [*headers, content_length(b"")])
