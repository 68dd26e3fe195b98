"""What the server does with the client's notifications and its answers to server requests."""

from __future__ import annotations

import logging

from ..core.context import SessionState
from ..wire.jsonrpc import (
    IncomingMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    WireError,
    id_problem,
)
from .interfaces import AnswerHost
from .outbound import aforward_answer

__all__ = ["handle_client_message"]

logger = logging.getLogger("mcp_server.requests")


async def handle_client_message(runtime: AnswerHost, session: SessionState, message: IncomingMessage) -> None:
    """Act on a notification or a response; never produces a reply, and never raises: there is no one to
    answer, and a client's message must not cost the other messages of its body their answers."""
    if isinstance(message, JSONRPCRequest):  # pragma: no cover - requests are dispatched, not handled here
        raise TypeError("requests are dispatched by the exchange")
    try:
        await _act_on(runtime, session, message)
    except Exception:
        logger.exception("could not act on a %s in session %s", type(message).__name__, session.id)


async def _act_on(
    runtime: AnswerHost, session: SessionState, message: JSONRPCNotification | JSONRPCResponse | WireError
) -> None:
    if isinstance(message, JSONRPCNotification):
        if message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, str | int) and id_problem(request_id) is None:  # else: no such request
                cancelled = await runtime.cancel(session.id, request_id)
                logger.debug("cancel of %r in session %s: %s", request_id, session.id, cancelled)
        return
    if id_problem(message.id) is not None:  # not the id of any request this server sent
        logger.debug("answer with an id no request of this server has, in session %s", session.id)
        return
    if not runtime.outbound.resolve(session.id, message) and not await aforward_answer(session.id, message):
        logger.debug("answer %r in session %s matches no waiting request", message.id, session.id)
