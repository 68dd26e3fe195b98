"""Every settlement race, in process: worker A holds a request while worker B (another ``Runtime`` on the same
channel layer and ledger) ends it, or A's own deadline does.

The worker that holds a request decides its settlement in memory (``RequestTable.settle``); B reaches it with
a channel-layer message, and the ledger is written behind. For each way the request can end before its
handler answers (B's cancel, B's end of the session, an operator's abort through B, A's deadline) and each
order: the competitor first, then the handler finishes (the client gets exactly the winner's reply, or none
for a cancel, never the handler's result; the ledger records the winner); the handler first, then the late
competitor (nothing changes, the ledger stays ``answered``, even when B acted on a ledger row still
pending); both at once, many rounds (one winner, one delivery, and the ledger agrees). Then the death of a
worker (a survivor's ``settle_orphans``, which the ledger's compare-and-set decides, as it decides an
operator's abort of a request whose worker is gone), duplicates (refused by the holder's memory, or by the
ledger when another worker holds the id: at arrival when writing through, at the flush when writing
behind), and what a late cancel does to a reused id.

Backends: ``DatabaseLedger`` on the test database and ``CacheLedger`` on local memory, with the in-memory
channel layer, in this process; then the same tests again in a child pytest whose settings point at a fresh
PostgreSQL database (``DATABASE_URL``) and at Redis (``REDIS_URL``: the cache and the channel layer), see
:func:`test_every_race_on_postgresql_and_redis`. A child process, rather than swapping Django's
``connections`` here, because the async ORM and the ledger writer run in threads of their own with their own
connections: a child configured like a production worker gets PostgreSQL everywhere, and pytest-django
creates, flushes and drops its test database as it does for SQLite.

Dropped with the old design (the ledger's compare-and-set between live workers), since they cannot happen
any more:

- *B wins the ledger while its message to A is still on its way; A's handler then loses the ledger's
  compare-and-set and delivers B's decision read from the ledger*, and its variant *B's message arrives while
  A's handler is inside its own (losing) ledger settle*: no worker settles, in the ledger, a request a live
  worker holds. B's message is the settlement: until A acts on it, nothing has been decided, and A's
  handler, if it answers first, wins (see the "handler first" and "at once" tests; ``deliver`` yields to the
  loop, so a second settle runs during a delivery there).
- *The cache ledger: B's compare-and-set landed, its record not yet written, and the loser answers with the
  state's generic error*: the holder never reads another worker's decision from the ledger.
- *A duplicate refused by the holder alone while the ledger was already free (B had settled the record)*:
  the ledger is never settled under a live holder; the holder's own refusal is tested before the ledger has
  even been written.
- *The death of A as an outcome racing A's live handler*: a dead worker's handler does not finish. Its
  cases are tests of their own below (what a survivor settles, what it leaves, what a crash loses, and a
  worker that outlived its lease).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.utils import timezone

from mcp_server.admin_live import operations
from mcp_server.conf import DEFAULTS, mcp_settings
from mcp_server.core.records import request_key
from mcp_server.ledger import State, get_ledger
from mcp_server.protocol.settlement import aborted_response
from mcp_server.runtime.upkeep import Upkeep
from mcp_server.wire.errors import INVALID_REQUEST, JSONRPCError
from mcp_server.wire.jsonrpc import error_response
from tests.support.services_rerun import expected_tests, rerun_on_services
from tests.support.settlement import (
    ANSWERED,
    BACKENDS,
    HANDLERS,
    ORPHAN_OUTCOME,
    OUTCOMES,
    WRITE_BEHIND,
    Outcome,
    Request,
    World,
    after_lease,
    by_name,
    compete,
    dies,
    fence,
    handler_finishes,
    lease_runs_out,
    new_session,
    new_worker,
    open_request,
    outcome_of,
    stopped,
    stored,
    winner_reply,
)

pytestmark = pytest.mark.django_db(transaction=True)

PENDING = State.PENDING.value
CANCELLED = State.CANCELLED.value
CLOSED = State.CLOSED.value
ABORTED = State.ABORTED.value
ROUNDS = 16
SKEWS: list[int | float] = [0, 1, 4, 16, 64, 256, 1024, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 2, 8, 32]
"""How late one side starts in each round (A's handler in even rounds, B in odd ones): loop turns (int) or
seconds (float, for a networked ledger or channel layer).

They only vary the interleaving: every assertion holds whoever wins, and the rounds end on an event (each side
has won one), not on time."""

FAST_DEADLINE = 0.02
"""``REQUEST_TIMEOUT`` in the rounds of the deadline: the skews straddle it."""
REFUSAL = "Request id 7 is already in flight in this session"


async def after(skew: float) -> None:
    """Let ``skew`` loop turns (int) or seconds (float) pass."""
    if isinstance(skew, float):
        await asyncio.sleep(skew)
    for _ in range(skew if isinstance(skew, int) else 0):
        await asyncio.sleep(0)


async def pending_in_ledger(request: Request) -> bool:
    record = await get_ledger().aget(request.record)
    return record is not None and record.state == PENDING


# -- 1. The competitor first, then the handler finishes ----------------------------------------------------

FIRST = [
    pytest.param(outcome, handler, id=f"{outcome.name}-{handler}")
    for outcome in OUTCOMES
    for handler in HANDLERS
    if handler == "thread" or outcome.name != "deadline"  # a handler that ignores cancels has no deadline
]


@pytest.mark.parametrize(("outcome", "handler"), FIRST)
async def test_the_competitor_first_then_the_handler_finishes(
    world: World, outcome: Outcome, handler: str
) -> None:
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1, outcome.tool if handler == "thread" else "stubborn")
    await a.runtime.writer.flush()  # its pending row: what an operator sees, and aborts
    returned = await compete(outcome, b, request)
    reply = winner_reply(outcome, request)
    assert a.deliveries(request) == [(outcome.state, reply)]  # at once, while the handler still runs
    assert not request.gate.finished.is_set()
    if outcome.name == "cancel":
        assert returned is False  # B did not hold it: it told every worker
    elif outcome.name == "session_end":
        assert returned is True
    elif outcome.name == "abort":
        assert [record.pk for record in returned] == [request.record.pk]
    if handler == "thread" and outcome.name != "deadline":
        assert await stopped(request)  # the settlement cancels the handler's task (its thread runs on)
    assert len(a.runtime.requests) == 0

    assert await handler_finishes(request) is False
    if handler == "async":
        assert request.gate.cancels_ignored == 1  # its result reached the settlement, and lost
    await fence(a.runtime)
    assert a.deliveries(request) == [(outcome.state, reply)]  # never the handler's result
    assert await stored(request) == (outcome.state, outcome_of(reply))


# -- 2. The handler first, then the late competitor: nothing changes ----------------------------------------


@by_name
async def test_the_handler_first_then_the_late_competitor_changes_nothing(
    world: World, outcome: Outcome
) -> None:
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1, outcome.tool)
    await a.runtime.writer.flush()
    assert await handler_finishes(request) is True
    answered = [(ANSWERED, request.result)]
    assert a.deliveries(request) == answered
    # Settled in A's memory, not yet written: the ledger still says pending, and that is what B reads.
    assert await pending_in_ledger(request)

    returned = await compete(outcome, b, request)
    if outcome.name == "abort":
        assert returned == []  # A no longer holds it, and its lease is alive: the ledger is left alone
    elif outcome.name == "cancel":
        await fence(b.runtime)
    assert a.deliveries(request) == answered
    assert len(a.runtime.requests) == 0
    assert await stored(request) == (ANSWERED, {"result": True})


# -- 3. Both at once, many rounds: one winner, one delivery, and the ledger agrees -------------------------


@by_name
@pytest.mark.parametrize(
    "flush", [0.0, DEFAULTS["LEDGER_FLUSH_INTERVAL"]], indirect=True, ids=["write_through", "write_behind"]
)
async def test_concurrent_settlement_has_one_winner(world: World, outcome: Outcome, settings: Any) -> None:
    a, b = world.a, world.b
    if world.on_sqlite:
        # SQLite's in-memory test database, shared by threads, refuses a second writing (or reading)
        # connection while one writes (SQLITE_LOCKED: no busy wait): A's writer, in its thread, writes only
        # when the test flushes, between rounds. The intervals asked for run on the cache ledger, and with
        # the database ledger on PostgreSQL in the child run.
        a.runtime.writer.interval = WRITE_BEHIND
    tool = outcome.tool
    if outcome.name == "deadline":  # A's REQUEST_TIMEOUT this time (``held`` has no deadline of its own)
        settings.MCP_SERVER = {**settings.MCP_SERVER, "REQUEST_TIMEOUT": FAST_DEADLINE}
        tool = "held"
    winners: set[str] = set()
    n = 0
    while n < ROUNDS or len(winners) < 2:  # at least ROUNDS, and until each side has won a round
        assert n < 20 * ROUNDS, f"after {n} rounds only {winners} ever won"
        session_id = await new_session() if outcome.name == "session_end" else world.session_id
        request = await open_request(a, session_id, n, tool)
        if outcome.name == "abort":
            await a.runtime.writer.flush()

        skew, late = SKEWS[n // 2 % len(SKEWS)], "ab"[n % 2]

        async def side_a(request: Request = request, skew: float = skew, late: str = late) -> bool:
            await after(skew if late == "a" else 0)
            return await handler_finishes(request)

        async def side_b(request: Request = request, skew: float = skew, late: str = late) -> Any:
            await after(skew if late == "b" else 0)
            return await compete(outcome, b, request)

        a_won, returned = await asyncio.gather(side_a(), side_b())
        await fence(a.runtime)
        winners.add("a" if a_won else "b")
        if a_won:
            assert a.deliveries(request) == [(ANSWERED, request.result)], n
            assert await stored(request) == (ANSWERED, {"result": True}), n
        else:
            reply = winner_reply(outcome, request)
            assert a.deliveries(request) == [(outcome.state, reply)], n
            assert await stored(request) == (outcome.state, outcome_of(reply)), n
        if outcome.name == "abort":  # the operator is told whether the abort won
            assert bool(returned) is not a_won, n
        n += 1
    assert len(a.runtime.requests) == 0
    assert len(a.delivered) == n


# -- 4. The death of a worker: its orphans are the ledger's to decide ----------------------------------------


async def test_a_dead_workers_request_is_closed_by_one_survivor(world: World) -> None:
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1)
    await dies(a)  # its pending row was written; its lease is no longer renewed
    assert await b.runtime.upkeep.settle_orphans(timezone.now()) == 0  # not before its lease runs out
    await lease_runs_out(a)
    assert await b.runtime.upkeep.settle_orphans(after_lease()) == 1
    assert await Upkeep(get_ledger(), "survivor-c").settle_orphans(after_lease()) == 0  # settled once
    assert await stored(request) == (CLOSED, ORPHAN_OUTCOME)
    assert a.delivered == []  # its client's connection died with it


async def test_a_survivor_leaves_what_the_dead_worker_answered_and_wrote(world: World) -> None:
    a, b = world.a, world.b
    answered = await open_request(a, world.session_id, "x")
    running = await open_request(a, world.session_id, "y")
    await a.runtime.writer.flush()  # both pending rows
    assert await handler_finishes(answered) is True
    await dies(a)  # its last batch recorded the answer
    await lease_runs_out(a)
    assert await b.runtime.upkeep.settle_orphans(after_lease()) == 1
    assert await stored(answered) == (ANSWERED, {"result": True})
    assert await stored(running) == (CLOSED, ORPHAN_OUTCOME)


async def test_an_answer_the_dead_worker_had_not_written_is_recorded_closed(world: World) -> None:
    """What a crash loses from the record (docs, "The ledger is written behind the request path"): the
    client got its answer, but the worker died before its next batch; the row stays pending until a
    survivor settles it -32000."""
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1)
    await a.runtime.writer.flush()
    assert await handler_finishes(request) is True
    assert a.deliveries(request) == [(ANSWERED, request.result)]
    await dies(a, last_batch=False)
    await lease_runs_out(a)
    assert await b.runtime.upkeep.settle_orphans(after_lease()) == 1
    assert await stored(request) == (CLOSED, ORPHAN_OUTCOME)


async def test_a_worker_that_outlived_its_lease_cannot_overwrite_the_survivors_record(world: World) -> None:
    """A stalls past its lease (it is alive, but renews nothing), a survivor settles its request -32000, then
    A resumes and its handler answers. A still holds the request in memory and answers its client; its late
    write loses the ledger's compare-and-set, which keeps the survivor's record. (A worker whose lease ran out
    is taken for dead: ``LEASE_TIMEOUT`` must outlast any stall.)"""
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1)
    await a.runtime.writer.flush()
    await lease_runs_out(a)
    assert await a.runtime.upkeep.settle_orphans(after_lease()) == 0  # never its own: it holds them
    assert await b.runtime.upkeep.settle_orphans(after_lease()) == 1
    assert await handler_finishes(request) is True
    assert a.deliveries(request) == [(ANSWERED, request.result)]
    assert await stored(request) == (CLOSED, ORPHAN_OUTCOME)


async def test_the_orphans_of_a_dead_worker_are_settled_once(
    world: World, flush: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two survivors' ``settle_orphans`` and an operator's abort, at once, many rounds: the ledger's
    compare-and-set lets exactly one of them settle each orphan, and the ledger records that one."""
    monkeypatch.setattr(operations, "REPLY_TIMEOUT", 0.05)  # the dead holder never answers the abort
    b, c = world.b.runtime.upkeep, Upkeep(get_ledger(), "survivor-c")
    skews = [0.0, 0.2, 0.01, 0.1, 0.05, 0.0, 0.3, 0.02]
    winners: set[str] = set()
    n = 0
    while n < 8 or winners != {"survivor", "operator"}:
        assert n < 80, f"after {n} rounds only {winners} ever won"
        doomed = await new_worker("doomed", flush)
        world.others.append(doomed)
        request = await open_request(doomed, world.session_id, n)
        await dies(doomed)
        await lease_runs_out(doomed)

        async def survivor(upkeep: Upkeep, skew: float = skews[n % len(skews)]) -> int:
            await asyncio.sleep(skew)
            return await upkeep.settle_orphans(after_lease())

        by_b, by_c, aborted = await asyncio.gather(
            survivor(b), survivor(c), operations.aabort_requests([request.record.pk])
        )
        assert by_b + by_c + len(aborted) == 1, (n, by_b, by_c, aborted)
        if aborted:
            winners.add("operator")
            assert await stored(request) == (ABORTED, outcome_of(aborted_response(request.id)))
        else:
            winners.add("survivor")
            assert await stored(request) == (CLOSED, ORPHAN_OUTCOME)
        request.gate.open()  # its thread ends (a blocked thread would hold one of the loop's few executors)
        n += 1


# -- 5. Duplicates: -32600 while pending, from the holder's memory or from the ledger -----------------------


async def test_a_duplicate_is_refused_by_the_holders_memory(world: World) -> None:
    a = world.a
    held = await open_request(a, world.session_id, 7)
    assert await get_ledger().aget_pending(world.session_id, request_key(7)) is None  # not written yet
    with pytest.raises(JSONRPCError) as refused:
        await open_request(a, world.session_id, 7, runs=False)
    assert (refused.value.code, refused.value.message) == (INVALID_REQUEST, REFUSAL)
    assert len(a.runtime.requests) == 1
    assert await handler_finishes(held) is True
    assert a.deliveries(held) == [(ANSWERED, held.result)]
    again = await open_request(a, world.session_id, 7)  # free once settled
    assert await handler_finishes(again) is True
    assert a.deliveries(again) == [(ANSWERED, again.result)]


@pytest.mark.parametrize("flush", [0.0], indirect=True, ids=["write_through"])
async def test_a_duplicate_held_elsewhere_is_refused_by_the_ledger_on_arrival(world: World) -> None:
    """Writing through, a worker's open waits for its pending row: the ledger's unique constraint refuses an
    id pending at another worker before the request runs."""
    a, b = world.a, world.b
    held = await open_request(a, world.session_id, 7)
    with pytest.raises(JSONRPCError) as refused:
        await open_request(b, world.session_id, 7, runs=False)
    assert (refused.value.code, refused.value.message) == (INVALID_REQUEST, REFUSAL)
    assert len(b.runtime.requests) == 0  # never taken, never run
    assert b.delivered == []
    assert await handler_finishes(held) is True
    again = await open_request(b, world.session_id, 7)  # free once settled, on any worker
    assert await handler_finishes(again) is True
    assert b.deliveries(again) == [(ANSWERED, again.result)]
    assert a.deliveries(held) == [(ANSWERED, held.result)]


async def test_a_duplicate_held_elsewhere_is_refused_by_the_ledger_at_the_flush(world: World) -> None:
    """Writing behind, the duplicate runs until its worker's next batch, whose pending row the ledger refuses:
    it is then answered -32600, once, whatever its handler does after."""
    a, b = world.a, world.b
    held = await open_request(a, world.session_id, 7)
    await a.runtime.writer.flush()  # A's pending row
    duplicate = await open_request(b, world.session_id, 7)  # B's memory does not know the id: it runs
    assert b.delivered == []
    await b.runtime.writer.flush()
    refusal = error_response(7, JSONRPCError(INVALID_REQUEST, REFUSAL))
    assert b.deliveries(duplicate) == [(ANSWERED, refusal)]
    assert len(b.runtime.requests) == 0
    assert await stopped(duplicate)  # its handler's task does not go on (its thread runs out on its own)
    await handler_finishes(duplicate)
    await fence(b.runtime)
    assert b.deliveries(duplicate) == [(ANSWERED, refusal)]  # never its handler's result
    assert await stored(duplicate) == (ANSWERED, outcome_of(refusal))  # recorded as a final row of its own
    assert await pending_in_ledger(held)  # A's row is untouched
    assert await handler_finishes(held) is True
    assert a.deliveries(held) == [(ANSWERED, held.result)]
    assert await stored(held) == (ANSWERED, {"result": True})


# -- 6. Ids and cancels: a late cancel, a reused id ----------------------------------------------------------
#
# A cancel names a session and an id. Per the MCP specification an id is never reused in a session, so a
# cancel for an id nobody holds is remembered by every worker (it may have overtaken its request, I9), and a
# request with that id arriving within the window is taken for the late arrival of the cancelled one: it is
# settled, unanswered, and never runs. The worker that settles it tells the others, which forget the cancel.


async def test_an_id_its_holder_settled_as_cancelled_is_free_again(world: World) -> None:
    a, b = world.a, world.b
    cancel = next(o for o in OUTCOMES if o.name == "cancel")
    first = await open_request(a, world.session_id, 1)
    await compete(cancel, b, first)
    assert a.deliveries(first) == [(CANCELLED, None)]
    await fence(b.runtime)  # B remembered its own broadcast, then forgot it when A said it settled the id
    for worker in (b, a):
        again = await open_request(worker, world.session_id, 1)
        assert await handler_finishes(again) is True
        assert worker.deliveries(again) == [(ANSWERED, again.result)]


async def test_a_late_cancel_of_an_answered_id_takes_its_reuse(world: World) -> None:
    a, b = world.a, world.b
    first = await open_request(a, world.session_id, 1)
    assert await handler_finishes(first) is True
    assert await b.runtime.cancel(world.session_id, 1) is False  # the client's cancel crossed the answer
    await fence(a.runtime)
    await fence(b.runtime)
    assert a.deliveries(first) == [(ANSWERED, first.result)]  # the late cancel changes nothing ...
    assert await stored(first) == (ANSWERED, {"result": True})

    reuse = await open_request(a, world.session_id, 1, runs=False)  # ... but is remembered by every worker
    assert (reuse.entry.state, reuse.entry.task) == (CANCELLED, None)  # taken as cancelled: never runs
    assert a.deliveries(reuse) == [(CANCELLED, None)]
    assert await stored(reuse) == (CANCELLED, None)
    await fence(b.runtime)  # A told B, which forgot the cancel: the id runs again, anywhere
    again = await open_request(b, world.session_id, 1)
    assert await handler_finishes(again) is True
    assert b.deliveries(again) == [(ANSWERED, again.result)]

    never_cancelled = await open_request(a, world.session_id, 2)  # an id never cancelled: reusable at once
    assert await handler_finishes(never_cancelled) is True
    for worker in (b, a):
        reused = await open_request(worker, world.session_id, 2)
        assert await handler_finishes(reused) is True
        assert worker.deliveries(reused) == [(ANSWERED, reused.result)]


async def test_a_late_cancel_settles_the_pending_reuse_of_its_id(world: World) -> None:
    """The cancel of an answered request, still on its way when the client reuses the id, settles the reuse:
    nothing tells the two apart, and the specification says they cannot both exist."""
    a, b = world.a, world.b
    first = await open_request(a, world.session_id, 1)
    assert await handler_finishes(first) is True
    reuse = await open_request(a, world.session_id, 1)
    cancel = next(o for o in OUTCOMES if o.name == "cancel")
    await compete(cancel, b, reuse)
    assert a.deliveries(reuse) == [(CANCELLED, None)]
    assert await stopped(reuse)
    assert a.deliveries(first) == [(ANSWERED, first.result)]


# -- 7. The channel layer: the other receivers of a process do not hold up its runtime ---------------------


async def test_messages_reach_the_holder_while_a_consumer_of_its_process_waits(world: World) -> None:
    """A Channels consumer in A's process (the admin's live page is a WebSocket consumer) waits on a channel
    of its own, as every ``AsyncConsumer`` does: cancels from B and an operator's abort still reach A, and
    the abort's answer reaches the operator.

    channels_redis receives all the channels of one prefix in a process through one Redis key, and the
    receive that holds the layer's lock waits on its own key only: a receiver of another prefix that takes
    the lock holds up every other receiver of the process until a message comes for it."""
    a, b = world.a, world.b
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    consumer = asyncio.ensure_future(layer.receive(await layer.new_channel()))  # what AsyncConsumer does
    try:
        for n in range(3):  # each message passes the lock on: the consumer's receive takes it in turn
            request = await open_request(a, world.session_id, n)
            await b.runtime.cancel(world.session_id, n)
            await a.until_delivered(request)
            assert a.deliveries(request) == [(CANCELLED, None)]
        request = await open_request(a, world.session_id, "aborted")
        await a.runtime.writer.flush()
        abort = next(o for o in OUTCOMES if o.name == "abort")
        returned = await compete(abort, b, request)
        assert [record.pk for record in returned] == [request.record.pk]
        assert a.deliveries(request) == [(ABORTED, winner_reply(abort, request))]
        assert not consumer.done()
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)


# -- the same tests on PostgreSQL and Redis -----------------------------------------------------------------


def test_every_race_on_postgresql_and_redis(tmp_path: Path) -> None:
    this = test_every_race_on_postgresql_and_redis
    expected = expected_tests(globals(), this, len(BACKENDS))
    rerun_on_services(__file__, this, tmp_path, expected)
