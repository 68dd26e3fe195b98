"""Serving requests whatever the transport: ``initialize`` (opens a session) and any other request under the
reply guarantee, settled through the runtime's request table. The HTTP exchange and the stdio loop both go
through here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from mcp_types.methods import serialize_server_result, validate_client_request
from pydantic import ValidationError

from ..auth.base import oauth_client_of
from ..conf import mcp_settings
from ..core.asgi_request import meta_view
from ..core.context import Context, SessionState, client_label
from ..core.stores import StoreUnavailable, bounded
from ..telemetry import bind_request
from ..wire.errors import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_PARAMS, JSONRPCError, RateLimited
from ..wire.jsonrpc import JSONRPCRequest, error_response, result_response
from ..wire.versions import negotiate
from .claims import RequestClaim
from .guarantee import answer, deadline_for, name_of
from .interfaces import RequestHost
from .lifecycle import initialize_result
from .limit_refusal import refusal_response
from .peer import RequestPeer
from .rate_limit import rate_refusal
from .rounds import previous_round
from .settlement import ANSWERED, CLOSED, RATE_LIMITED, Deliver, PendingRequest
from .step_up import scope_refusal

if TYPE_CHECKING:
    from ..models import Session
    from ..registry.server import MCPServer

__all__ = ["answer_initialize", "serve_request", "start_request"]

logger = logging.getLogger("mcp_server.requests")


async def _sent_inline(entry: PendingRequest, response: dict[str, Any] | None) -> None:
    """``initialize`` is answered by its caller; the ledger only records it."""


async def answer_initialize(
    runtime: RequestHost,
    server: MCPServer,
    message: JSONRPCRequest,
    *,
    user: Any,
    transport: str = "http",
    stateless: bool = False,
    client_address: str = "",
    auth: Any = None,
) -> tuple[dict[str, Any], Session | None]:
    """Negotiate the revision, store the session (unless ``stateless``) and record ``initialize``.

    Returns the response and the new session (``None`` when stateless or when it could not be stored; a
    ``clientInfo`` and ``capabilities`` too large to store are answered -32602).
    """
    from ..sessions import acreate_session

    params = message.params or {}
    version = negotiate(params.get("protocolVersion"))
    session: Session | None = None
    entry = None
    try:
        validate_client_request("initialize", version, params)
        if not stateless:
            creating = acreate_session(
                server=server.key,
                protocol_version=version,
                params=params,
                user=user,
                transport=transport,
                client_address=client_address,
            )
            session = await bounded(creating, "database")
            runtime.sessions.remember(session)
        entry = await runtime.requests.open(
            session.id if session is not None else None,
            message.id,
            "initialize",
            _sent_inline,
            user_id=getattr(user, "pk", None),
            lease=float(mcp_settings.LEASE_TIMEOUT),
            protocol_version=version,
            client=client_label(params.get("clientInfo")),
            oauth_client=oauth_client_of(auth),
            params=params,
            transport=transport,
        )
        body = initialize_result(server, params)
        result = serialize_server_result("initialize", version, body)
        if "extensions" in body["capabilities"]:  # SEP-2133: in every revision (older schemas drop the key)
            result["capabilities"]["extensions"] = body["capabilities"]["extensions"]
        response = result_response(message.id, result)
    except ValidationError as exc:
        error = JSONRPCError(INVALID_PARAMS, f"Invalid params for initialize: {exc.errors()[0]['msg']}")
        response = error_response(message.id, error)
    except StoreUnavailable as exc:  # I11: answered with the error, without a session to use
        logger.warning("initialize failed: %s", exc.message)
        response, session = error_response(message.id, exc), None
    except JSONRPCError as exc:  # e.g. client metadata over MAX_CLIENT_METADATA_BYTES
        response = error_response(message.id, exc)
    except Exception:
        logger.exception("initialize failed")
        response = error_response(
            message.id, JSONRPCError(INTERNAL_ERROR, "Internal error during initialize")
        )
    if entry is not None:
        await runtime.requests.settle(entry, ANSWERED, response)
        if entry.reply is not None:  # what was recorded, and is sent: one JSON cannot carry was replaced
            response = entry.reply.message
    return response, session


async def start_request(
    runtime: RequestHost,
    message: JSONRPCRequest,
    *,
    server: MCPServer,
    session: SessionState,
    peer: RequestPeer,
    deliver: Deliver,
    user: Any = None,
    request: Any = None,
    transport: str = "http",
) -> PendingRequest:
    """Take a request into the runtime's table and serve it in its own task; its answer goes to ``deliver``.

    Raises ``JSONRPCError`` (-32600) when the id is already in flight in the session. A call the token's
    scopes do not reach (:mod:`~mcp_server.protocol.step_up`) is settled at once with -32005, never run; one
    over a rate limit or a quota (:mod:`~mcp_server.protocol.rate_limit`) likewise, settled ``rate_limited``
    with the refusal ``RATE_LIMIT_REFUSAL`` shapes (:mod:`~mcp_server.protocol.limit_refusal`).
    """
    ctx = Context(
        server=server,
        session=session,
        request_id=message.id,
        method=message.method,
        params=message.params or {},
        peer=peer,
        request=request,
        user=user,
        runtime=runtime,
    )
    seconds = deadline_for(ctx)
    entry = await runtime.requests.open(
        session.id,
        message.id,
        message.method,
        deliver,
        name=name_of(message.method, ctx.params),
        user_id=getattr(user, "pk", None),
        seconds=seconds,
        lease=float(mcp_settings.LEASE_TIMEOUT),
        protocol_version=session.protocol_version,
        round_of=previous_round(ctx),
        client=session.client_label,
        oauth_client=oauth_client_of(getattr(request, "auth", None)),
        params=ctx.params,
        transport=transport,
        headers=meta_view(request),
    )
    peer.entry = entry
    ctx.claim = RequestClaim(runtime.requests, entry, ctx)
    if entry.state != "pending":  # a cancel that overtook it has settled it already
        return entry
    refusal = await scope_refusal(ctx) or await rate_refusal(ctx)
    if isinstance(refusal, RateLimited):
        await runtime.requests.settle(entry, RATE_LIMITED, refusal_response(ctx, refusal))
    elif refusal is not None:
        await runtime.requests.settle(entry, ANSWERED, error_response(message.id, refusal))
    elif entry.state == "pending":  # (a cancel or the session's end may have settled it meanwhile)
        entry.task = asyncio.create_task(
            serve_request(runtime, entry, ctx, seconds), name=f"mcp {message.method} {message.id!r}"
        )
    return entry


async def serve_request(
    runtime: RequestHost, entry: PendingRequest, ctx: Context, seconds: float | None
) -> None:
    """Run the request under the reply guarantee and settle it (a cancelled task settles -32000)."""
    bind_request(entry)  # its log records carry its fields (this task's context only)
    if entry.span is not None:
        entry.span.activate()
    try:
        response, state = await answer(ctx, seconds)
    except asyncio.CancelledError:
        error = JSONRPCError(CONNECTION_CLOSED, "Connection closed: request task cancelled")
        await runtime.requests.settle(entry, CLOSED, error_response(entry.request_id, error))
        raise
    await runtime.requests.settle(entry, state, response)
