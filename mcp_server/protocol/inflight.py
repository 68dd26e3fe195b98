"""Requests being served by this process, and the compare-and-set that settles each exactly once.

Every way a request can end (its answer, the client's cancel, the session's end, shutdown) calls
:meth:`InFlightTable.settle`. Only the first call for an entry acts: it records the final state and hands
the response (or ``None`` for "no reply", after a cancel) to the entry's delivery callback. Later calls are
no-ops, so no request is ever answered twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import CONNECTION_CLOSED, INVALID_REQUEST, JSONRPCError
from .jsonrpc import RequestId, error_response

__all__ = ["InFlight", "InFlightTable", "inflight"]

Deliver = Callable[["InFlight", dict[str, Any] | None], Awaitable[None]]

PENDING = "pending"
ANSWERED = "answered"
CANCELLED = "cancelled"
CLOSED = "closed"


@dataclass(eq=False)
class InFlight:
    """One request from arrival until it is settled."""

    session_id: str | None
    request_id: RequestId
    method: str
    deliver: Deliver
    task: asyncio.Task[Any] | None = None
    state: str = PENDING
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str | None, str]:
        """``(session id, request id)``; the request id keeps its JSON type (``1`` and ``"1"`` differ)."""
        return self.session_id, repr(self.request_id)


class InFlightTable:
    """The process-wide table of pending requests."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str | None, str], InFlight] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def open(self, session_id: str | None, request_id: RequestId, method: str, deliver: Deliver) -> InFlight:
        """Record an arriving request; a duplicate of a pending id in the same session is -32600."""
        entry = InFlight(session_id, request_id, method, deliver)
        if session_id is not None and entry.key in self._entries:
            raise JSONRPCError(
                INVALID_REQUEST, f"Request id {request_id!r} is already in flight in this session"
            )
        if session_id is not None:
            self._entries[entry.key] = entry
        return entry

    def get(self, session_id: str | None, request_id: RequestId) -> InFlight | None:
        """The pending entry for that id, if any."""
        return self._entries.get((session_id, repr(request_id)))

    def pending(self, session_id: str | None = None) -> list[InFlight]:
        """Pending entries, of one session or all."""
        return [e for e in self._entries.values() if session_id is None or e.session_id == session_id]

    async def settle(self, entry: InFlight, state: str, response: dict[str, Any] | None) -> bool:
        """Move ``entry`` from pending to ``state`` and deliver ``response``; ``False`` if already settled."""
        if entry.state != PENDING:
            return False
        entry.state = state
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        current = asyncio.current_task()
        if state != ANSWERED and entry.task is not None and entry.task is not current:
            entry.task.cancel()
        await entry.deliver(entry, response)
        return True

    async def cancel(self, session_id: str | None, request_id: RequestId) -> bool:
        """The client cancelled: stop the handler and send nothing for that id."""
        entry = self.get(session_id, request_id)
        if entry is None or entry.method == "initialize":
            return False
        return await self.settle(entry, CANCELLED, None)

    async def close_session(self, session_id: str, reason: str) -> int:
        """Answer every pending request of the session with -32000; returns how many were closed."""
        closed = 0
        for entry in self.pending(session_id):
            error = JSONRPCError(CONNECTION_CLOSED, f"Connection closed: {reason}")
            closed += await self.settle(entry, CLOSED, error_response(entry.request_id, error))
        return closed


inflight = InFlightTable()
"""This process's table."""
