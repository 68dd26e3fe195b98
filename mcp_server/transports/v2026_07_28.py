"""The 2026-07-28 side of the endpoint: which POSTs belong to it, and reading one into a request.

A POST is of this revision when its ``MCP-Protocol-Version`` header is present and not a handshake revision,
or when its body's ``params._meta`` carries ``io.modelcontextprotocol/protocolVersion``. It is served without
a session: no ``Mcp-Session-Id`` is read or minted. GET and DELETE have no meaning at this revision (405).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..protocol.v2026_07_28 import record_refusal, sessionless_state
from ..registry.server import MCPServer
from ..runtime import Runtime
from ..wire.errors import JSONRPCError
from ..wire.jsonrpc import JSONRPCRequest, decode_body, echoable_id, parse_message
from ..wire.v2026_07_28 import PROTOCOL_VERSION_KEY, has_envelope, http_status, is_sessionless_header
from .post import read_json_body
from .rules import Headers, HTTPProblem

__all__ = ["ALLOW_POST", "SessionlessPost", "header_lists", "is_sessionless_post", "sessionless_not_allowed"]

ALLOW_POST = [(b"allow", b"POST")]
_MARKER = PROTOCOL_VERSION_KEY.encode()


def header_lists(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """The ``Mcp-*`` headers (the routing and ``Mcp-Param-*`` headers the ladder reads, and no other) as
    lower-case names to every value sent (a repeated routing header is refused)."""
    out: dict[str, list[str]] = {}
    for name, value in raw:
        if name[:4].lower() == b"mcp-":
            out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


def is_sessionless_post(headers: Headers, body: bytes) -> bool:
    """Whether a POST belongs to the 2026 era (the body is only parsed when it names the envelope key)."""
    if is_sessionless_header(headers.get("mcp-protocol-version")):
        return True
    if body.find(_MARKER) == -1:  # (find, not in: see wire.jsonrpc.dumps)
        return False
    try:
        payload = decode_body(body)
    except JSONRPCError:
        return False
    return isinstance(payload, dict) and has_envelope(payload.get("params"))


def sessionless_not_allowed(headers: Headers, method: str) -> bool:
    """Whether a GET or DELETE carries a 2026 header and no session id: it has no meaning (405)."""
    return "mcp-session-id" not in headers and is_sessionless_header(headers.get("mcp-protocol-version"))


class SessionlessPost:
    """One 2026 POST read up to the request the exchange serves (or the refusal it is answered with)."""

    def __init__(self, server: MCPServer, raw_headers: Iterable[tuple[bytes, bytes]]) -> None:
        self.server = server
        self.raw_headers = list(raw_headers)

    async def read(
        self, headers: Headers, body: bytes, runtime: Runtime, user: Any, auth: Any = None
    ) -> tuple[JSONRPCRequest | None, Any]:
        """``(request, session)`` for a request, ``(None, None)`` for a notification (202).

        Raises ``HTTPProblem`` (4xx, with the id when it could be read) for anything the ladder refuses."""
        payload = read_json_body(headers, body)
        if not isinstance(payload, dict):
            raise HTTPProblem(400, "Invalid Request: one JSON-RPC request or notification per POST")
        request_id = echoable_id(payload.get("id"))
        try:
            message = parse_message(payload)
        except JSONRPCError as exc:
            raise HTTPProblem(400, exc.message, code=exc.code, request_id=request_id) from exc
        if "id" not in payload:  # a notification: nothing to answer at this revision
            return None, None
        if not isinstance(message, JSONRPCRequest):
            raise HTTPProblem(400, "Invalid Request: only requests and notifications may be posted")
        try:
            session = sessionless_state(
                self.server,
                message.method,
                message.params or {},
                header_lists(self.raw_headers),
                size=len(body),
            )
        except JSONRPCError as exc:
            await record_refusal(runtime, message, exc, user=user, auth=auth)
            raise HTTPProblem(
                http_status(exc.code), exc.message, code=exc.code, request_id=message.id, data=exc.data
            ) from exc
        return message, session
