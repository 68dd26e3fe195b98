"""Reading a POST body into JSON-RPC messages: media types, JSON, batch rules and request ids."""

from __future__ import annotations

import logging
from typing import Any

from ..wire.errors import INVALID_REQUEST, JSONRPCError
from ..wire.jsonrpc import (
    IncomingMessage,
    JSONRPCRequest,
    decode_body,
    error_response,
    parse_message,
)
from .rules import Headers, HTTPProblem, accepts, is_json_content_type

__all__ = ["HANDSHAKE_HEADER", "parse_post"]

logger = logging.getLogger("mcp_server.http")

HANDSHAKE_HEADER = "mcp-protocol-version"


def parse_post(
    headers: Headers, body: bytes
) -> tuple[list[IncomingMessage | dict[str, Any]], bool, JSONRPCRequest | None]:
    """``(messages, is_batch, initialize request)``; invalid batch members become error responses."""
    if not accepts(headers, "application/json", "text/event-stream"):
        raise HTTPProblem(
            406, "Not Acceptable: the client must accept both application/json and text/event-stream"
        )
    if not is_json_content_type(headers):
        raise HTTPProblem(415, "Unsupported Media Type: Content-Type must be application/json")
    try:
        payload = decode_body(body)
    except JSONRPCError as exc:
        raise HTTPProblem(400, exc.message, code=exc.code) from exc
    is_batch = isinstance(payload, list)
    items = payload if is_batch else [payload]
    if not items:
        raise HTTPProblem(400, "Invalid Request: empty batch")
    messages: list[IncomingMessage | dict[str, Any]] = []
    for item in items:
        try:
            messages.append(_parse_member(item))
        except JSONRPCError as exc:
            if not is_batch:
                raise HTTPProblem(400, exc.message, code=exc.code) from exc
            item_id = item.get("id") if isinstance(item, dict) else None
            messages.append(error_response(item_id if _usable_id(item_id) else None, exc))
    initialize = [m for m in messages if isinstance(m, JSONRPCRequest) and m.method == "initialize"]
    if initialize and (is_batch or len(messages) > 1):
        raise HTTPProblem(400, "Invalid Request: initialize must be sent on its own, not in a batch")
    return messages, is_batch, initialize[0] if initialize else None


def _usable_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _parse_member(item: Any) -> IncomingMessage:
    """:func:`parse_message`, refusing a request whose id is neither a string nor an integer.

    Such a message would otherwise validate as a notification (the envelope models ignore the ``id``)
    and never be answered.
    """
    request_id = item.get("id") if isinstance(item, dict) and "method" in item else None
    if request_id is not None and not _usable_id(request_id):
        raise JSONRPCError(INVALID_REQUEST, "Invalid request: a request id must be a string or an integer")
    return parse_message(item)
