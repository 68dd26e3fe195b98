"""The adapter between the settlement-race scenarios (tests/test_settlement_races.py) and the product's API.

Worker A holds a request: its exchange (the ``deliver`` callback, which records every call), its handler task
and its channel on the channel layer. Worker B is any other process: it cancels the request, ends its
session, enforces its deadline, aborts it for an operator, or settles it as an orphan once A's lease ran out.
Both are :class:`InFlightTable` instances sharing the one configured ledger. The scenarios touch the
product only through the functions below, so a redesign of settlement re-points these, not the scenarios.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone

from mcp_server.admin_live.operations import ABORT_MESSAGE, aborted_response
from mcp_server.conf import mcp_settings
from mcp_server.ledger import LedgerRecord, State, get_ledger
from mcp_server.ledger.cache import CacheLedger
from mcp_server.ledger.database import DatabaseLedger
from mcp_server.protocol.errors import CONNECTION_CLOSED, REQUEST_ABORTED, REQUEST_TIMEOUT, JSONRPCError
from mcp_server.protocol.inflight import UNRECORDED, InFlight, InFlightTable, closed_response
from mcp_server.protocol.jsonrpc import RequestId, error_response, result_response

DEADLINE = 5.0
SESSION_END = "session terminated by the client"
DEAD_WORKER_ID = "dead-host:0:000000"
"""A worker id nobody renews a lease for."""
SENTINEL = "test.sentinel"


@dataclass(frozen=True)
class Outcome:
    """One way another worker can end A's request: the ledger state, and the reply A must deliver."""

    name: str
    state: str
    code: int | None  # ``None``: a cancel, A delivers the settled signal with no response
    message: str = ""


OUTCOMES = [
    Outcome("cancel", State.CANCELLED.value, None),
    Outcome("session_end", State.CLOSED.value, CONNECTION_CLOSED, f"Connection closed: {SESSION_END}"),
    Outcome("deadline", State.TIMED_OUT.value, REQUEST_TIMEOUT, f"Request timed out after {DEADLINE:g}s"),
    Outcome("abort", State.ABORTED.value, REQUEST_ABORTED, ABORT_MESSAGE),
    Outcome(
        "worker_death",
        State.CLOSED.value,
        CONNECTION_CLOSED,
        "Connection closed: the worker serving it stopped",
    ),
]


@dataclass
class WorkerA:
    """The worker holding the requests: its table, its channel, and every delivery its exchanges saw."""

    table: InFlightTable
    layer: Any
    channel: str
    delivered: list[tuple[RequestId, str, dict[str, Any] | None]] = field(default_factory=list)

    def deliveries(self, request_id: RequestId) -> list[tuple[str, dict[str, Any] | None]]:
        """(state, response) of each delivery for that id."""
        return [(state, response) for rid, state, response in self.delivered if rid == request_id]


@dataclass
class Request:
    """A request A holds: its entry, and its handler (a task that settles it once released)."""

    entry: InFlight
    release: asyncio.Event
    result: dict[str, Any]

    @property
    def id(self) -> RequestId:
        return self.entry.request_id


async def open_request(
    a: WorkerA, session_id: str, request_id: RequestId, outcome: Outcome | None
) -> Request:
    """A receives a request and starts its handler; for ``worker_death`` the ledger then says A died."""

    async def deliver(entry: InFlight, response: dict[str, Any] | None) -> None:
        a.delivered.append((entry.request_id, entry.state, response))

    entry = await a.table.open(
        session_id, request_id, "tools/call", deliver, name="slow", channel=a.channel, seconds=DEADLINE
    )
    release = asyncio.Event()
    result = result_response(request_id, {"content": [{"type": "text", "text": "done"}], "isError": False})

    async def handler() -> bool:
        await release.wait()
        return await a.table.settle(entry, State.ANSWERED.value, result)

    entry.task = asyncio.create_task(handler(), name=f"handler {request_id!r}")
    if outcome is not None and outcome.name == "worker_death":
        await held_by_dead_worker(entry.record)
    return Request(entry, release, result)


async def held_by_dead_worker(record: LedgerRecord) -> None:
    """Rewrite the stored record as held by a worker without a lease.

    Both tables live in this one process and so share ``WORKER_ID``, which ``settle_orphans`` skips as
    its own; a stored record naming another worker is exactly what a dead worker leaves behind.
    """
    ledger = get_ledger()
    if isinstance(ledger, DatabaseLedger):
        await ledger.model.objects.filter(pk=record.pk).aupdate(worker=DEAD_WORKER_ID)
    else:
        assert isinstance(ledger, CacheLedger)
        stored = await ledger.aget(record)
        assert stored is not None
        stored.worker = DEAD_WORKER_ID
        ledger.cache.set(ledger._k("e", record.pk), dataclasses.asdict(stored), None)


async def handler_finishes(request: Request) -> bool:
    """A's handler returns its result and settles; ``True`` if A won (``False``: lost, or was stopped)."""
    request.release.set()
    task = request.entry.task
    assert task is not None
    await asyncio.gather(task, return_exceptions=True)
    return not task.cancelled() and task.result() is True


def winner_reply(outcome: Outcome, request_id: RequestId) -> dict[str, Any] | None:
    """The reply B settles with (what ``answer``, ``aabort_requests``... build for that outcome)."""
    if outcome.code is None:
        return None
    if outcome.name == "deadline":
        return error_response(
            request_id, JSONRPCError(REQUEST_TIMEOUT, outcome.message, {"timeout": DEADLINE})
        )
    if outcome.name == "abort":
        return aborted_response(request_id)
    return closed_response(request_id, outcome.message.removeprefix("Connection closed: "))


def after_lease() -> Any:
    """A moment past the lease of every request opened so far."""
    return timezone.now() + timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT) + 1)


async def remote_settles(b: InFlightTable, outcome: Outcome, request: Request) -> int:
    """Worker B ends A's request through the product's entry point for that outcome; how many it settled."""
    session_id, request_id = request.entry.session_id, request.id
    assert session_id is not None
    if outcome.name == "cancel":
        return int(await b.cancel(session_id, request_id))
    if outcome.name == "session_end":
        return await b.close_session(session_id, SESSION_END)
    if outcome.name == "worker_death":
        return await b.settle_orphans(after_lease())
    # A deadline or an operator's abort (as ``aabort_requests`` does): the pending record, then settle it.
    record = await pending_record(request)
    if record is None:
        return 0
    return int(await b.settle_record(record, outcome.state, winner_reply(outcome, request_id)))


async def remote_half_settles(outcome: Outcome, request: Request) -> None:
    """B's ``CacheLedger._settle`` has done its compare-and-set (``add``) and not yet its record write."""
    ledger = get_ledger()
    assert isinstance(ledger, CacheLedger)
    assert ledger.cache.add(ledger._k("s", request.entry.record.pk), outcome.state, 60)


async def stale_remote_settles(b: InFlightTable, outcome: Outcome, record: LedgerRecord) -> bool:
    """B settles from a record it read while the request was still pending (every path above ends here)."""
    return await b.settle_record(record, outcome.state, winner_reply(outcome, record.request_id))


async def pending_record(request: Request) -> LedgerRecord | None:
    return await get_ledger().aget_pending(request.entry.session_id, request.entry.record.request_key)


async def messages_arrive(a: WorkerA) -> int:
    """Everything queued on A's channel reaches A (as the consumer's ``mcp_settled`` does); how many settled.

    A sentinel sent last, and received, proves nothing else was queued (a channel is first in, first out).
    """
    await a.layer.send(a.channel, {"type": SENTINEL})
    settled = 0
    while True:
        message = await asyncio.wait_for(a.layer.receive(a.channel), 10)
        if message["type"] == SENTINEL:
            return settled
        assert message["type"] == "mcp.settled", message
        settled += 1
        await a.table.finish_remote(
            message["session_id"], message["key"], message["state"], message["response"]
        )


async def stored_outcome(request: Request) -> tuple[str, dict[str, Any] | None]:
    stored = await get_ledger().aget(request.entry.record)
    assert stored is not None
    return stored.state, stored.outcome


def is_winner_reply(outcome: Outcome, request_id: RequestId, response: dict[str, Any] | None) -> bool:
    """Whether ``response`` is the reply of ``outcome`` (code and message: the ledger keeps no ``data``).

    A loser that reads the cache ledger between the winner's compare-and-set and its record write knows the
    state but not the wording: it answers with the state's generic error (``UNRECORDED``), same code.
    """
    if outcome.code is None:
        return response is None
    messages = {outcome.message, UNRECORDED[outcome.state][1]}
    return (
        response is not None
        and response.get("id") == request_id
        and "result" not in response
        and response.get("error", {}).get("code") == outcome.code
        and response["error"].get("message") in messages
    )


async def stop(table: InFlightTable) -> None:
    """Stop the table's ledger upkeep task (started by its first ``open``)."""
    task = table._maintenance
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
