"""A write's claim on its answer (``Context.claim_answer``), in process, on both ledgers, against every way a
request can end: a write and its request's settlement agree.

Worker A holds a ``tools/call`` of ``held_write`` (tests/support/settlement.py): one transaction creates an
author and claims the request's answer. Worker B cancels the request, ends its session, aborts it for an
operator, or A's own deadline passes (the harness of tests/protocol/test_settlement_races.py):

- before the claim: B's outcome wins, as for any request; the claim raises ``RequestSettled`` and the author
  is rolled back: no change the client was told nothing of;
- after the claim: B's outcome changes nothing; the handler's result is delivered and recorded answered, and
  the author stays;
- A dies after the commit (its writer never wrote another batch): with the database ledger the request was
  recorded answered in the write's own transaction, and a survivor leaves it so; with the cache ledger it is
  settled -32000 as an orphan (the documented limit: the cache cannot join the transaction);
- a survivor settled A's request as an orphan before the claim (A had outlived its lease): with the database
  ledger the claim finds the row settled and the write rolls back.

The same tests run again on PostgreSQL and Redis in a child pytest.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_server.ledger import State, get_ledger
from mcp_server.wire.errors import CONNECTION_CLOSED, RequestSettled
from project.catalogue.models import Author
from tests.support.deadlines import timer_state
from tests.support.services_rerun import expected_tests, rerun_on_services
from tests.support.settlement import (
    ANSWERED,
    BACKENDS,
    ORPHAN_OUTCOME,
    WITHIN,
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
    open_request,
    outcome_of,
    stored,
    winner_reply,
    written_name,
)

pytestmark = pytest.mark.django_db(transaction=True)


def write_tool(outcome: Outcome) -> str:
    return "held_write_deadline" if outcome.name == "deadline" else "held_write"


async def written(request: Request) -> bool:
    return await Author.objects.filter(name=written_name(request.gate.name)).aexists()


@by_name
async def test_a_write_settled_before_it_claims_its_answer_rolls_back(world: World, outcome: Outcome) -> None:
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1, write_tool(outcome))
    await a.runtime.writer.flush()  # its pending row (what an operator aborts)
    await compete(outcome, b, request)
    reply = winner_reply(outcome, request)
    assert a.deliveries(request) == [(outcome.state, reply)]

    request.gate.open()  # the handler goes on: its transaction creates the author, then claims
    await asyncio.wait_for(request.gate.finished.wait(), WITHIN)
    assert isinstance(request.gate.refused, RequestSettled)
    assert request.gate.refused.state == outcome.state
    assert not await written(request)
    await fence(a.runtime)
    assert a.deliveries(request) == [(outcome.state, reply)]
    assert await stored(request) == (outcome.state, outcome_of(reply))


@by_name
async def test_a_write_that_claimed_its_answer_is_answered_whatever_comes_later(
    world: World, outcome: Outcome
) -> None:
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1, write_tool(outcome), arguments={"claim": "early"})
    assert await written(request)  # committed; the handler now waits on its gate
    if world.backend == "database":  # recorded answered in the write's own transaction, before any batch
        record = await get_ledger().aget(request.record)
        assert record is not None
        assert record.state == ANSWERED
    else:
        await a.runtime.writer.flush()
    if (
        outcome.name == "deadline"
    ):  # disarmed by the claim: the timer is off the loop, though the handler runs
        assert request.gate.deadline is not None
        assert timer_state(request.gate.deadline) == {"expired": False, "armed": False}
        await fence(a.runtime)
    else:
        returned = await compete(outcome, b, request)
        if outcome.name == "abort":
            assert returned == []
    assert a.deliveries(request) == []  # nobody settled it meanwhile
    assert len(a.runtime.requests) == 1

    assert await handler_finishes(request) is True
    assert a.deliveries(request) == [(ANSWERED, request.result)]
    assert await stored(request) == (ANSWERED, {"result": True})
    assert await written(request)


async def test_a_worker_killed_after_the_commit_leaves_the_write_and_its_record(world: World) -> None:
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1, "held_write", arguments={"claim": "early"})
    assert await written(request)
    await dies(a, last_batch=False)  # no batch after the commit: only the transaction wrote its record
    await lease_runs_out(a)
    settled = await b.runtime.upkeep.settle_orphans(after_lease())
    if world.backend == "database":
        assert settled == 0
        assert await stored(request) == (ANSWERED, {"result": True})
    else:  # the cache cannot join the transaction: the crash lost the record (docs, "Write tools")
        assert settled == 0
        assert request.record.pk is None  # its pending row was still queued: nothing of it was stored
    assert await written(request)


async def test_a_claim_after_a_survivor_settled_the_request_rolls_back(world: World) -> None:
    """A outlived its lease (alive, but renewing nothing), a survivor settled its pending row -32000, then A's
    handler claims its answer: the database ledger's row says it is settled, the write rolls back and the
    client gets -32000. The cache ledger cannot tell within the transaction: the write commits and the
    client gets its result, while the record keeps the survivor's -32000 (the documented limit)."""
    a, b = world.a, world.b
    request = await open_request(a, world.session_id, 1, "held_write")
    await a.runtime.writer.flush()
    await lease_runs_out(a)
    assert await b.runtime.upkeep.settle_orphans(after_lease()) == 1
    assert await handler_finishes(request) is True  # settled by its own task, whatever its answer
    [(state, reply)] = a.deliveries(request)
    assert state == ANSWERED
    assert reply is not None
    if world.backend == "database":
        assert isinstance(request.gate.refused, RequestSettled)
        assert reply["error"]["code"] == CONNECTION_CLOSED
        assert not await written(request)
    else:
        assert reply == request.result
        assert await written(request)
    assert await stored(request) == (State.CLOSED.value, ORPHAN_OUTCOME)


def test_every_write_claim_on_postgresql_and_redis(tmp_path: Path) -> None:
    this = test_every_write_claim_on_postgresql_and_redis
    rerun_on_services(__file__, this, tmp_path, expected_tests(globals(), this, len(BACKENDS)))
