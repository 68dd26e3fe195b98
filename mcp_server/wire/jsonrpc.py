"""Decoding and encoding of JSON-RPC 2.0 messages, validated with the ``mcp-types`` envelope models."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

from mcp_types.jsonrpc import (
    JSONRPCError as WireError,
)
from mcp_types.jsonrpc import (
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from .errors import INVALID_REQUEST, PARSE_ERROR, JSONRPCError

__all__ = [
    "IncomingMessage",
    "JSONRPCNotification",
    "JSONRPCRequest",
    "JSONRPCResponse",
    "RequestId",
    "WireError",
    "decode_body",
    "dumps",
    "error_response",
    "notification",
    "parse_message",
    "result_response",
]

IncomingMessage: TypeAlias = JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | WireError


def dumps(message: Any) -> bytes:
    """Compact UTF-8 JSON, as sent on every transport."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()


def decode_body(body: bytes) -> Any:
    """Parse a request body; raise -32700 when it is not JSON."""
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise JSONRPCError(PARSE_ERROR, f"Parse error: {exc}") from exc


def parse_message(obj: Any) -> IncomingMessage:
    """Validate one decoded JSON value as a JSON-RPC message; raise -32600 when it is not one."""
    if not isinstance(obj, dict):
        raise JSONRPCError(INVALID_REQUEST, "Invalid request: a JSON-RPC message must be an object")
    if "method" in obj and obj.get("id", 0) is None:
        raise JSONRPCError(INVALID_REQUEST, "Invalid request: a request id must not be null")
    if "method" in obj and "id" not in obj and ("result" in obj or "error" in obj):
        raise JSONRPCError(INVALID_REQUEST, "Invalid request: a message cannot be both request and response")
    try:
        message = jsonrpc_message_adapter.validate_python(obj)
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors())
        raise JSONRPCError(INVALID_REQUEST, f"Invalid request: {detail}") from exc
    return message


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: JSONRPCError) -> dict[str, Any]:
    """An error response; ``request_id`` is ``None`` when the id could not be read."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A notification message."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message
