"""Operator actions: abort requests and end sessions, through the one settle path.

An abort settles the request as ``aborted`` with :data:`~mcp_server.protocol.errors.REQUEST_ABORTED`
(-32003, "Request aborted by an operator") by way of :meth:`InFlightTable.settle_record`, which routes the
reply to whichever worker holds the request. The ledger's compare-and-set makes it the request's only reply:
a request that was answered, cancelled or closed first is left alone, and its handler's late result is
dropped. Ending a session answers its in-flight requests ``-32000`` and makes later requests 404.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync

from ..ledger import LedgerRecord, State, get_ledger
from ..protocol.errors import REQUEST_ABORTED, JSONRPCError
from ..protocol.inflight import inflight
from ..protocol.jsonrpc import RequestId, error_response
from ..sessions import aend_session

__all__ = [
    "ABORT_MESSAGE",
    "END_REASON",
    "aabort_requests",
    "abort_requests",
    "aborted_response",
    "aend_sessions",
    "end_sessions",
]

ABORT_MESSAGE = "Request aborted by an operator"
"""The message of the error an aborted request is answered with."""

END_REASON = "session ended by an operator"
"""The ``<why>`` of ``Connection closed: <why>`` for requests of a session an operator ended."""


def aborted_response(request_id: RequestId) -> dict[str, Any]:
    """The -32003 answer of a request an operator aborted."""
    return error_response(request_id, JSONRPCError(REQUEST_ABORTED, ABORT_MESSAGE))


async def aabort_requests(pks: Iterable[Any]) -> list[LedgerRecord]:
    """Abort the pending requests with these ledger keys; returns those this call settled."""
    ledger = get_ledger()
    aborted: list[LedgerRecord] = []
    for pk in pks:
        record = await ledger.aget(LedgerRecord(session_id=None, request_key="", method="", pk=pk))
        if record is None or record.state != State.PENDING:
            continue
        if await inflight.settle_record(record, State.ABORTED.value, aborted_response(record.request_id)):
            aborted.append(record)
    return aborted


async def aend_sessions(session_ids: Iterable[str], reason: str = END_REASON) -> list[str]:
    """End these sessions; returns the ids of those that were still active."""
    return [session_id for session_id in session_ids if await aend_session(session_id, reason)]


def abort_requests(pks: Iterable[Any]) -> list[LedgerRecord]:
    """Sync twin of :func:`aabort_requests` (admin views)."""
    return async_to_sync(aabort_requests)(list(pks))


def end_sessions(session_ids: Iterable[str], reason: str = END_REASON) -> list[str]:
    """Sync twin of :func:`aend_sessions` (admin views)."""
    return async_to_sync(aend_sessions)(list(session_ids), reason)
