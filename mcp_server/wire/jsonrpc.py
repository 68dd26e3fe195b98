"""Decoding and encoding of JSON-RPC 2.0 messages, validated with the ``mcp-types`` envelope models."""

from __future__ import annotations

import enum
import json
import uuid
from dataclasses import dataclass
from typing import Any, TypeAlias

import orjson
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

from .errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, JSONRPCError
from .exact import exact_json
from .shapes import is_plain_request

__all__ = [
    "MAX_INT_ID",
    "MAX_METHOD_LENGTH",
    "MIN_INT_ID",
    "UNENCODABLE",
    "IncomingMessage",
    "JSONRPCNotification",
    "JSONRPCRequest",
    "JSONRPCResponse",
    "Reply",
    "RequestId",
    "WireError",
    "decode_body",
    "dumps",
    "echoable_id",
    "encodable",
    "encode_message",
    "encode_reply",
    "error_response",
    "id_problem",
    "lone_surrogate_at",
    "method_problem",
    "notification",
    "parse_message",
    "refusal",
    "result_response",
    "scrub",
    "unencodable_reason",
]

IncomingMessage: TypeAlias = JSONRPCRequest | JSONRPCNotification | JSONRPCResponse | WireError

MAX_METHOD_LENGTH = 100
"""Characters of a method name the ledger's ``method`` column keeps (a longer one is served, and unknown)."""

MIN_INT_ID = -(2**63)
MAX_INT_ID = 2**63 - 1
"""Integer ids must fit in 64 bits (any client's integer type, a database's ``bigint``)."""

UNENCODABLE = (ValueError, TypeError, RecursionError)
"""What :func:`dumps` raises for a value JSON cannot carry (``UnicodeEncodeError`` is a ``ValueError``)."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _orjson_natives(value: Any) -> Any:
    """What the standard library writes for the two types orjson always encodes: a UUID as its text, an
    enum member as its value (so both encoders agree on them); any other type is refused."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(message: Any) -> bytes:
    """Compact UTF-8 JSON, as sent on every transport; raises one of :data:`UNENCODABLE` for a value JSON
    cannot carry (a lone UTF-16 surrogate, NaN or an infinity, a non-JSON type, nesting past the stack). A
    UUID is written as its text and an enum member as its value.

    orjson encodes it when it can; whatever orjson refuses (a type, an integer past 64 bits, a non-string
    key, a surrogate, nesting past 254), and any value holding ``null`` (orjson writes NaN and the
    infinities as ``null``, where they must be refused), is encoded by the standard library, which decides:
    the bytes are what ``json.dumps`` makes of the value, or its error is raised."""
    data = exact_json(message)
    return _std_dumps(message) if data is None else data


def _std_dumps(message: Any) -> bytes:
    return json.dumps(
        message, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_orjson_natives
    ).encode()


MAX_DEPTH = 256
"""Arrays and objects nested deeper than this are refused (-32700), whatever the interpreter's own limit
(Python 3.11's parser stops near 1,000 levels, 3.13's goes much deeper; a reply that deep could not be
encoded again)."""


def decode_body(body: bytes) -> Any:
    """Parse a request body (UTF-8, or UTF-16/32 with its byte order mark); raise -32700 when it is not
    JSON: invalid UTF-8, ``NaN`` or ``Infinity``, or nesting deeper than :data:`MAX_DEPTH`."""
    if body.translate(_DIGITS_AS_ZERO).find(_NINETEEN_DIGITS) == -1:  # (orjson: past 64 bits a float)
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:  # not UTF-8 JSON that orjson takes: the standard library decides
            value = _std_decode(body)
    else:
        value = _std_decode(body)
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise JSONRPCError(PARSE_ERROR, "Parse error: JSON nested too deeply")
    return value


_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_NINETEEN_DIGITS = b"0" * 19
"""Nineteen digits in a row (found as nineteen zeros once every digit is one: a tenth of a regular
expression's time): a number orjson may read otherwise than the standard library (an integer out of 64
bits becomes a float there), so the body is parsed by the standard library (a long string of digits costs
only that)."""


def _std_decode(body: bytes) -> Any:
    """The standard library's reading of ``body``: its value, or -32700 with its reason."""
    try:
        return _DECODER.decode(body.decode(json.detect_encoding(body)))
    except RecursionError:
        raise JSONRPCError(PARSE_ERROR, "Parse error: JSON nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise JSONRPCError(PARSE_ERROR, f"Parse error: {exc}") from exc


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects more than ``limit`` levels (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def encodable(text: str) -> bool:
    """Whether ``text`` can be sent as UTF-8 (it holds no lone UTF-16 surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def lone_surrogate_at(value: Any) -> tuple[str | int, ...] | None:
    """Where ``value`` holds a string with a lone UTF-16 surrogate (a key or a value, at any depth), as a
    path of keys and indexes; ``None`` when it holds none. Valid as a JSON escape (``"\\ud800"``), such a
    string is no text: UTF-8 cannot carry it, and SQLite and PostgreSQL both refuse it.

    orjson writes only UTF-8: what it writes holds none (a tenth of a microsecond for a call's arguments).
    What it refuses (such a string, or an integer past 64 bits, a key that is no text, a deep nesting) is
    walked."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        pass
    else:
        return None
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if not encodable(item):
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not encodable(key):
                    return (*where, key)
                stack.append(((*where, key), child))
        elif isinstance(item, list):
            stack.extend(((*where, n), child) for n, child in enumerate(item))
    return None


def id_problem(value: Any) -> str | None:
    """Why ``value`` cannot be the id of a request this server accepts, or ``None`` when it can.

    An id must be a string (of any length: the ledger keys a long one by its hash) or an integer of 64 bits
    (JSON-RPC), hold no NUL character (no database text column can) and no lone surrogate (it could not be
    sent back).
    """
    if value is None:
        return "a request id must not be null"
    if isinstance(value, bool) or not isinstance(value, str | int):
        return "a request id must be a string or an integer"
    if isinstance(value, int):
        return None if MIN_INT_ID <= value <= MAX_INT_ID else "an integer request id must fit in 64 bits"
    if "\x00" in value:
        return "a request id must not contain NUL characters"
    if not encodable(value):
        return "a request id must not contain lone UTF-16 surrogates"
    return None


def method_problem(method: str) -> str | None:
    """Why a request's ``method`` cannot be accepted (NUL, a lone surrogate), or ``None`` (a long one is
    answered as any unknown method is: -32601)."""
    if "\x00" in method:
        return "a method name must not contain NUL characters"
    if not encodable(method):
        return "a method name must not contain lone UTF-16 surrogates"
    return None


def echoable_id(value: Any) -> RequestId | None:
    """The id to answer a refused message with: its own when it is a string or an integer that can be sent
    back, else ``None`` (JSON-RPC's null: the id could not be read)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return value if isinstance(value, int) or encodable(value) else None


def parse_message(obj: Any) -> IncomingMessage:
    """Validate one decoded JSON value as a JSON-RPC message; raise -32600 when it is not one, or when it is a
    request this server cannot accept (see :func:`id_problem`, :func:`method_problem`).

    A request whose id is of the wrong type is refused, never taken for a notification (which would go
    unanswered).
    """
    if not isinstance(obj, dict):
        raise JSONRPCError(INVALID_REQUEST, "Invalid request: a JSON-RPC message must be an object")
    if is_plain_request(obj):  # what the model would accept as it is: built without running it
        problem = id_problem(obj["id"]) or method_problem(obj["method"])
        if problem is not None:
            raise JSONRPCError(INVALID_REQUEST, f"Invalid request: {problem}")
        return _built_request(obj)
    if "method" in obj and "id" in obj and (problem := id_problem(obj["id"])) is not None:
        raise JSONRPCError(INVALID_REQUEST, f"Invalid request: {problem}")
    if "method" in obj and "id" not in obj and ("result" in obj or "error" in obj):
        raise JSONRPCError(INVALID_REQUEST, "Invalid request: a message cannot be both request and response")
    try:
        message = jsonrpc_message_adapter.validate_python(obj)
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors())
        raise JSONRPCError(INVALID_REQUEST, f"Invalid request: {detail}") from exc
    if isinstance(message, JSONRPCRequest) and (problem := method_problem(message.method)) is not None:
        raise JSONRPCError(INVALID_REQUEST, f"Invalid request: {problem}")
    return message


def _built_request(obj: dict[str, Any]) -> JSONRPCRequest:
    """The ``JSONRPCRequest`` the envelope model would make of a plain request (:func:`is_plain_request`),
    filled in as ``model_construct`` fills it, without walking the fields again (``model_construct`` costs
    more than validating; ``tests/wire/test_shapes.py`` holds the two equal)."""
    message = object.__new__(JSONRPCRequest)
    values = {"jsonrpc": "2.0", "id": obj["id"], "method": obj["method"], "params": obj.get("params")}
    object.__setattr__(message, "__dict__", values)
    object.__setattr__(message, "__pydantic_fields_set__", set(obj))
    object.__setattr__(message, "__pydantic_extra__", None)
    object.__setattr__(message, "__pydantic_private__", None)
    return message


def refusal(obj: Any, error: JSONRPCError) -> dict[str, Any]:
    """The error response to a message refused by :func:`parse_message`: with the message's own id when it
    can be sent back (see :func:`echoable_id`), else with ``null``."""
    return error_response(echoable_id(obj.get("id")) if isinstance(obj, dict) else None, error)


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


# -- encoding what is sent ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """A response and the bytes that carry it: what is recorded is what is sent."""

    message: dict[str, Any]
    data: bytes


def unencodable_reason(exc: BaseException) -> str:
    """Why :func:`dumps` failed, in words for an error message (never quoting the offending text)."""
    if isinstance(exc, UnicodeEncodeError):
        return "a string holds a lone UTF-16 surrogate"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    return scrub(str(exc)) or type(exc).__name__


def scrub(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate replaced by U+FFFD (the replacement character)."""
    if encodable(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def encode_reply(response: dict[str, Any]) -> Reply:
    """``response`` encoded for the wire; never raises.

    A response JSON cannot carry is replaced, for the same id: an error keeps its code with its message
    scrubbed (:func:`scrub`) and its ``data`` dropped; a result becomes -32603 (Internal error) saying why.
    """
    try:
        return Reply(response, dumps(response))
    except UNENCODABLE as exc:
        reason = unencodable_reason(exc)
    request_id = response.get("id")
    error = response.get("error")
    candidates: list[dict[str, Any]] = []
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        candidates.append(
            error_response(request_id, JSONRPCError(error["code"], scrub(str(error.get("message")))))
        )
    internal = JSONRPCError(
        INTERNAL_ERROR, f"Internal error: the response could not be sent as JSON ({reason})"
    )
    candidates += [error_response(request_id, internal), error_response(None, internal)]
    for candidate in candidates:
        try:
            return Reply(candidate, dumps(candidate))
        except UNENCODABLE:
            continue
    raise AssertionError(
        "unreachable: the last candidate holds no id and no lone surrogate"
    )  # pragma: no cover


def encode_message(message: dict[str, Any]) -> bytes:
    """A notification or a server-to-client request encoded for the wire; raises -32603 when JSON cannot
    carry it (the handler that sends it learns why; nothing half-written goes out)."""
    try:
        return dumps(message)
    except UNENCODABLE as exc:
        what = message.get("method", "a message")
        raise JSONRPCError(
            INTERNAL_ERROR, f"{what} could not be sent as JSON ({unencodable_reason(exc)})"
        ) from None
