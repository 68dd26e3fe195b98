"""Serving a 2026-07-28 (per-request ``_meta``) request: its validation ladder, its stateless
``SessionState``, ``server/discover`` and the shape of its results (``resultType``, caching hints,
``serverInfo``).

The transports decide the era and hand the request here; what is left is shared with the handshake era
(the reply guarantee, the dispatcher, the ledger).
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from mcp_types.methods import serialize_server_result

from ..auth.base import oauth_client_of
from ..conf import DEFAULTS, mcp_settings
from ..core.context import LOG_LEVELS, Context, SessionState
from ..registry.server import server_of
from ..sessions import refuse_large_metadata
from ..wire.errors import INVALID_PARAMS, JSONRPCError
from ..wire.jsonrpc import JSONRPCRequest, error_response
from ..wire.shapes import shaped_result
from ..wire.v2026_07_28 import (
    CACHEABLE_METHODS,
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    check_envelope,
    check_method,
    check_param_headers,
    check_routing_headers,
    check_version,
)
from ..wire.versions import SESSIONLESS_VERSIONS
from .interfaces import RequestHost
from .lifecycle import server_info, sessionless_capabilities
from .settlement import ANSWERED, PendingRequest, name_of

if TYPE_CHECKING:
    from ..registry.server import MCPServer

__all__ = [
    "check_metadata_size",
    "discover_result",
    "finish_result",
    "record_refusal",
    "sessionless_state",
]

logger = logging.getLogger("mcp_server.requests")


def sessionless_state(
    server: MCPServer,
    method: str,
    params: dict[str, Any],
    headers: Mapping[str, list[str]] | None = None,
    *,
    size: int | None = None,
) -> SessionState:
    """Run the ladder from the envelope on (HTTP headers when ``headers`` is given) and return the
    request's ``SessionState``; raises ``JSONRPCError`` with the rung's code. ``size``: the bytes of the
    message, when known (a small one is not measured: see :func:`check_metadata_size`)."""
    meta = check_envelope(params)
    check_metadata_size(meta, size)
    if headers is not None:
        check_routing_headers(headers, method, params)
    version = check_version(meta)
    check_method(method, server.methods)
    if headers is not None and method == "tools/call":
        tool = server.tools.get(str(params.get("name")))
        if tool is not None:  # an unknown tool is answered -32602 by the dispatch
            check_param_headers(tool.header_schema, params.get("arguments"), headers, tool.header_params)
    level = meta.get(LOG_LEVEL_KEY)
    if level is not None and level not in LOG_LEVELS:
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
    info = meta.get(CLIENT_INFO_KEY)
    return SessionState(
        id=None,
        protocol_version=version,
        client_capabilities=dict(meta[CLIENT_CAPABILITIES_KEY]),
        client_info=dict(info) if isinstance(info, dict) else {},
        log_level=level,
    )


_GROWTH = 5
"""How much larger than its text a parsed JSON value can measure as compact JSON (``1e15``, 4 bytes, comes
back as ``1000000000000000.0``, 18): a message of at most ``limit / _GROWTH`` bytes cannot hold metadata
over the limit."""


def check_metadata_size(meta: dict[str, Any], size: int | None = None) -> None:
    """-32602 when the request's ``clientInfo`` and ``clientCapabilities`` together take more than
    ``MAX_CLIENT_METADATA_BYTES`` as JSON, as at ``initialize``. A message of ``size`` bytes too small to
    hold that much is not measured (the hot path: most requests are)."""
    limit = int(mcp_settings.MAX_CLIENT_METADATA_BYTES)
    if size is not None and size * _GROWTH <= limit:
        return
    refuse_large_metadata(
        meta.get(CLIENT_INFO_KEY),
        meta.get(CLIENT_CAPABILITIES_KEY),
        what="",
        names=f"{CLIENT_INFO_KEY} and {CLIENT_CAPABILITIES_KEY}",
        verb="takes",
    )


def discover_result(server: MCPServer) -> dict[str, Any]:
    """The body of a ``server/discover`` result (hints and ``serverInfo`` are added by
    :func:`finish_result`)."""
    capabilities = sessionless_capabilities(server)
    result: dict[str, Any] = {"supportedVersions": list(SESSIONLESS_VERSIONS), "capabilities": capabilities}
    instructions = server.instructions or mcp_settings.INSTRUCTIONS
    if instructions:
        result["instructions"] = instructions
    return result


def _hints(ctx: Context) -> dict[str, Any]:
    configured = mcp_settings.CACHE_HINTS.get(ctx.method) or DEFAULTS["CACHE_HINTS"].get(ctx.method) or {}
    ttl, scope = configured.get("ttl_ms", 0), configured.get("cache_scope", "private")
    if ctx.method == "resources/read":
        found = server_of(ctx).find_resource(str(ctx.params.get("uri")))
        resource = found[0] if found is not None else None
        if resource is not None and resource.ttl_ms is not None:
            ttl = resource.ttl_ms
        if resource is not None and resource.cache_scope is not None:
            scope = resource.cache_scope
        if "inputResponses" in ctx.params or "requestState" in ctx.params:  # a retry: never to be cached
            ttl, scope = 0, "private"
    return {"ttlMs": ttl, "cacheScope": scope}


_ADDED = frozenset({"resultType", "_meta"})
"""The keys :func:`finish_result` adds to a result."""


InfoKey = tuple[tuple[str, str], ...] | str
"""What tells one ``serverInfo`` from another (:func:`_info_key`)."""


def _info_key(info: dict[str, Any]) -> InfoKey:
    """What tells one ``serverInfo`` from another: its items when every value is text (name, version,
    title: the usual case), else its ``repr``, which reads back to the same value (``server_info`` builds
    it in one order)."""
    items = tuple(info.items())
    for _key, value in items:
        if type(value) is not str:
            return repr(info)
    return items


@lru_cache(maxsize=16)
def _server_info_passes(version: str, info: InfoKey) -> bool:
    """Whether a result carrying this ``serverInfo`` (its :func:`_info_key`) comes out of the revision's
    schema unchanged (checked once per server info and revision; a result that is more than text blocks is
    always shaped by the schema)."""
    try:
        value = ast.literal_eval(info) if isinstance(info, str) else dict(info)
        shaped = {"content": [], "resultType": "complete", "_meta": {SERVER_INFO_KEY: value}}
        return serialize_server_result("tools/call", version, shaped) == shaped
    except (KeyError, ValueError, SyntaxError):
        return False


def finish_result(ctx: Context, result: dict[str, Any]) -> dict[str, Any]:
    """A handler's result as the 2026 wire carries it: ``resultType`` (``complete`` unless the handler set
    one), caching hints on cacheable methods, ``serverInfo`` in ``_meta``; a ``complete`` result of a core
    method is shaped by the 2026 schema, any other (``input_required``, ``task``) is left as it is."""
    version = ctx.session.protocol_version
    info = server_info(server_of(ctx))
    out = dict(result)
    out.setdefault("resultType", "complete")
    meta = dict(out.get("_meta") or {})
    meta.setdefault(SERVER_INFO_KEY, info)
    out["_meta"] = meta
    if out["resultType"] != "complete":
        return out
    if ctx.method in CACHEABLE_METHODS:
        out = {**_hints(ctx), **out}
    # What this function added is in the revision's shape when the handler set no ``_meta`` of its own.
    ours = meta.keys() == {SERVER_INFO_KEY} and meta[SERVER_INFO_KEY] is info
    vouched = _ADDED if ours and _server_info_passes(version, _info_key(info)) else frozenset()
    return shaped_result(ctx.method, version, out, vouched)


async def _not_sent(entry: PendingRequest, response: dict[str, Any] | None) -> None:
    """A refusal is answered by the transport; the ledger only records it."""


async def record_refusal(
    runtime: RequestHost, message: JSONRPCRequest, error: JSONRPCError, *, user: Any, auth: Any = None
) -> None:
    """Record a 2026 request the ladder refused, settled with its error (as a handshake-era request the
    dispatch refuses is). A ledger that cannot take it is logged: the refusal is answered all the same."""
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    try:
        entry = await runtime.requests.open(
            None,
            message.id,
            message.method,
            _not_sent,
            name=name_of(message.method, params),
            user_id=getattr(user, "pk", None),
            lease=float(mcp_settings.LEASE_TIMEOUT),
            protocol_version=version if isinstance(version, str) else "",
            oauth_client=oauth_client_of(auth),
            params=params,
        )
        await runtime.requests.settle(entry, ANSWERED, error_response(message.id, error))
    except Exception:
        logger.exception("could not record the refusal of %r (%s)", message.id, message.method)
