"""The reply guarantee: the one place that turns a handler's outcome into a JSON-RPC response.

Whatever the middleware chain and the handler do (return a value, return nothing, raise, outlive the
deadline), :func:`answer` returns exactly one well-formed response for the request id. Cancellation by the
client or the end of the session is decided by whoever settles the request first; see ``settlement``.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

from ..conf import mcp_settings
from ..core.context import Context
from ..core.rounds import InputRequired
from ..core.states import State
from ..registry.server import server_of
from ..wire.errors import INTERNAL_ERROR, REQUEST_TIMEOUT, JSONRPCError
from ..wire.jsonrpc import error_response, result_response
from .middleware import get_chain
from .rounds import input_required_result, open_rounds
from .settlement import name_of

__all__ = ["answer", "deadline_for", "name_of"]

logger = logging.getLogger("mcp_server.requests")


def deadline_for(ctx: Context) -> float | None:
    """Seconds the request may run: the tool's own ``timeout``, else ``REQUEST_TIMEOUT`` (a
    ``subscriptions/listen`` stream has no deadline: it runs until the client or the server ends it)."""
    if ctx.method == "subscriptions/listen":
        return None
    if ctx.method == "tools/call":
        tool = server_of(ctx).tools.get(str(ctx.params.get("name")))
        if tool is not None and tool.timeout is not None:
            return tool.timeout
    timeout = mcp_settings.REQUEST_TIMEOUT
    return float(timeout) if timeout else None


def _internal_error(ctx: Context, exc: BaseException) -> JSONRPCError:
    logger.error("MCP request %r (%s) failed", ctx.request_id, ctx.method, exc_info=exc)
    data: dict[str, Any] | None = None
    if mcp_settings.ERROR_DETAIL:  # never by default: the client may be anyone (check W007)
        data = {"exception": repr(exc), "traceback": traceback.format_exception(exc)}
    return JSONRPCError(INTERNAL_ERROR, f"Internal error while handling {ctx.method}", data)


async def answer(ctx: Context, seconds: float | None = None) -> tuple[dict[str, Any], str]:
    """Exactly one response for ``ctx``'s request, and the ledger state it settles in.

    Raises only ``CancelledError`` (the request was cancelled, or its session closed, by someone else).
    At 2026-07-28 a handler that needs the client's input (``ctx.elicit`` and the like, without an answer in
    the request) is answered ``input_required``: a settled answer, like any result.
    """
    chain = get_chain(tuple(mcp_settings.MIDDLEWARE))
    scope = ctx.deadline = asyncio.timeout(seconds)
    try:
        async with scope:
            if ctx.rounds is None:
                ctx.rounds = open_rounds(ctx)
            result = await chain(ctx)
    except InputRequired as signal:
        return result_response(ctx.request_id, input_required_result(ctx, signal)), State.ANSWERED
    except TimeoutError as exc:
        if not scope.expired():
            return error_response(ctx.request_id, _internal_error(ctx, exc)), State.ANSWERED
        error = JSONRPCError(REQUEST_TIMEOUT, f"Request timed out after {seconds:g}s", {"timeout": seconds})
        return error_response(ctx.request_id, error), State.TIMED_OUT
    except JSONRPCError as exc:
        return error_response(ctx.request_id, exc), State.ANSWERED
    except Exception as exc:
        return error_response(ctx.request_id, _internal_error(ctx, exc)), State.ANSWERED
    if not isinstance(result, dict):
        shape = "no result" if result is None else type(result).__name__
        error = JSONRPCError(INTERNAL_ERROR, f"Handler for method {ctx.method!r} returned {shape}")
        return error_response(ctx.request_id, error), State.ANSWERED
    return result_response(ctx.request_id, result), State.ANSWERED
