"""``LedgerWriter`` under faults (I11): a record the store refuses for good is dropped without holding back
the others, a store that cannot answer is waited for without dropping anything, and a write-through that
outlives ``STORE_TIMEOUT`` answers the request with an error and is followed up once the store answers.

The ledgers are the instrumented real backends of ``tests/support/writer.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.core.cache import caches

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.runtime.writer import LedgerWriter
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from tests.support.wait import wait_for
from tests.support.writer import (
    Instrumented,
    InstrumentedCache,
    InstrumentedDatabase,
    pending_pks,
    record,
    settle,
    stored_state,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["database", "cache"])
def ledger(request: pytest.FixtureRequest) -> Instrumented:
    caches["default"].clear()
    return InstrumentedDatabase({}) if request.param == "database" else InstrumentedCache({"RETENTION": 60})


@pytest.fixture
async def writers(ledger: Instrumented) -> AsyncIterator[list[LedgerWriter]]:
    made: list[LedgerWriter] = []
    yield made
    if ledger.gate is not None:
        ledger.gate.set()
    for writer in made:
        await writer.aclose()


@pytest.fixture
def new_writer(ledger: Instrumented, writers: list[LedgerWriter]) -> Any:
    def make(interval: float = 60.0) -> LedgerWriter:
        writer = LedgerWriter(ledger, interval=interval)
        writers.append(writer)
        return writer

    return make


class Refusing(Instrumented):
    """Refuses, for good, every batch that carries a record of the request key ``poison`` (a value the store
    cannot hold), whatever else the batch carries."""

    poison = request_key("poison")
    refusals = 0

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        if any(r.request_key == self.poison for r in [*inserts, *updates]):
            self.refusals += 1
            raise ValueError("injected: a value this store cannot hold")
        return super().write_batch(inserts, updates)


class RefusingDatabase(Refusing, DatabaseLedger):
    pass


class RefusingCache(Refusing, CacheLedger):
    pass


@pytest.fixture(params=["database", "cache"])
def refusing(request: pytest.FixtureRequest) -> Refusing:
    caches["default"].clear()
    return RefusingDatabase({}) if request.param == "database" else RefusingCache({"RETENTION": 60})


async def test_a_record_the_store_refuses_for_good_does_not_block_the_others(refusing: Refusing) -> None:
    from mcp_server.runtime.writer import MAX_ATTEMPTS

    writer = LedgerWriter(refusing, interval=0.01)
    try:
        good = [record("s1", n) for n in range(3)]
        poison = record("s1", "poison")
        for rec in [good[0], poison, *good[1:]]:
            await writer.opened(rec)
        await writer.settled(settle(good[1]))

        async def dropped(count: int) -> None:

            async def done() -> bool:  # the writer's loop retries
                return writer.dropped >= count and not len(writer)

            await wait_for(done, f"{count} dropped, nothing left")
            await writer.flush()

        await dropped(1)
        # The batch once, the record alone and again made storable, then alone until dropped.
        assert refusing.refusals == MAX_ATTEMPTS + 2
        assert sorted(await pending_pks(refusing)) == sorted([good[0].pk, good[2].pk])
        assert await stored_state(refusing, good[1]) == "answered"
        assert poison.pk is None  # never written
        await writer.settled(settle(poison))  # settled later: tried again as one final row, refused again
        await writer.settled(settle(good[0]))
        await writer.settled(settle(good[2]))
        await dropped(2)
        assert await pending_pks(refusing) == []
    finally:
        await writer.aclose()


async def test_a_store_that_cannot_answer_is_retried_without_dropping(
    ledger: Instrumented, new_writer: Any
) -> None:
    """Unreachable is not refused: the batch is kept whole, however many times it fails."""
    from mcp_server.runtime.writer import MAX_ATTEMPTS

    writer: LedgerWriter = new_writer()
    recs = [record("s1", n) for n in range(2)]
    for rec in recs:
        await writer.opened(rec)
    ledger.fail = MAX_ATTEMPTS + 2
    for _ in range(MAX_ATTEMPTS + 2):
        with pytest.raises(ledger.error):
            await writer.flush()
    assert len(writer) == 2
    await writer.flush()
    assert writer.dropped == 0
    assert sorted(await pending_pks(ledger)) == sorted(r.pk for r in recs)


async def test_write_through_gives_up_after_its_timeout_and_settles_the_row_once_it_lands(
    ledger: Instrumented, writers: list[LedgerWriter]
) -> None:
    """I11: an open written through waits at most ``timeout``; the table answers the request with the store's
    error, and the pending row the write leaves once the store answers is settled behind the request path."""
    from mcp_server.core.stores import StoreUnavailable
    from mcp_server.runtime.requests import RequestTable

    writer = LedgerWriter(ledger, interval=0, timeout=0.2)
    writers.append(writer)
    table = RequestTable(writer, worker_id="w")
    ledger.gate = threading.Event()  # the store takes the write and does not answer
    started = time.monotonic()

    async def deliver(entry: Any, response: dict[str, Any] | None) -> None:
        raise AssertionError("never opened: nothing to deliver")

    with pytest.raises(StoreUnavailable, match=r"the ledger did not answer within 0\.2s"):
        await table.open("s1", 1, "tools/call", deliver)
    assert time.monotonic() - started < 2
    assert len(table) == 0
    (doubt,) = writer._in_doubt.values()
    assert doubt.state == "answered"
    assert doubt.outcome == {
        "error": {"code": -32603, "message": "Store unavailable: the ledger did not answer within 0.2s"}
    }
    assert writer.oldest_unwritten() == doubt.created
    ledger.gate.set()  # the store answers: the pending row lands, then its settlement

    async def settled() -> bool:
        return doubt.pk is not None and await stored_state(ledger, doubt) == "answered"

    await wait_for(settled)  # written by the writer's own loop
    assert await pending_pks(ledger) == []
    assert writer.oldest_unwritten() is None
    ledger.gate = None
    entry = await table.open("s1", 1, "tools/call", deliver)  # the id is free again
    assert await pending_pks(ledger) == [entry.record.pk]


async def test_a_settlement_written_through_that_times_out_is_written_once_the_store_answers(
    ledger: Instrumented, writers: list[LedgerWriter]
) -> None:
    writer = LedgerWriter(ledger, interval=0, timeout=0.2)
    writers.append(writer)
    rec = record("s1", 1)
    await writer.opened(rec)
    assert writer.held() == set()
    ledger.gate = threading.Event()
    await writer.settled(settle(rec))  # gives up after 0.2 s; never raises: the reply went out
    assert writer.held() == {rec.pk}  # its lease is renewed until the settlement is written
    ledger.gate.set()

    async def written() -> bool:
        return await stored_state(ledger, rec) == "answered"

    await wait_for(written)  # the write lands in the writer's thread
    assert writer.held() == set()


async def test_held_names_the_settlements_still_to_write(ledger: Instrumented, new_writer: Any) -> None:
    writer: LedgerWriter = new_writer()
    long, short = record("s1", 1), record("s1", 2)
    await writer.opened(long)
    assert writer.oldest_unwritten() == long.created
    assert writer.unwritten_sessions() == {"s1"}
    await writer.flush()
    assert writer.oldest_unwritten() is None
    await writer.opened(short)
    await writer.settled(settle(long))
    assert writer.held() == {long.pk}
    assert writer.unwritten_sessions() == {"s1"}
    await writer.flush()
    assert writer.held() == set()
    assert writer.unwritten_sessions() == set()
