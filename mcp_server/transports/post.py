"""Reading a POST body into JSON-RPC messages: media types, JSON, batch rules and request ids."""

from __future__ import annotations

import logging
from typing import Any

from ..wire.errors import JSONRPCError
from ..wire.jsonrpc import IncomingMessage, JSONRPCRequest, decode_body, echoable_id, parse_message, refusal
from .rules import Headers, HTTPProblem, accepts, is_json_content_type

__all__ = ["HANDSHAKE_HEADER", "parse_post", "read_json_body"]

logger = logging.getLogger("mcp_server.http")

HANDSHAKE_HEADER = "mcp-protocol-version"


def read_json_body(headers: Headers, body: bytes) -> Any:
    """The JSON value a POST carries: 406 unless the client accepts JSON and SSE, 415 unless the body is
    declared JSON, 400 (-32700) unless it parses."""
    if not accepts(headers, "application/json", "text/event-stream"):
        raise HTTPProblem(
            406, "Not Acceptable: the client must accept both application/json and text/event-stream"
        )
    if not is_json_content_type(headers):
        raise HTTPProblem(415, "Unsupported Media Type: Content-Type must be application/json")
    try:
        return decode_body(body)
    except JSONRPCError as exc:
        raise HTTPProblem(400, exc.message, code=exc.code) from exc


def parse_post(
    headers: Headers, body: bytes
) -> tuple[list[IncomingMessage | dict[str, Any]], bool, JSONRPCRequest | None]:
    """``(messages, is_batch, initialize request)``; invalid batch members become error responses."""
    payload = read_json_body(headers, body)
    is_batch = isinstance(payload, list)
    items = payload if is_batch else [payload]
    if not items:
        raise HTTPProblem(400, "Invalid Request: empty batch")
    messages: list[IncomingMessage | dict[str, Any]] = []
    for item in items:
        try:
            messages.append(parse_message(item))
        except JSONRPCError as exc:
            if not is_batch:
                request_id = echoable_id(item.get("id")) if isinstance(item, dict) else None
                raise HTTPProblem(400, exc.message, code=exc.code, request_id=request_id) from exc
            messages.append(refusal(item, exc))  # a batch's other members are served all the same
    initialize = [m for m in messages if isinstance(m, JSONRPCRequest) and m.method == "initialize"]
    if initialize and (is_batch or len(messages) > 1):
        raise HTTPProblem(400, "Invalid Request: initialize must be sent on its own, not in a batch")
    return messages, is_batch, initialize[0] if initialize else None
