"""Which era a stdio connection speaks: fixed by its first request (2026-07-28 when that request carries the
``_meta`` envelope, the handshake era when it is ``initialize``), as the official SDK does.

On a 2026 connection every request is validated on its own (no header layer on stdio: envelope -32602,
version -32022, method -32601) and served without a session; ``initialize`` is refused with -32022 naming
the revisions served. On a handshake-era connection an enveloped request is refused with -32600.
"""

from __future__ import annotations

from typing import Any

from ..core.context import SessionState
from ..protocol.v2026_07_28 import sessionless_state
from ..registry.server import MCPServer
from ..wire.errors import INVALID_REQUEST, JSONRPCError
from ..wire.jsonrpc import JSONRPCNotification, JSONRPCRequest, RequestId
from ..wire.v2026_07_28 import has_envelope, unsupported_version

__all__ = ["EraLock"]


class EraLock:
    """The era of one stdio connection, and the ``SessionState`` of each of its 2026 requests."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.sessionless = False

    def session_for(self, message: JSONRPCRequest, *, initialized: bool) -> SessionState | None:
        """The request's 2026 ``SessionState``, or ``None`` for the handshake era (``initialized``: the
        connection opened with ``initialize``). Raises ``JSONRPCError`` for a request of the other era or
        one the 2026 ladder refuses."""
        params = message.params or {}
        if message.method == "initialize":
            if self.sessionless:
                raise unsupported_version(str(params.get("protocolVersion", "")))
            return None
        if initialized:
            if has_envelope(params):
                raise JSONRPCError(
                    INVALID_REQUEST,
                    "Invalid request: this connection opened with initialize (no _meta envelope)",
                )
            return None
        if not self.sessionless and not has_envelope(params):
            return None
        self.sessionless = True
        return sessionless_state(self.server, message.method, params)

    def cancelled(self, message: Any) -> RequestId | None:
        """The id a 2026 ``notifications/cancelled`` names (``None`` for anything else)."""
        if not self.sessionless or not isinstance(message, JSONRPCNotification):
            return None
        if message.method != "notifications/cancelled" or not isinstance(message.params, dict):
            return None
        request_id = message.params.get("requestId")
        return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
