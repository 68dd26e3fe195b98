"""Reading a POST body into JSON-RPC messages, and answering ``initialize``, which opens a session."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp_types.methods import parse_client_request, serialize_server_result
from pydantic import ValidationError

from ..conf import mcp_settings
from ..protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, JSONRPCError
from ..protocol.inflight import ANSWERED, InFlight, inflight
from ..protocol.jsonrpc import (
    IncomingMessage,
    JSONRPCRequest,
    decode_body,
    dumps,
    error_response,
    parse_message,
    result_response,
)
from ..protocol.lifecycle import initialize_result
from ..protocol.versions import negotiate
from ..sessions import acreate_session
from . import sse
from .rules import Headers, HTTPProblem, accepts, is_json_content_type

if TYPE_CHECKING:
    from .consumer import MCPConsumer

__all__ = ["HANDSHAKE_HEADER", "parse_post", "serve_initialize"]

logger = logging.getLogger("mcp_server.http")

HANDSHAKE_HEADER = "mcp-protocol-version"


async def _sent_inline(entry: InFlight, response: dict[str, Any] | None) -> None:
    """``initialize`` is answered inline by :func:`serve_initialize`; the ledger only records it."""


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
            messages.append(parse_message(item))
        except JSONRPCError as exc:
            if not is_batch:
                raise HTTPProblem(400, exc.message, code=exc.code) from exc
            item_id = item.get("id") if isinstance(item, dict) else None
            messages.append(error_response(item_id if isinstance(item_id, str | int) else None, exc))
    initialize = [m for m in messages if isinstance(m, JSONRPCRequest) and m.method == "initialize"]
    if initialize and (is_batch or len(messages) > 1):
        raise HTTPProblem(400, "Invalid Request: initialize must be sent on its own, not in a batch")
    return messages, is_batch, initialize[0] if initialize else None


async def serve_initialize(
    consumer: MCPConsumer, message: JSONRPCRequest, *, user: Any, request: Any
) -> None:
    """Negotiate the revision, store the session and answer with its ``Mcp-Session-Id``."""
    params = message.params or {}
    version = negotiate(params.get("protocolVersion"))
    extra: list[tuple[bytes, bytes]] = []
    entry = None
    try:
        parse_client_request("initialize", version, params)
        session_id = None
        if not mcp_settings.STATELESS:
            session = await acreate_session(
                server=consumer.server.name, protocol_version=version, params=params, user=user
            )
            session_id = session.id
            extra.append((b"mcp-session-id", session.id.encode()))
        entry = await inflight.open(
            session_id, message.id, "initialize", _sent_inline, user_id=getattr(user, "pk", None)
        )
        result = serialize_server_result("initialize", version, initialize_result(consumer.server, params))
        response = result_response(message.id, result)
    except ValidationError as exc:
        error = JSONRPCError(INVALID_PARAMS, f"Invalid params for initialize: {exc.errors()[0]['msg']}")
        response = error_response(message.id, error)
    except Exception:
        logger.exception("initialize failed")
        response = error_response(
            message.id, JSONRPCError(INTERNAL_ERROR, "Internal error during initialize")
        )
    if entry is not None:
        await inflight.settle(entry, ANSWERED, response)
    if mcp_settings.RESPONSE_MODE == "sse":
        await consumer.send(
            {"type": "http.response.start", "status": 200, "headers": sse.SSE_HEADERS + extra}
        )
        await consumer.send({"type": "http.response.body", "body": sse.event(response), "more_body": False})
        return
    await consumer.send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), *extra],
        }
    )
    await consumer.send({"type": "http.response.body", "body": dumps(response), "more_body": False})
