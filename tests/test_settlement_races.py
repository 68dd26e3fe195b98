"""Every settlement race, in process: worker A holds a request while worker B ends it, on one real ledger.

For each way B can end the request (cancel, session end, deadline, operator abort, orphan of a dead
worker), and each order: B wins the ledger before A's handler finishes (B's channel message to A arriving
after, before, or during A's own settle), A's handler wins first, or both at once. In every case A delivers
exactly once, and what it delivers is what the ledger says happened. Also: B's late message when the id was
reused meanwhile, a winner that left no record, and the -32600 refusal of an id pending in the session.

Backends: ``DatabaseLedger`` on the test database and ``CacheLedger`` on local memory, in this process; then
the same tests again in a child pytest whose settings point at a fresh PostgreSQL database (``DATABASE_URL``)
and at Redis (``REDIS_URL``: the cache and the channel layer), see
:func:`test_every_race_on_postgresql_and_redis`. A child process, rather than swapping Django's
``connections`` here, because the async ORM runs in a thread of its own with its own connection: a child
configured like a production worker gets PostgreSQL everywhere, and pytest-django creates, flushes and
drops its test database as it does for SQLite.
"""

from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.cache import caches
from django.db import connection, connections

from mcp_server.conf import mcp_settings
from mcp_server.ledger import State
from mcp_server.protocol.errors import INVALID_REQUEST, JSONRPCError
from mcp_server.protocol.inflight import InFlightTable
from tests import live
from tests.settlement_helpers import (
    OUTCOMES,
    Outcome,
    WorkerA,
    handler_finishes,
    is_winner_reply,
    messages_arrive,
    open_request,
    pending_record,
    remote_half_settles,
    remote_settles,
    stale_remote_settles,
    stop,
    stored_outcome,
)

pytestmark = pytest.mark.django_db(transaction=True)

ON_SERVICES = os.environ.get("MCP_RACES_ON_SERVICES") == "1"
"""Set in the child pytest: the ledger on PostgreSQL / Redis, the channel layer on Redis."""
BACKENDS = {
    "database": "mcp_server.ledger.database.DatabaseLedger",
    "cache": "mcp_server.ledger.cache.CacheLedger",
}
ANSWERED = State.ANSWERED.value
ROUNDS = 16
SKEWS: list[int | float] = [0, 1, 4, 16, 64, 256, 1024, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 2, 8, 32]
"""How late A's handler starts in each round: loop turns (int) or seconds (float, for a networked ledger).

They only vary the interleaving: every assertion holds whoever wins, and the rounds end on an event (each side
has won one), not on time."""
by_name = pytest.mark.parametrize("outcome", OUTCOMES, ids=[o.name for o in OUTCOMES])


@dataclass
class World:
    session_id: str
    a: WorkerA
    b: InFlightTable


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest, settings: Any) -> str:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "LEDGER_BACKEND": BACKENDS[request.param]}
    settings.CHANNEL_LAYERS = copy.deepcopy(settings.CHANNEL_LAYERS)  # a fresh layer, in this test's loop
    cache = caches[mcp_settings.LEDGER_CACHE_ALIAS]
    if ON_SERVICES:  # prove the child really runs on the services (its keys are under its own prefix)
        assert connection.vendor == "postgresql"
        assert type(cache).__name__ == "RedisCache"
        assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    else:
        assert type(cache).__name__ == "LocMemCache"
        cache.clear()
    return str(request.param)


@pytest.fixture
async def world(backend: str) -> AsyncIterator[World]:
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    assert layer is not None
    a = WorkerA(InFlightTable(), layer, await layer.new_channel())
    world = World(f"s-races-{uuid.uuid4().hex}", a, InFlightTable())
    yield world
    await stop(a.table)
    await stop(world.b)
    if hasattr(layer, "close_pools"):
        await layer.close_pools()
    if backend == "database":  # the ORM thread's connection, so that PostgreSQL can drop the test database
        await sync_to_async(connections.close_all)()


def delivered_once(a: WorkerA, outcome: Outcome, request_id: Any) -> None:
    """A delivered exactly one reply for that id, the winner's: never the handler's result."""
    deliveries = a.deliveries(request_id)
    assert len(deliveries) == 1, deliveries
    state, response = deliveries[0]
    assert state == outcome.state
    assert is_winner_reply(outcome, request_id, response), response


async def ledger_says(outcome: Outcome, request: Any) -> None:
    state, stored = await stored_outcome(request)
    assert state == outcome.state
    if outcome.code is None:
        assert stored is None
    else:
        assert stored is not None
        assert stored["error"] == {"code": outcome.code, "message": outcome.message}


# -- 1. B wins the ledger; A's handler finishes before B's message arrives -------------------------------


@by_name
async def test_remote_settles_first_then_handler_finishes(world: World, outcome: Outcome) -> None:
    a = world.a
    request = await open_request(a, world.session_id, 1, outcome)
    assert await remote_settles(world.b, outcome, request) == 1
    assert a.delivered == []  # B's message is still on its way
    assert await handler_finishes(request) is False  # A loses the compare-and-set ...
    delivered_once(a, outcome, request.id)  # ... and delivers the winner's reply, not its own result
    assert len(a.table) == 0
    assert await messages_arrive(a) == 1  # B's late message
    delivered_once(a, outcome, request.id)  # nothing more
    await ledger_says(outcome, request)


# -- 1b. B wins and its message arrives first (the usual order); the handler's result comes too late -------


@by_name
async def test_remote_settles_and_signals_then_handler_finishes(world: World, outcome: Outcome) -> None:
    a = world.a
    request = await open_request(a, world.session_id, 1, outcome)
    assert await remote_settles(world.b, outcome, request) == 1
    assert await messages_arrive(a) == 1
    delivered_once(a, outcome, request.id)
    assert request.entry.task is not None
    if outcome.state != State.TIMED_OUT.value:  # B's settlement stops the handler (a deadline has already)
        await asyncio.gather(request.entry.task, return_exceptions=True)
        assert request.entry.task.cancelled()
    else:
        assert await handler_finishes(request) is False
    delivered_once(a, outcome, request.id)
    assert len(a.table) == 0
    assert await messages_arrive(a) == 0
    await ledger_says(outcome, request)


# -- 1c. B wins; its message arrives while A's handler is inside its own (losing) settle --------------------


@by_name
async def test_remote_message_arrives_while_handler_settles(world: World, outcome: Outcome) -> None:
    a = world.a
    request = await open_request(a, world.session_id, 1, outcome)
    assert await remote_settles(world.b, outcome, request) == 1
    request.release.set()
    await asyncio.sleep(0)  # the handler runs first (FIFO) and up to its first ledger call, where it waits
    assert request.entry.task is not None
    assert not request.entry.task.done()
    assert await messages_arrive(a) == 1  # B's message, while A's settle is in flight
    assert await handler_finishes(request) is False
    delivered_once(a, outcome, request.id)
    assert len(a.table) == 0
    assert await messages_arrive(a) == 0
    await ledger_says(outcome, request)


# -- 1d. B's late message must not touch a new request that reuses the id ----------------------------------


@by_name
async def test_late_message_never_settles_a_reused_id(world: World, outcome: Outcome) -> None:
    a = world.a
    first = await open_request(a, world.session_id, 1, outcome)
    assert await remote_settles(world.b, outcome, first) == 1
    assert await handler_finishes(first) is False
    delivered_once(a, outcome, 1)  # the client has its reply, and may use id 1 again
    second = await open_request(a, world.session_id, 1, None)
    assert await messages_arrive(a) == 1  # B's late message, about the first request
    assert a.deliveries(1)[1:] == []
    assert await handler_finishes(second) is True
    assert a.deliveries(1)[1:] == [(ANSWERED, second.result)]
    assert await stored_outcome(second) == (ANSWERED, {"result": True})
    assert len(a.table) == 0


# -- 1e. Cache ledger: B's compare-and-set landed, its record not yet written (or B died in between) -------


@by_name
@pytest.mark.parametrize("backend", ["cache"], indirect=True)
async def test_loser_answers_when_the_winner_left_no_record(world: World, outcome: Outcome) -> None:
    a = world.a
    request = await open_request(a, world.session_id, 1, outcome)
    await remote_half_settles(outcome, request)
    assert await handler_finishes(request) is False
    delivered_once(a, outcome, 1)  # the state's own error code (B's wording was never recorded)
    assert len(a.table) == 0
    assert await messages_arrive(a) == 0
    assert (await stored_outcome(request))[0] == outcome.state


# -- 2. A's handler finishes first; B's attempt, fresh or from a stale read, loses -------------------------


@by_name
async def test_handler_finishes_first_then_remote_loses(world: World, outcome: Outcome) -> None:
    a = world.a
    request = await open_request(a, world.session_id, 1, outcome)
    stale = await pending_record(request)  # what B read while the request was pending
    assert stale is not None
    assert await handler_finishes(request) is True
    assert a.deliveries(request.id) == [(ANSWERED, request.result)]
    assert await remote_settles(world.b, outcome, request) == 0
    assert await stale_remote_settles(world.b, outcome, stale) is False
    assert await messages_arrive(a) == 0  # B sent nothing
    assert a.deliveries(request.id) == [(ANSWERED, request.result)]
    assert await stored_outcome(request) == (ANSWERED, {"result": True})
    assert len(a.table) == 0


# -- 3. Both at once, many rounds: one winner, one delivery, and the ledger agrees -------------------------


@by_name
async def test_concurrent_settlement_has_one_winner(world: World, outcome: Outcome) -> None:
    a, b = world.a, world.b
    winners: set[str] = set()
    n = 0
    while n < ROUNDS or len(winners) < 2:  # at least ROUNDS, and until each side has won a round
        assert n < 20 * ROUNDS, f"after {n} rounds only {winners} ever won"
        request = await open_request(a, world.session_id, n, outcome)

        async def side_a(request: Any = request, skew: float = SKEWS[n % len(SKEWS)]) -> bool:
            if isinstance(skew, float):
                await asyncio.sleep(skew)
            for _ in range(skew if isinstance(skew, int) else 0):
                await asyncio.sleep(0)
            return await handler_finishes(request)

        async def side_b(request: Any = request) -> tuple[int, int]:
            won = await remote_settles(b, outcome, request)
            return won, await messages_arrive(a)  # A takes B's message at once, maybe mid-settle

        a_won, (b_won, arrived) = await asyncio.gather(side_a(), side_b())
        assert (a_won, b_won) in {(True, 0), (False, 1)}, (n, a_won, b_won)
        assert arrived == b_won  # only a winner tells A
        assert await messages_arrive(a) == 0
        winners.add("a" if a_won else "b")
        if a_won:
            assert a.deliveries(n) == [(ANSWERED, request.result)]
            assert await stored_outcome(request) == (ANSWERED, {"result": True})
        else:
            delivered_once(a, outcome, n)
            await ledger_says(outcome, request)
        n += 1
    assert len(a.table) == 0
    assert len(a.delivered) == n


# -- duplicates: -32600 while pending, by either check alone; free again once settled ---------------------


async def test_duplicate_id_is_refused_by_the_ledger_alone(world: World) -> None:
    a, b = world.a, world.b
    held = await open_request(a, world.session_id, 7, None)

    b_delivered: list[dict[str, Any] | None] = []

    async def deliver(entry: Any, response: dict[str, Any] | None) -> None:
        b_delivered.append(response)

    with pytest.raises(JSONRPCError) as refused:  # B's table has never seen id 7: only the ledger knows
        await b.open(world.session_id, 7, "tools/call", deliver)
    assert refused.value.code == INVALID_REQUEST
    assert len(b) == 0
    assert await handler_finishes(held) is True
    again = await b.open(world.session_id, 7, "tools/call", deliver)  # free once settled
    assert await b.settle(again, State.CANCELLED.value, None) is True
    assert b_delivered == [None]
    assert a.deliveries(7) == [(ANSWERED, held.result)]


async def test_duplicate_id_is_refused_by_the_holder_alone(world: World) -> None:
    a = world.a
    abort = next(o for o in OUTCOMES if o.name == "abort")
    held = await open_request(a, world.session_id, 7, abort)
    assert await remote_settles(world.b, abort, held) == 1  # the ledger is free, A still holds the exchange
    assert await pending_record(held) is None
    with pytest.raises(JSONRPCError) as refused:
        await open_request(a, world.session_id, 7, None)
    assert refused.value.code == INVALID_REQUEST
    assert a.delivered == []
    assert await messages_arrive(a) == 1  # A learns the outcome and delivers it
    delivered_once(a, abort, 7)
    again = await open_request(a, world.session_id, 7, None)  # free once A has delivered
    assert await handler_finishes(again) is True
    assert a.deliveries(7)[1:] == [(ANSWERED, again.result)]
    assert len(a.table) == 0


# -- the same tests on PostgreSQL and Redis -----------------------------------------------------------------


def expected_children() -> int:
    """How many tests the child runs: each test of this module, once per value of each parametrize."""
    total = 0
    for name, fn in globals().items():
        if name.startswith("test_") and fn is not test_every_race_on_postgresql_and_redis:
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
            axes = {m.args[0]: len(m.args[1]) for m in marks}
            total += axes.get("outcome", 1) * axes.get("backend", len(BACKENDS))
    return total


def test_every_race_on_postgresql_and_redis(tmp_path: Path) -> None:
    assert not ON_SERVICES, "the child deselects this test"
    problem = live.services_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    report, this = tmp_path / "child.xml", test_every_race_on_postgresql_and_redis
    module = str(Path(__file__).relative_to(live.ROOT))
    with live.postgres_database() as database, live.redis_namespace() as prefix:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        env.update(
            DATABASE_URL=database,
            REDIS_URL=live.REDIS_URL,
            MCP_TEST_REDIS_PREFIX=prefix,
            MCP_RACES_ON_SERVICES="1",
            PYTHONPATH=str(live.ROOT),
        )
        child = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", module, "-q", "-p", "no:cacheprovider"),
                *(f"--junitxml={report}", f"--deselect={module}::{this.__name__}"),
            ],
            cwd=live.ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    output = child.stdout[-20000:] + child.stderr[-5000:]
    assert child.returncode == 0, output
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None, output
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": expected_children(), "failures": 0, "errors": 0, "skipped": 0}, output
