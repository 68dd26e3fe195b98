"""Errors a handler can raise, and the JSON-RPC error codes the server answers with."""

from __future__ import annotations

from typing import Any

from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

__all__ = [
    "CONNECTION_CLOSED",
    "INSUFFICIENT_SCOPE",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RATE_LIMITED",
    "REQUEST_ABORTED",
    "REQUEST_TIMEOUT",
    "RESOURCE_NOT_FOUND",
    "TOO_MANY_TASKS",
    "InsufficientScope",
    "JSONRPCError",
    "RateLimited",
    "RequestSettled",
    "ResourceNotFound",
    "ToolError",
]

RESOURCE_NOT_FOUND = -32002
"""Handshake-era code for ``resources/read`` of an unknown URI."""

REQUEST_ABORTED = -32003
"""An operator aborted the request in the admin ("Request aborted by an operator").

Chosen in JSON-RPC's implementation-defined server-error band (-32000 to -32099), next to the SDK
conventions -32000 (connection closed) and -32001 (request timed out) and the handshake era's -32002
(resource not found). The request's session stays open; only that request ends.
"""

TOO_MANY_TASKS = -32004
"""A ``tools/call`` that would start a task over ``MAX_TASKS_PER_OWNER`` or ``MAX_TASKS`` (tasks extension):
refused before any task is created (HTTP 429 at 2026-07-28). In the same server-error band as -32003."""


INSUFFICIENT_SCOPE = -32005
"""A call the user may make that the token's scopes do not reach: HTTP 403 with an ``insufficient_scope``
challenge where the transport can say so (one request per POST), this error everywhere (a batch member,
stdio). Its ``data`` names the scopes to ask for. In the same server-error band as -32003 and -32004."""


RATE_LIMITED = -31429
"""The default code of a request refused for a rate limit (``RATE_LIMIT_ERROR_CODE`` changes it).

Outside JSON-RPC's reserved range (-32768 to -32000): the 2026-07-28 error-code rules reserve -32020 to
-32099 for codes the specification defines (SEP-3304's proposed -32023 is not one yet), leave -32000 to
-32019 to codes implementations already used, and ask for new codes outside the reserved range."""


class JSONRPCError(Exception):
    """Raise from any handler to answer its request with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The ``error`` member of a JSON-RPC error response."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ResourceNotFound(JSONRPCError):
    """A ``resources/read`` for a URI that no resource or template serves."""

    def __init__(self, uri: str) -> None:
        super().__init__(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})


class RequestSettled(JSONRPCError):
    """The request was settled before its handler could claim its answer (cancelled, timed out, aborted by
    an operator, its session closed): raised by ``Context.claim_answer``, so that the transaction it is raised
    in rolls back. Its answer, if one is due, was given by whoever settled the request."""

    def __init__(self, state: str) -> None:
        message = f"Request already settled ({state}): its changes were rolled back"
        super().__init__(CONNECTION_CLOSED, message)
        self.state = state


class ToolError(Exception):
    """Raise inside a tool to return a result with ``isError: true`` and this message as its text."""


class InsufficientScope(JSONRPCError):
    """-32005: the token's scopes do not reach what the request names, though the user may use it.

    ``required`` are the scopes the call needs (``tool:<name>``, ``resource:<uri>``, ``prompt:<name>``);
    ``scope`` is what a client should ask for to step up: the token's granted scopes, then the required ones
    (RFC 6750 ``scope``, space-separated).
    """

    def __init__(self, required: list[str], granted: list[str], what: str) -> None:
        wanted = list(dict.fromkeys([*granted, *required]))
        self.required = required
        self.scope = " ".join(wanted)
        super().__init__(
            INSUFFICIENT_SCOPE,
            f"Insufficient scope: the token does not reach {what}; authorize {' '.join(required)}",
            {"error": "insufficient_scope", "scope": self.scope, "requiredScopes": required},
        )


class RateLimited(JSONRPCError):
    """A request over a rate limit, refused before it runs: ``data`` names the limit (``None`` when the
    counters could not be read and limits fail closed) and says in ``retryAfter`` how many seconds to wait."""

    def __init__(self, code: int, name: str | None, limit: dict[str, Any] | None, retry_after: int) -> None:
        self.retry_after = retry_after
        if name is None:
            message = f"Rate limits cannot be checked now; retry after {retry_after} seconds"
        else:
            message = f"Rate limit {name!r} exceeded; retry after {retry_after} seconds"
        super().__init__(code, message, {"limit": limit, "retryAfter": retry_after})
