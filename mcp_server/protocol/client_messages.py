"""What the server does with the client's notifications and its answers to server requests."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..core.context import SessionState
from ..wire.jsonrpc import IncomingMessage, JSONRPCNotification, JSONRPCRequest
from .outbound import aforward_answer

if TYPE_CHECKING:
    from ..runtime import Runtime

__all__ = ["handle_client_message"]

logger = logging.getLogger("mcp_server.requests")


async def handle_client_message(runtime: Runtime, session: SessionState, message: IncomingMessage) -> None:
    """Act on a notification or a response; never produces a reply."""
    if isinstance(message, JSONRPCRequest):  # pragma: no cover - requests are dispatched, not handled here
        raise TypeError("requests are dispatched by the exchange")
    if isinstance(message, JSONRPCNotification):
        if message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                cancelled = await runtime.cancel(session.id, request_id)
                logger.debug("cancel of %r in session %s: %s", request_id, session.id, cancelled)
        return
    if not runtime.outbound.resolve(session.id, message) and not await aforward_answer(session.id, message):
        logger.debug("answer %r in session %s matches no waiting request", message.id, session.id)
