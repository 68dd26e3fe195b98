"""Settlement: what it is for a request to end, exactly once, whatever ends it.

A request held by a worker is a :class:`PendingRequest` until it is settled: answered, cancelled, closed
(its session or the server went away), timed out, aborted by an operator or refused by a rate limit, each a
ledger state. Its reply
is encoded once, by the settlement, and what is delivered is what the ledger keeps (:func:`outcome_of`).
The settlement itself, a compare-and-set on the entry's state that only one caller wins, is the process's
request table's (:class:`~mcp_server.runtime.requests.RequestTable`, the per-process state, handed to
protocol code as :class:`~mcp_server.protocol.interfaces.PendingRequests`). Other workers reach the holder
with the typed messages of :mod:`~mcp_server.wire.messages`; the ledger records each settlement behind the
request path (:class:`~mcp_server.runtime.writer.LedgerWriter`, a :class:`RecordSink`) and decides by its
own compare-and-set only for requests no live worker holds (a dead worker's orphans).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.moved import moved_names
from ..core.records import LedgerRecord, storable_outcome
from ..core.rounds import round_token
from ..core.states import State
from ..telemetry import RequestSpan
from ..wire.errors import CONNECTION_CLOSED, REQUEST_ABORTED, JSONRPCError
from ..wire.jsonrpc import Reply, RequestId, error_response

__all__ = [
    "ABORTED",
    "ABORT_MESSAGE",
    "ANSWERED",
    "CANCELLED",
    "CLOSED",
    "PENDING",
    "RATE_LIMITED",
    "TIMED_OUT",
    "Deliver",
    "PendingRequest",
    "RecordSink",
    "aborted_response",
    "closed_response",
    "name_of",
    "outcome_of",
]

PENDING = State.PENDING.value
ANSWERED = State.ANSWERED.value
CANCELLED = State.CANCELLED.value
CLOSED = State.CLOSED.value
TIMED_OUT = State.TIMED_OUT.value
ABORTED = State.ABORTED.value
RATE_LIMITED = State.RATE_LIMITED.value

Deliver = Callable[["PendingRequest", dict[str, Any] | None], Awaitable[None]]
"""Called once per request by the settlement that wins: the response, or ``None`` (cancelled)."""


class RecordSink(Protocol):
    """Where settlements are recorded (the ledger writer)."""

    async def opened(self, record: LedgerRecord) -> None:
        """A request arrived (may raise ``DuplicateRequest`` when writing through)."""

    async def settled(self, record: LedgerRecord) -> None:
        """A request was settled."""

    async def adopt(self, record: LedgerRecord, using: str) -> bool:
        """Whether a transaction on ``using`` can store ``record`` as answered (then it must)."""

    def answer_within(self, record: LedgerRecord, using: str) -> bool:
        """In that transaction: store ``record`` as answered; ``False`` if it was settled meanwhile."""


def closed_response(request_id: RequestId, reason: str) -> dict[str, Any]:
    """The -32000 answer for a request whose session or server went away."""
    return error_response(request_id, JSONRPCError(CONNECTION_CLOSED, f"Connection closed: {reason}"))


ABORT_MESSAGE = "Request aborted by an operator"
"""The message of the error an aborted request is answered with."""


def aborted_response(request_id: RequestId) -> dict[str, Any]:
    """The -32003 answer of a request an operator aborted."""
    return error_response(request_id, JSONRPCError(REQUEST_ABORTED, ABORT_MESSAGE))


def name_of(method: str, params: dict[str, Any]) -> str:
    """The tool, prompt or resource a request names, for the ledger and the admin."""
    if method in ("tools/call", "prompts/get"):
        return str(params.get("name", ""))
    if method.startswith("resources/"):
        return str(params.get("uri", ""))
    if method.startswith("tasks/"):
        return str(params.get("taskId", ""))
    return ""


def outcome_of(response: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the ledger keeps of a response: the error (its message as every backend can store it), or that
    there was a result (an ``input_required`` round: marked so, with the token its retries link to)."""
    if response is None:
        return None
    if "error" in response:
        return storable_outcome({"error": response["error"]})
    result = response.get("result")
    if isinstance(result, dict) and result.get("resultType") == "input_required":
        return {
            "result": True,
            "resultType": "input_required",
            "round": round_token(result.get("requestState")),
        }
    if isinstance(result, dict) and result.get("resultType") == "task":  # the tasks extension
        return {"result": True, "resultType": "task", "task": str(result.get("taskId", ""))[:64]}
    return {"result": True}


@dataclass(eq=False)
class PendingRequest:
    """A request held by this process, from arrival until it is settled."""

    record: LedgerRecord
    request_id: RequestId
    deliver: Deliver
    task: asyncio.Task[Any] | None = None
    state: str = PENDING
    reply: Reply | None = None
    """Once settled with a response: the response as sent, and its bytes (transports send these)."""
    claimed: bool = False
    """Its handler claimed its answer (``Context.claim_answer``): only the request's own task settles it."""
    span: RequestSpan | None = None
    """Its telemetry (``None`` when telemetry is off): started on arrival, ended by the settlement."""

    @property
    def session_id(self) -> str | None:
        return self.record.session_id

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def key(self) -> tuple[str | None, str]:
        """``(session id, stored request id)``: unique among the pending requests of a session."""
        return self.record.session_id, self.record.request_key


# The request table is the process's state: it moved to the runtime (the name still imports, with a warning).
__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ["RequestTable", "EARLY_CANCEL_WINDOW", "EARLY_CANCEL_LIMIT"], "mcp_server.runtime.requests"
    ),
)
