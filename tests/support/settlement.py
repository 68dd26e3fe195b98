"""The adapter between the settlement-race scenarios (tests/protocol/test_settlement_races.py) and the
product's API.

Worker A holds a request: a :class:`~mcp_server.runtime.Runtime` that took it through ``start_request`` (the
path of the HTTP exchange and the stdio loop) and runs its handler, a tool of :data:`races` that waits on a
:class:`Gate` the test opens. Worker B is another ``Runtime`` on the same channel layer and the same ledger:
it cancels the request (``runtime.cancel``), ends its session (``runtime.end_session``), aborts it for an
operator (``aabort_requests``), or settles it as an orphan once A is dead (``upkeep.settle_orphans``). The
deadline is A's own (the tool's ``timeout`` or ``REQUEST_TIMEOUT``). The scenarios touch the product only
through the functions below, so a redesign of settlement re-points these, not the scenarios.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import threading
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection, connections, transaction
from django.utils import timezone

from mcp_server.admin_live.operations import aabort_requests
from mcp_server.conf import mcp_settings
from mcp_server.core.context import Context, SessionState
from mcp_server.core.records import LedgerRecord
from mcp_server.ledger import State, get_ledger
from mcp_server.models import Session
from mcp_server.protocol.peer import RequestPeer
from mcp_server.protocol.serving import start_request
from mcp_server.protocol.settlement import PENDING, PendingRequest, aborted_response, closed_response
from mcp_server.registry.server import MCPServer
from mcp_server.runtime import Runtime
from mcp_server.runtime.upkeep import ORPHAN_REASON
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.errors import REQUEST_TIMEOUT, JSONRPCError, RequestSettled
from mcp_server.wire.jsonrpc import JSONRPCRequest, RequestId, error_response, parse_message
from mcp_server.wire.messages import WORKERS_GROUP, AbortRequest, AbortResult, parse_event, to_event
from mcp_server.wire.versions import LATEST_VERSION
from project.catalogue.models import Author
from tests.support.deadlines import timer_state

DEADLINE = 0.3
"""The ``timeout`` of the ``held_deadline`` tool (the ``deadline`` outcome)."""
SESSION_END = "session terminated by the client"
GATE_WAIT = 60.0
"""How long a gated handler waits for its gate before it gives up (its test has failed long before)."""
WITHIN = 10.0
"""How long an awaited event may take (generous: the machine is shared)."""

ANSWERED = State.ANSWERED.value
Delivery = tuple[str, dict[str, Any] | None]
"""What A's exchange was handed for a request: the state it settled in, and the reply (``None``: none)."""


# -- the handlers: tools that run until the test opens their gate -------------------------------------------


@dataclass(eq=False)
class Gate:
    """A handler's gate, opened by the test; ``started`` once the handler runs, ``finished`` once it has
    returned its result (set through the loop: waiting on them takes no thread)."""

    name: str
    loop: asyncio.AbstractEventLoop
    opened: threading.Event = field(default_factory=threading.Event)
    loop_opened: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    cancels_ignored: int = 0
    refused: BaseException | None = None
    """What a write's claim on its answer raised (``held_write``)."""
    deadline: asyncio.Timeout | None = None
    """The handler's deadline scope (``Context.deadline``), whose timer :func:`deadline_spent` reads."""

    def open(self) -> None:
        self.opened.set()
        self.loop_opened.set()

    def signal(self, event: asyncio.Event) -> None:
        """Set ``event`` from the handler's thread (or the loop itself)."""
        self.loop.call_soon_threadsafe(event.set)

    @property
    def result(self) -> str:
        return f"gate {self.name} opened"


BACKENDS = {
    "database": "mcp_server.stores.ledger.database.DatabaseLedger",
    "cache": "mcp_server.stores.ledger.cache.CacheLedger",
}
WRITE_BEHIND = 60.0
"""The writers' interval unless a test says otherwise: the test writes the ledger (``writer.flush()``) when it
chooses, and the background loop would wait a minute."""

GATES: dict[str, Gate] = {}

RACES_SERVER = "settlement-races"
races = MCPServer(RACES_SERVER)
"""The tools of these scenarios (a server of its own: the test app's tools are not involved)."""


def _hold(gate: str, ctx: Context) -> str:
    held = GATES[gate]
    held.deadline = ctx.deadline
    held.signal(held.started)
    held.opened.wait(GATE_WAIT)
    held.signal(held.finished)
    return held.result


@races.tool
def held(gate: str, ctx: Context) -> str:
    """A sync handler: runs in a worker thread, which a cancel cannot stop; its late result is dropped."""
    return _hold(gate, ctx)


@races.tool(timeout=DEADLINE)
def held_deadline(gate: str, ctx: Context) -> str:
    """``held`` with a deadline of :data:`DEADLINE` seconds: the thread outlives it."""
    return _hold(gate, ctx)


@races.tool
async def stubborn(gate: str) -> str:
    """An async handler that finishes its work even when cancelled, and returns its result to the guarantee:
    the result reaches ``RequestTable.settle`` after whoever settled the request first."""
    held = GATES[gate]
    held.started.set()
    while not held.loop_opened.is_set():
        try:
            await held.loop_opened.wait()
        except asyncio.CancelledError:
            held.cancels_ignored += 1
    held.signal(held.finished)  # through the loop, as the thread's: after the result, in loop order
    return held.result


def _write(gate: str, ctx: Context, claim: str) -> str:
    """A write tool's body: ``late``: waits on its gate, then creates a row and claims its answer in one
    transaction (a competitor that settled the request meanwhile wins: the claim raises and the row is rolled
    back); ``early``: creates the row, claims its answer and commits, then waits on its gate (a competitor
    meanwhile comes too late)."""
    held = GATES[gate]
    held.deadline = ctx.deadline
    if claim == "late":
        held.signal(held.started)
        held.opened.wait(GATE_WAIT)
    try:
        with transaction.atomic():
            Author.objects.create(name=written_name(gate))
            ctx.claim_answer()
    except RequestSettled as exc:
        held.refused = exc
        held.signal(held.finished)
        raise
    if claim == "early":
        return _hold(gate, ctx)
    held.signal(held.finished)
    return held.result


def written_name(gate: str) -> str:
    """The name of the author ``held_write`` creates."""
    return f"written through gate {gate}"


@races.tool
def held_write(gate: str, ctx: Context, claim: Literal["late", "early"] = "late") -> str:
    """A write that claims its answer before it commits (see :func:`_write`)."""
    return _write(gate, ctx, claim)


@races.tool(timeout=DEADLINE)
def held_write_deadline(gate: str, ctx: Context, claim: Literal["late", "early"] = "late") -> str:
    """``held_write`` with a deadline of :data:`DEADLINE` seconds."""
    return _write(gate, ctx, claim)


HANDLERS = {"thread": "held", "async": "stubborn"}


# -- the workers ------------------------------------------------------------------------------------------


class Peer(RequestPeer):
    """The request's way out for notifications and server-to-client requests (none here)."""

    def __init__(self, runtime: Runtime, session_id: str | None) -> None:
        super().__init__(runtime.outbound, runtime.channel)
        self._session_id = session_id

    @property
    def session_id(self) -> str | None:
        return self._session_id

    async def emit(self, message: dict[str, Any]) -> bool:
        return True


@dataclass(eq=False)
class Worker:
    """A runtime, and every delivery its exchanges saw (what the clients got from it)."""

    runtime: Runtime
    delivered: list[tuple[PendingRequest, str, dict[str, Any] | None]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    dead: bool = False

    async def deliver(self, entry: PendingRequest, response: dict[str, Any] | None) -> None:
        await asyncio.sleep(0)  # a real send yields to the loop: a second settle would run meanwhile
        self.delivered.append((entry, entry.state, response))
        self.changed.set()

    def deliveries(self, request: Request) -> list[Delivery]:
        """What this worker's exchange delivered for that request."""
        return [(state, response) for entry, state, response in self.delivered if entry is request.entry]

    async def until_delivered(self, request: Request) -> None:
        async with asyncio.timeout(WITHIN):
            while not self.deliveries(request):
                self.changed.clear()
                await self.changed.wait()


async def new_worker(name: str, flush_interval: float) -> Worker:
    """A started runtime (its channel joined the workers group) on the configured ledger and channel layer.

    Its background upkeep is stopped: the scenarios settle orphans when they choose (``settle_orphans``), and
    no ledger write of theirs overlaps one they did not ask for (SQLite's shared in-memory test database
    refuses two writing connections at once).
    """
    runtime = Runtime(worker_id=f"{name}-{uuid.uuid4().hex[:8]}", flush_interval=flush_interval)
    await runtime.start()
    assert runtime.channel, "the runtime has no channel on the channel layer"
    upkeep = [task for task in runtime._tasks if task.get_name() == "mcp ledger upkeep"]
    assert len(upkeep) == 1, runtime._tasks
    upkeep[0].cancel()
    await asyncio.gather(*upkeep, return_exceptions=True)
    await sync_to_async(lambda: None)()  # the ORM's thread has finished what the upkeep had asked of it
    return Worker(runtime)


async def stop_worker(worker: Worker) -> None:
    """Settle what it still holds, write its last batch, close its connections, stop it."""
    runtime = worker.runtime
    await runtime.requests.shutdown("test over")
    await runtime.writer.flush()
    await close_writer_connection(runtime)
    await runtime.aclose()


async def leave_stuck_tasks_behind(within: float = 10.0) -> list[str]:
    """Cancel the tasks a test left on its loop and wait ``within`` seconds for them; those still running
    (a store client holding on to a cancelled wait: ``Runtime.aclose`` leaves such a task behind after its
    grace, as a stopping process does) are reported with their stacks, as a warning, and unregistered, so
    that the loop's close does not wait for them for ever (``test_every_race_on_postgresql_and_redis`` hung
    there once for 900 s, after a cache-ledger round on Redis). Returns their stacks."""
    current = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    for task in rest:
        task.cancel()
    if not rest:
        return []
    _done, stuck = await asyncio.wait(rest, timeout=within)
    stacks = []
    for task in stuck:
        text = io.StringIO()
        task.print_stack(file=text)
        stacks.append(text.getvalue())
        warnings.warn(
            f"left behind, still running {within:g}s after its cancel: {text.getvalue()}", stacklevel=1
        )
        asyncio.tasks._unregister_task(task)
    return stacks


async def close_writer_connection(runtime: Runtime) -> None:
    """Close the database connection of the writer's thread (PostgreSQL drops a test database only once
    nobody is connected to it)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(runtime.writer._executor, connections.close_all)


def channel_prefix(channel: str) -> str:
    """The prefix ``new_channel(prefix)`` gave ``channel`` (``<prefix>.<process>!<random>``)."""
    return channel.rsplit("!", 1)[0].rsplit(".", 1)[0]


async def fence(runtime: Runtime) -> None:
    """Return once ``runtime`` has acted on every message queued on its channel before now.

    An :class:`AbortRequest` for an id nobody holds, with a reply channel: the runtime answers it after
    every message before it (its channel is first in, first out). The reply channel has the prefix of the
    runtime's own: channels_redis receives a process's channels of one prefix through one Redis key, and the
    receive of another prefix waits for as long as the runtime's listener, waiting on its own key, holds the
    layer's receive lock.
    """
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    reply_to = await layer.new_channel(prefix=channel_prefix(runtime.channel))
    key = f"fence-{uuid.uuid4().hex}"
    await layer.send(runtime.channel, to_event(AbortRequest(session_id="fence", key=key, reply_to=reply_to)))
    answer = parse_event(await asyncio.wait_for(layer.receive(reply_to), WITHIN))
    assert answer == AbortResult(session_id="fence", key=key, aborted=False), answer


async def new_session() -> str:
    """A session row (``end_session`` ends a stored session)."""
    session_id = f"s-races-{uuid.uuid4().hex}"
    await Session.objects.acreate(
        id=session_id, server=RACES_SERVER, protocol_version=LATEST_VERSION, last_seen=timezone.now()
    )
    return session_id


# -- requests ---------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Request:
    """A request a worker took: its entry, its handler's gate, and its deadline in seconds."""

    worker: Worker
    entry: PendingRequest
    gate: Gate
    seconds: float | None

    @property
    def id(self) -> RequestId:
        return self.entry.request_id

    @property
    def record(self) -> LedgerRecord:
        return self.entry.record

    @property
    def result(self) -> dict[str, Any]:
        """The handler's own answer (the ``tools/call`` result of its gate)."""
        return {
            "jsonrpc": "2.0",
            "id": self.id,
            "result": {
                "content": [{"type": "text", "text": self.gate.result}],
                "structuredContent": {"result": self.gate.result},
            },
        }


async def open_request(
    worker: Worker,
    session_id: str,
    request_id: RequestId,
    tool: str = "held",
    *,
    runs: bool = True,
    arguments: dict[str, Any] | None = None,
) -> Request:
    """The worker takes a ``tools/call`` of ``tool`` (with ``arguments`` besides its gate); with ``runs``,
    wait until its handler runs."""
    gate = Gate(uuid.uuid4().hex[:12], asyncio.get_running_loop())
    GATES[gate.name] = gate
    message = parse_message(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"gate": gate.name, **(arguments or {})}},
        }
    )
    assert isinstance(message, JSONRPCRequest)
    runtime = worker.runtime
    entry = await start_request(
        runtime,
        message,
        server=races,
        session=SessionState(id=session_id, protocol_version=LATEST_VERSION),
        peer=Peer(runtime, session_id),
        deliver=worker.deliver,
    )
    deadline = entry.record.deadline
    assert entry.record.created is not None
    seconds = (deadline - entry.record.created).total_seconds() if deadline is not None else None
    request = Request(worker, entry, gate, seconds)
    if runs:
        assert entry.state == PENDING, entry.state
        await asyncio.wait_for(gate.started.wait(), WITHIN)
    return request


async def handler_finishes(request: Request) -> bool:
    """Open the handler's gate and wait until it has returned and its task has ended; ``True`` if the
    handler's answer settled the request."""
    request.gate.open()
    await asyncio.wait_for(request.gate.finished.wait(), WITHIN)
    task = request.entry.task
    assert task is not None
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), WITHIN)
    return request.entry.state == ANSWERED


async def stopped(request: Request) -> bool:
    """Whether the request's task has been stopped (cancelled) by the settlement."""
    task = request.entry.task
    assert task is not None
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), WITHIN)
    return task.cancelled()


# -- what other workers do -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One way a request can end before its handler answers: the state it settles in, the tool it needs."""

    name: str
    state: str
    tool: str = "held"


OUTCOMES = [
    Outcome("cancel", State.CANCELLED.value),
    Outcome("session_end", State.CLOSED.value),
    Outcome("deadline", State.TIMED_OUT.value, tool="held_deadline"),
    Outcome("abort", State.ABORTED.value),
]


def winner_reply(outcome: Outcome, request: Request) -> dict[str, Any] | None:
    """The reply a request settled by ``outcome`` gets (``None``: a cancel has none)."""
    if outcome.name == "cancel":
        return None
    if outcome.name == "session_end":
        return closed_response(request.id, SESSION_END)
    if outcome.name == "abort":
        return aborted_response(request.id)
    assert outcome.name == "deadline"
    seconds = request.seconds
    assert seconds is not None
    error = JSONRPCError(REQUEST_TIMEOUT, f"Request timed out after {seconds:g}s", {"timeout": seconds})
    return error_response(request.id, error)


async def compete(outcome: Outcome, b: Worker, request: Request) -> Any:
    """B ends A's request through the product's entry point for ``outcome`` (the deadline is A's own: wait
    until it is due), then wait until A has acted on B's message. Returns what the entry point returned.

    ``abort`` needs A's pending row in the ledger (the admin lists rows): the caller flushes A's writer.
    """
    a = request.worker
    session_id = request.entry.session_id
    assert session_id is not None
    returned: Any = None
    if outcome.name == "cancel":
        returned = await b.runtime.cancel(session_id, request.id)
    elif outcome.name == "session_end":
        returned = await b.runtime.end_session(session_id, SESSION_END)
    elif outcome.name == "abort":
        assert request.record.pk is not None, "the row is not written yet: flush A's writer first"
        returned = await aabort_requests([request.record.pk])
    else:  # A's own timer: wait until it settled the request, or (settled already) see that it cannot fire
        assert outcome.name == "deadline"
        if request.entry.state == PENDING:
            await a.until_delivered(request)
        await deadline_spent(request)
    if not a.dead:
        await fence(a.runtime)
    return returned


async def deadline_spent(request: Request) -> None:
    """Return once the request's deadline can fire no more, as its timer says: it fired, or it is disarmed
    (the handler claimed its answer, or the handler's scope ended with its task, which cancels the timer)."""
    scope = request.gate.deadline
    assert scope is not None, "the handler ran without a deadline"
    if scope.expired() or not timer_state(scope)["armed"]:
        return
    task = request.entry.task
    assert task is not None
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), WITHIN)
    assert not timer_state(scope)["armed"], "the handler's task ended with its deadline still scheduled"


def b_won(outcome: Outcome, returned: Any) -> bool | None:
    """Whether B's entry point reports that it settled the request (``None``: it cannot know)."""
    if outcome.name == "abort":
        return bool(returned)
    return None


async def stored(request: Request) -> tuple[str, dict[str, Any] | None]:
    """(state, outcome) of the request's record, once the holder's writer has written what it has."""
    if not request.worker.dead:
        await request.worker.runtime.writer.flush()
    assert request.record.pk is not None, "never written"
    record = await get_ledger().aget(request.record)
    assert record is not None
    return record.state, record.outcome


def outcome_of(response: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the ledger records of a reply (``mcp_server.protocol.settlement.outcome_of``, restated)."""
    if response is None:
        return None
    if "error" in response:
        return {"error": {"code": response["error"]["code"], "message": response["error"]["message"]}}
    return {"result": True}


ORPHAN_OUTCOME = {"error": {"code": -32000, "message": f"Connection closed: {ORPHAN_REASON}"}}


# -- the death of a worker ---------------------------------------------------------------------------------


async def dies(worker: Worker, *, last_batch: bool = True) -> None:
    """The worker's process stops: its channel listener, lease renewal and writer stop; nothing it holds is
    settled, delivered or written from here on. With ``last_batch``, its writer wrote everything it had
    queued first (without: the settlements of its last interval are lost, as in a crash)."""
    runtime = worker.runtime
    if last_batch:
        await runtime.writer.flush()
    await close_writer_connection(runtime)
    for task in runtime._tasks:  # the listener and the upkeep (no public way to stop them and not flush)
        task.cancel()
    await asyncio.gather(*runtime._tasks, return_exceptions=True)
    runtime._tasks.clear()
    await get_channel_layer(mcp_settings.CHANNEL_LAYER).group_discard(WORKERS_GROUP, runtime.channel)
    worker.dead = True


def in_the_past() -> datetime:
    return timezone.now() - timedelta(seconds=1)


def after_lease() -> datetime:
    """A moment past the lease of every request opened so far (``now`` for ``settle_orphans``)."""
    return timezone.now() + timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT) + 1)


async def lease_runs_out(worker: Worker) -> None:
    """The worker's lease expires in the ledger, as it does ``LEASE_TIMEOUT`` after it stopped renewing it:
    its records' ``lease_expires`` pass (what the database ledger and an operator's abort look at), and its
    lease key goes (what the cache ledger looks at, with the records' age)."""
    ledger = get_ledger()
    worker_id = worker.runtime.worker_id
    if isinstance(ledger, DatabaseLedger):
        await ledger.model.objects.filter(worker=worker_id).aupdate(lease_expires=in_the_past())
        return
    assert isinstance(ledger, CacheLedger)

    def expire() -> None:
        ledger.cache.delete(ledger._k("w", worker_id))
        for record in ledger._pending(None, None):
            if record.worker == worker_id:
                expired = dataclasses.replace(record, lease_expires=in_the_past())
                ledger.cache.set(ledger._k("e", record.pk), dataclasses.asdict(expired), None)

    await sync_to_async(expire, thread_sensitive=False)()


by_name = pytest.mark.parametrize("outcome", OUTCOMES, ids=[o.name for o in OUTCOMES])


@dataclass
class World:
    session_id: str
    a: Worker
    b: Worker
    backend: str
    others: list[Worker] = field(default_factory=list)

    @property
    def on_sqlite(self) -> bool:
        """Whether the database ledger is on SQLite (in this process, not in the child)."""
        return self.backend == "database" and connection.vendor == "sqlite"
