"""The 2026-07-28 (sessionless) revision's wire facts: its request envelope, its methods, the methods whose
results carry caching hints, era detection and the pure checks of its validation ladder. The revision's
version strings are in :mod:`~mcp_server.wire.versions`.

Nothing here does I/O: each check reads the request (its ``params``, and on HTTP its headers) and either
returns or raises :class:`~mcp_server.wire.errors.JSONRPCError` with the code the revision assigns
(-32602 envelope, -32020 headers, -32022 version, -32601 method). :func:`http_status` maps a code to the
HTTP status a 2026 response carries.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from mcp_types.methods import CLIENT_REQUESTS

from .errors import INSUFFICIENT_SCOPE, INVALID_PARAMS, METHOD_NOT_FOUND, TOO_MANY_TASKS, JSONRPCError
from .versions import SESSIONLESS_VERSIONS, SUPPORTED_VERSIONS, V2026_07_28

__all__ = [
    "BUILTIN_METHODS",
    "CACHEABLE_METHODS",
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "HEADER_MISMATCH",
    "LOG_LEVEL_KEY",
    "MISSING_CAPABILITY",
    "PROTOCOL_VERSION_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "TASKS_EXTENSION",
    "TASK_METHODS",
    "UNSUPPORTED_VERSION",
    "V2026_07_28_METHODS",
    "MissingClientCapability",
    "check_envelope",
    "check_method",
    "check_param_headers",
    "check_routing_headers",
    "check_version",
    "decode_header_value",
    "has_envelope",
    "header_params",
    "http_status",
    "invalid_x_mcp_header",
    "is_sessionless_header",
    "unsupported_version",
]

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
"""Tags every notification of a ``subscriptions/listen`` stream with the id of the listen request."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022

TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""The methods of the tasks extension (``io.modelcontextprotocol/tasks``); ``tasks/result`` and
``tasks/list`` were removed with its first version (-32601)."""
V2026_07_28_METHODS = (
    frozenset(method for method, version in CLIENT_REQUESTS if version == V2026_07_28) | TASK_METHODS
)
"""The methods the 2026-07-28 surface defines (``server/discover``, ``tools/call``, ...), with the tasks
extension's."""
BUILTIN_METHODS = frozenset(method for method, _version in CLIENT_REQUESTS) | TASK_METHODS
"""Every request method the server answers itself, in any revision it speaks: the one list that the
registry refuses to let a site override (``@mcp.method``) and that the dispatcher's table must cover."""
CACHEABLE_METHODS: tuple[str, ...] = (
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
)
"""Methods whose ``complete`` results carry ``ttlMs`` and ``cacheScope`` (the keys ``CACHE_HINTS`` takes)."""

_NAME_FIELDS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_NAME_FIELDS |= {method: "taskId" for method in TASK_METHODS}
_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_STATUS = {
    -32700: 400,
    -32600: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    INSUFFICIENT_SCOPE: 403,
    TOO_MANY_TASKS: 429,
}
_MAX_SAFE_INT = 2**53 - 1


class MissingClientCapability(JSONRPCError):
    """-32021: the request's ``clientCapabilities`` lack what serving it needs (``required`` is a
    ClientCapabilities object, e.g. ``{"sampling": {}}``)."""

    def __init__(self, required: dict[str, Any], message: str | None = None) -> None:
        names = ", ".join(sorted(required))
        super().__init__(
            MISSING_CAPABILITY,
            message or f"Missing required client capability: {names}",
            {"requiredCapabilities": required},
        )


def is_sessionless_header(value: str | None) -> bool:
    """Whether an ``MCP-Protocol-Version`` header selects the 2026 path (present, not a handshake version)."""
    return value is not None and value.strip() not in SUPPORTED_VERSIONS


def has_envelope(params: object) -> bool:
    """Whether a request's params carry the 2026-07-28 ``_meta`` envelope (its protocol version key)."""
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def http_status(code: int) -> int:
    """The HTTP status of a 2026 error response with this JSON-RPC code (200 for the others)."""
    return _STATUS.get(code, 200)


def check_envelope(params: object) -> dict[str, Any]:
    """The request's ``_meta``; -32602 when it is missing or lacks a required key or has a bad type."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: params._meta is required at 2026-07-28")
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        raise JSONRPCError(
            INVALID_PARAMS,
            f"Invalid params: params._meta is missing the required key(s): {', '.join(missing)}",
        )
    if not isinstance(meta[PROTOCOL_VERSION_KEY], str):
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: {PROTOCOL_VERSION_KEY} must be a string")
    if not isinstance(meta[CLIENT_CAPABILITIES_KEY], dict):
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: {CLIENT_CAPABILITIES_KEY} must be an object")
    info = meta.get(CLIENT_INFO_KEY)
    if info is not None and not isinstance(info, dict):
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: {CLIENT_INFO_KEY} must be an object")
    return meta


def unsupported_version(requested: str) -> JSONRPCError:
    """-32022 naming the revisions served and echoing the one asked for."""
    return JSONRPCError(
        UNSUPPORTED_VERSION,
        f"Unsupported protocol version: {requested}",
        {"supported": list(SESSIONLESS_VERSIONS), "requested": requested},
    )


def check_version(meta: dict[str, Any]) -> str:
    """The request's revision; -32022 when this server does not serve it per request."""
    version = str(meta[PROTOCOL_VERSION_KEY])
    if version not in SESSIONLESS_VERSIONS:
        raise unsupported_version(version)
    return version


def check_method(method: str, custom: Mapping[str, Any]) -> None:
    """-32601 for a method the revision removed or never had (a raw method the server registers is kept)."""
    if method not in V2026_07_28_METHODS and method not in custom:
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {method} (protocol {V2026_07_28})")


def _mismatch(message: str) -> JSONRPCError:
    return JSONRPCError(HEADER_MISMATCH, f"Header mismatch: {message}")


def decode_header_value(value: str) -> str:
    """A header value as the client meant it: the ``=?base64?...?=`` sentinel decoded (strictly, as UTF-8;
    a malformed one is -32020), any other value as is."""
    found = _SENTINEL.match(value)
    if found is None:
        return value
    try:
        return base64.b64decode(found.group(1), validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        raise _mismatch(f"malformed Base64 header value {value!r}") from exc


def _one(headers: Mapping[str, list[str]], name: str, label: str) -> str | None:
    values = headers.get(name) or []
    if len(values) > 1:
        raise _mismatch(f"the {label} header appears more than once")
    return values[0].strip(" \t") if values else None


def check_routing_headers(headers: Mapping[str, list[str]], method: str, params: dict[str, Any]) -> None:
    """-32020 unless ``MCP-Protocol-Version``, ``Mcp-Method`` and (where the method names something)
    ``Mcp-Name`` are each present once and equal the body. ``headers`` maps lower-case names to values."""
    version = _one(headers, "mcp-protocol-version", "MCP-Protocol-Version")
    body_version = params["_meta"][PROTOCOL_VERSION_KEY]
    if version != body_version:
        raise _mismatch(f"MCP-Protocol-Version header {version!r} does not match body value {body_version!r}")
    header_method = _one(headers, "mcp-method", "Mcp-Method")
    if header_method != method:
        raise _mismatch(f"Mcp-Method header {header_method!r} does not match body value {method!r}")
    field = _NAME_FIELDS.get(method)
    if field is None:
        return
    raw_name = _one(headers, "mcp-name", "Mcp-Name")
    name = decode_header_value(raw_name) if raw_name is not None else None
    body_name = params.get(field)
    if name is None or name != body_name:
        raise _mismatch(f"Mcp-Name header {raw_name!r} does not match body value {body_name!r}")


def invalid_x_mcp_header(schema: dict[str, Any]) -> str | None:
    """Why a tool's ``inputSchema`` carries an invalid ``x-mcp-header`` annotation, or ``None``."""
    seen: set[str] = set()
    allowed = _header_paths(schema, ())
    for path, name in _annotations(schema, ()):
        if not isinstance(name, str) or not name or not _TOKEN.match(name):
            return f"x-mcp-header {name!r} at {'.'.join(path) or '<root>'} is not a header name token"
        if name.lower() in seen:
            return f"x-mcp-header {name!r} is declared twice"
        seen.add(name.lower())
        if path not in allowed:
            return (
                f"x-mcp-header {name!r} at {'.'.join(path) or '<root>'} must be on a string, integer or "
                "boolean property reached through 'properties' only"
            )
    return None


def _annotations(node: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    """Every ``x-mcp-header`` in the schema, wherever it is, with its path of keys."""
    found: list[tuple[tuple[str, ...], Any]] = []
    if isinstance(node, dict):
        if "x-mcp-header" in node:
            found.append((path, node["x-mcp-header"]))
        for key, value in node.items():
            found += _annotations(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _annotations(value, (*path, str(index)))
    return found


def _header_paths(schema: dict[str, Any], path: tuple[str, ...]) -> dict[tuple[str, ...], str]:
    """Schema-key paths of the properties an annotation may sit on (through ``properties`` chains)."""
    out: dict[tuple[str, ...], str] = {}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return out
    for name, sub in properties.items():
        if not isinstance(sub, dict):
            continue
        here = (*path, "properties", name)
        if sub.get("type") in ("string", "integer", "boolean"):
            out[here] = name
        out |= _header_paths(sub, here)
    return out


def header_params(schema: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """``{lower-case header name: argument path}`` of a (valid) schema's ``x-mcp-header`` annotations."""
    out: dict[str, tuple[str, ...]] = {}
    for path, name in _annotations(schema, ()):
        out[f"mcp-param-{str(name).lower()}"] = tuple(path[1::2])
    return out


def _as_header(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_param_headers(
    schema: dict[str, Any],
    arguments: object,
    headers: Mapping[str, list[str]],
    params: Mapping[str, tuple[str, ...]] | None = None,
) -> None:
    """-32020 unless every ``Mcp-Param-*`` header an annotated argument calls for is present and equal
    (after Base64 decoding) to it, and none is sent for an argument the body lacks. ``params``: the
    schema's :func:`header_params`, when the caller keeps them (a tool reads its schema once)."""
    args = arguments if isinstance(arguments, dict) else {}
    for header, path in (header_params(schema) if params is None else params).items():
        value: Any = args
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        sent = _one(headers, header, header)
        if value is None and sent is None:
            continue
        if sent is None:
            raise _mismatch(f"header {header} is required: the argument {'.'.join(path)} is in the body")
        if value is None:
            raise _mismatch(f"header {header} is sent but the argument {'.'.join(path)} is not in the body")
        if decode_header_value(sent) != _as_header(value) and not _same_number(sent, value):
            raise _mismatch(f"{header} header value {sent!r} does not match body value {value!r}")


def _same_number(sent: str, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return abs(value) <= _MAX_SAFE_INT and float(sent) == float(value)
    except ValueError:
        return False
