"""Settlement: the one path by which every request ends, exactly once, in any worker process.

Each request is recorded in the ledger when it arrives (:meth:`InFlightTable.open`). Every way it can end
(its answer, a deadline, the client's cancel, the session's end, an operator's abort, shutdown, the death
of its worker) calls :meth:`InFlightTable.settle` or :meth:`InFlightTable.settle_record`. The ledger's
compare-and-set picks one winner; only the winner delivers: to the waiting HTTP exchange in this process,
or over the channel layer to the consumer that holds it in another process. A response for a cancelled
request is never sent; no request is answered twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from ..conf import mcp_settings
from ..ledger import WORKER_ID, DuplicateRequest, LedgerRecord, State, get_ledger, request_key
from .errors import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_ABORTED, REQUEST_TIMEOUT, JSONRPCError
from .jsonrpc import RequestId, error_response

__all__ = ["InFlight", "InFlightTable", "closed_response", "inflight", "outcome_of"]

logger = logging.getLogger("mcp_server.requests")

Deliver = Callable[["InFlight", dict[str, Any] | None], Awaitable[None]]

PENDING = State.PENDING.value
ANSWERED = State.ANSWERED.value
CANCELLED = State.CANCELLED.value
CLOSED = State.CLOSED.value
TIMED_OUT = State.TIMED_OUT.value
ABORTED = State.ABORTED.value


def closed_response(request_id: RequestId, reason: str) -> dict[str, Any]:
    """The -32000 answer for a request whose session or server went away."""
    return error_response(request_id, JSONRPCError(CONNECTION_CLOSED, f"Connection closed: {reason}"))


def outcome_of(response: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the ledger keeps of a response: the error, or that there was a result."""
    if response is None:
        return None
    if "error" in response:
        error = response["error"]
        return {"error": {"code": error.get("code"), "message": str(error.get("message", ""))[:500]}}
    return {"result": True}


UNRECORDED: dict[str, tuple[int, str]] = {
    CLOSED: (CONNECTION_CLOSED, "Connection closed: request ended by another worker"),
    TIMED_OUT: (REQUEST_TIMEOUT, "Request timed out"),
    ABORTED: (REQUEST_ABORTED, "Request aborted by an operator"),
}
"""The error of a state whose winner has not recorded its reply (the cache ledger's ``add`` landed first)."""


def response_from(request_id: RequestId, state: str, outcome: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reply another process decided for a request held here (``None``: no reply, after a cancel)."""
    if state == CANCELLED:
        return None
    if not outcome or "error" not in outcome:
        if state not in UNRECORDED:
            return None
        code, message = UNRECORDED[state]
        return error_response(request_id, JSONRPCError(code, message))
    error = outcome["error"]
    return error_response(request_id, JSONRPCError(int(error["code"]), str(error["message"])))


@dataclass(eq=False)
class InFlight:
    """A request served by this process, from arrival until it is settled."""

    record: LedgerRecord
    request_id: RequestId
    deliver: Deliver
    task: asyncio.Task[Any] | None = None
    state: str = PENDING
    local_key: tuple[str | None, str] = ("", "")

    @property
    def session_id(self) -> str | None:
        return self.record.session_id

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def key(self) -> tuple[str | None, str]:
        return self.record.session_id, self.record.request_key


class InFlightTable:
    """This process's pending requests, and the settle path shared with every other process."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str | None, str], InFlight] = {}
        self._maintenance: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def pending(self, session_id: str | None = None) -> list[InFlight]:
        """Pending entries held by this process, of one session or all."""
        return [e for e in self._entries.values() if session_id is None or e.session_id == session_id]

    async def open(
        self,
        session_id: str | None,
        request_id: RequestId,
        method: str,
        deliver: Deliver,
        *,
        name: str = "",
        user_id: int | None = None,
        channel: str = "",
        seconds: float | None = None,
    ) -> InFlight:
        """Record an arriving request; a duplicate of an id pending in the same session is -32600."""
        key = request_key(request_id)
        duplicate = JSONRPCError(
            INVALID_REQUEST, f"Request id {request_id!r} is already in flight in this session"
        )
        if session_id is not None and (session_id, key) in self._entries:
            raise duplicate
        now = timezone.now()
        record = LedgerRecord(
            session_id=session_id,
            request_key=key,
            method=method,
            name=name,
            user_id=user_id,
            worker=WORKER_ID,
            channel=channel,
            created=now,
            deadline=now + timedelta(seconds=seconds) if seconds else None,
            lease_expires=now + timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT)),
        )
        try:
            await get_ledger().aopen(record)
        except DuplicateRequest:
            raise duplicate from None
        entry = InFlight(record=record, request_id=request_id, deliver=deliver)
        entry.local_key = entry.key if session_id is not None else (None, f"{key}#{id(entry)}")
        self._entries[entry.local_key] = entry
        self._start_maintenance()
        return entry

    async def settle(self, entry: InFlight, state: str, response: dict[str, Any] | None) -> bool:
        """Settle a request this process serves; ``False`` if anyone settled it first."""
        if entry.state != PENDING:
            return False
        ledger = get_ledger()
        try:
            won = await ledger.asettle(entry.record, state, outcome_of(response))
        except Exception:  # the ledger is out of reach: the reply matters more than its record
            logger.exception("ledger unreachable; settling %r in this process only", entry.request_id)
            return await self._finish(entry, state, response)
        if not won:
            stored = await ledger.aget(entry.record)
            if stored is not None and stored.state != PENDING:
                await self._finish(
                    entry, stored.state, response_from(entry.request_id, stored.state, stored.outcome)
                )
            return False
        return await self._finish(entry, state, response)

    async def settle_record(self, record: LedgerRecord, state: str, response: dict[str, Any] | None) -> bool:
        """Settle a request that this or any other process serves, and route its reply to its exchange."""
        local = self._entries.get((record.session_id, record.request_key))
        if local is not None:
            return await self.settle(local, state, response)
        if not await get_ledger().asettle(record, state, outcome_of(response)):
            return False
        layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
        if record.channel and layer is not None:
            message = {
                "type": "mcp.settled",
                "session_id": record.session_id,
                "key": record.request_key,
                "state": state,
                "response": response,
            }
            try:
                await layer.send(record.channel, message)
            except Exception:  # the holder is gone; the ledger already says what happened
                logger.warning("could not reach %s to deliver %s", record.channel, record.request_key)
        return True

    async def finish_remote(
        self, session_id: str | None, key: str, state: str, response: dict[str, Any] | None
    ) -> None:
        """Another process won the settlement of a request held here: deliver what it decided.

        The message names the request by session and id only: if the id was settled and then reused, the
        entry held now is a newer request, still pending in the ledger, and the message is not about it.
        """
        entry = self._entries.get((session_id, key))
        if entry is None:
            return
        try:
            stored = await get_ledger().aget(entry.record)
        except Exception:  # the ledger is out of reach: the sender won, so deliver what it decided
            logger.exception("ledger unreachable; trusting the settlement of %r", entry.request_id)
        else:
            if stored is not None and stored.state == PENDING:
                return
        await self._finish(entry, state, response)

    async def _finish(self, entry: InFlight, state: str, response: dict[str, Any] | None) -> bool:
        """The local compare-and-set: the first caller delivers, later ones do nothing."""
        if entry.state != PENDING:
            return False
        entry.state = state
        if self._entries.get(entry.local_key) is entry:
            del self._entries[entry.local_key]
        if (
            state not in (ANSWERED, TIMED_OUT)
            and entry.task is not None
            and entry.task is not asyncio.current_task()
        ):
            entry.task.cancel()
        await entry.deliver(entry, response)
        return True

    async def cancel(self, session_id: str | None, request_id: RequestId) -> bool:
        """The client cancelled: stop the handler wherever it runs and send nothing for that id."""
        key = request_key(request_id)
        local = self._entries.get((session_id, key))
        if local is not None:
            return local.method != "initialize" and await self.settle(local, CANCELLED, None)
        if session_id is None:
            return False
        record = await get_ledger().aget_pending(session_id, key)
        if record is None or record.method == "initialize":
            return False
        return await self.settle_record(record, CANCELLED, None)

    async def close_session(self, session_id: str, reason: str) -> int:
        """Answer every pending request of the session, in any process, with -32000."""
        closed = 0
        for record in await get_ledger().apending(session_id):
            closed += await self.settle_record(record, CLOSED, closed_response(record.request_id, reason))
        return closed

    async def shutdown(self, reason: str = "server shutting down") -> int:
        """Answer every request this process holds with -32000 (graceful shutdown)."""
        closed = 0
        for entry in list(self._entries.values()):
            closed += await self.settle(entry, CLOSED, closed_response(entry.request_id, reason))
        return closed

    # -- leases and pruning --------------------------------------------------------------------------------

    def _start_maintenance(self) -> None:
        if self._maintenance is None or self._maintenance.done():
            self._maintenance = asyncio.get_running_loop().create_task(
                self._maintain(), name="mcp ledger upkeep"
            )

    async def _maintain(self) -> None:
        """Once this process has served a request: renew its lease, settle orphans of dead workers, prune."""
        lease = float(mcp_settings.LEASE_TIMEOUT)
        interval = max(0.2, lease / 3)
        while True:
            try:
                await self.upkeep()
            except Exception:
                logger.exception("ledger upkeep failed")
            await asyncio.sleep(interval)

    async def upkeep(self) -> dict[str, int]:
        """One round of lease renewal, orphan settlement and pruning; returns the counts."""
        ledger = get_ledger()
        now = timezone.now()
        renewed = await ledger.arenew_leases(
            WORKER_ID, now + timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT))
        )
        orphans = await self.settle_orphans(now)
        pruned = await ledger.aprune(now - timedelta(seconds=float(mcp_settings.LEDGER_RETENTION)))
        return {"renewed": renewed, "orphans": orphans, "pruned": pruned}

    async def settle_orphans(self, now: datetime) -> int:
        """Close, with -32000, the pending requests of other workers whose lease ran out."""
        orphans = 0
        for record in await get_ledger().aexpired(now):
            if record.worker != WORKER_ID:
                reply = closed_response(record.request_id, "the worker serving it stopped")
                orphans += await self.settle_record(record, CLOSED, reply)
        return orphans


inflight = InFlightTable()
"""This process's table."""
