"""``LedgerWriter``: the ledger written behind the request path, in batches, on both backends.

The ledgers here are the real backends with two test hooks in ``write_batch``: it records what each batch
carried (to tell one final row from a pending row and its update), and it can fail like a store that is out
of reach (``OperationalError`` from the database, ``ConnectionError`` from the cache) or hold a batch until
the test lets it through.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.core.cache import caches

from mcp_server.core.records import DuplicateRequest, LedgerRecord, request_key
from mcp_server.core.states import State
from mcp_server.runtime.writer import LedgerWriter
from mcp_server.stores.ledger.cache import CacheLedger
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
    """Writers made by the tests (closed at the end)."""
    made: list[LedgerWriter] = []
    yield made
    if ledger.gate is not None:
        ledger.gate.set()
    for writer in made:
        await writer.aclose()


@pytest.fixture
def new_writer(ledger: Instrumented, writers: list[LedgerWriter]) -> Any:
    def make(interval: float = 60.0, on_refused: Any = None) -> LedgerWriter:
        # interval 60: the background loop stays asleep, the test flushes; 0 writes through.
        writer = LedgerWriter(ledger, interval=interval, on_refused=on_refused)
        writers.append(writer)
        return writer

    return make


async def test_settled_before_the_flush_is_one_final_row(ledger: Instrumented, new_writer: Any) -> None:
    writer: LedgerWriter = new_writer()
    rec = record("s1", 1)
    await writer.opened(rec)
    await writer.settled(settle(rec))
    assert len(writer) == 1
    await writer.flush()
    assert ledger.batches == [(["answered"], [])]  # no pending row was ever written
    assert len(writer) == 0
    assert await stored_state(ledger, rec) == "answered"
    assert await pending_pks(ledger) == []


async def test_a_long_request_is_a_pending_row_then_its_update(ledger: Instrumented, new_writer: Any) -> None:
    writer: LedgerWriter = new_writer()
    rec = record("s1", 1)
    await writer.opened(rec)
    await writer.flush()
    assert await pending_pks(ledger) == [rec.pk]
    await writer.settled(settle(rec, State.CANCELLED))
    await writer.flush()
    assert ledger.batches == [(["pending"], []), ([], ["cancelled"])]
    assert await stored_state(ledger, rec) == "cancelled"
    assert await pending_pks(ledger) == []
    await writer.flush()  # nothing queued: no empty batch
    assert len(ledger.batches) == 2


async def test_flush_returns_only_once_written(ledger: Instrumented, new_writer: Any) -> None:
    writer: LedgerWriter = new_writer()
    ledger.gate = threading.Event()
    await writer.opened(record("s1", 1))
    first = asyncio.create_task(writer.flush())
    assert await asyncio.to_thread(ledger.started.wait, 10)  # the batch is being written, held at the gate
    second = asyncio.create_task(writer.flush())  # nothing left to take, but what was taken is not written
    seen: list[int] = []
    second.add_done_callback(lambda _: seen.append(ledger.written))
    await asyncio.sleep(0)  # one loop turn: ``second`` runs its first step while the write is held
    ledger.gate.set()
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert seen == [1]


async def test_a_claim_adopts_a_queued_record_and_never_waits_for_one_being_written(
    ledger: Instrumented, new_writer: Any
) -> None:
    """``adopt`` (a write claiming its answer, ``Context.claim_answer``): the database ledger takes a record
    still queued out of the queue (the write's transaction inserts it), and returns at once for one whose
    batch is being written (the handler's thread decides, see tests/ledger/test_claim_in_flight.py); the
    cache ledger cannot join a transaction."""
    writer: LedgerWriter = new_writer()
    queued, flushing = record("s1", 1), record("s1", 2)
    await writer.opened(queued)
    if isinstance(ledger, CacheLedger):
        assert await writer.adopt(queued, "default") is False
        assert len(writer) == 1  # left in the queue, written behind as usual
        return
    assert await writer.adopt(queued, "default") is True
    assert len(writer) == 0  # out of the queue: the write's transaction inserts it
    assert writer.unwritten_sessions() == {"s1"}  # the sweep keeps its session meanwhile

    ledger.gate = threading.Event()
    await writer.opened(flushing)
    batch = asyncio.create_task(writer.flush())
    assert await asyncio.to_thread(ledger.started.wait, 10)  # its batch is being written, held at the gate
    assert await asyncio.wait_for(writer.adopt(flushing, "default"), 10) is True  # while the batch is held
    assert writer._adopted[id(flushing)] == (flushing, None)  # decided in the handler's thread
    ledger.gate.set()
    await batch
    assert await writer.adopt(record("s1", 3), "other") is False  # only the ledger's own database joins


async def test_write_through(ledger: Instrumented, new_writer: Any) -> None:
    writer: LedgerWriter = new_writer(interval=0)
    rec = record("s1", 1)
    await writer.opened(rec)
    assert len(writer) == 0
    found = await ledger.aget_pending("s1", request_key(1))  # at once, no flush
    assert found is not None
    assert found.pk == rec.pk
    with pytest.raises(DuplicateRequest):
        await writer.opened(record("s1", 1))
    await writer.opened(record("s1", "1"))
    await writer.opened(record(None, 1))
    await writer.opened(record(None, 1))  # stateless ids never collide
    await writer.settled(settle(rec))
    assert await stored_state(ledger, rec) == "answered"
    await writer.opened(record("s1", 1))  # free again
    assert len(await pending_pks(ledger)) == 4


async def test_a_pending_duplicate_found_at_flush_is_refused(ledger: Instrumented, new_writer: Any) -> None:
    refused: list[LedgerRecord] = []

    async def on_refused(rec: LedgerRecord) -> None:
        refused.append(rec)

    here: LedgerWriter = new_writer()
    there: LedgerWriter = new_writer(on_refused=on_refused)  # another worker, same ledger
    held = record("s1", 7)
    await here.opened(held)
    await here.flush()
    late = record("s1", 7)
    other = record("s1", 8)
    await there.opened(late)
    await there.opened(other)
    await there.flush()
    assert refused == [late]
    assert late.pk is None
    assert sorted(await pending_pks(ledger)) == sorted([held.pk, other.pk])
    await there.settled(settle(late))  # answered -32600 by the runtime: recorded as one final row
    await there.flush()
    assert await stored_state(ledger, late) == "answered"
    assert late.pk != held.pk
    for writer, rec in ((here, held), (there, other)):
        await writer.settled(settle(rec))
        await writer.flush()
    assert await pending_pks(ledger) == []
    assert refused == [late]


async def test_a_duplicate_settled_while_it_was_being_refused(ledger: Instrumented, new_writer: Any) -> None:
    refused: list[LedgerRecord] = []

    async def on_refused(rec: LedgerRecord) -> None:
        refused.append(rec)

    here: LedgerWriter = new_writer()
    there: LedgerWriter = new_writer(on_refused=on_refused)
    held = record("s1", 7)
    await here.opened(held)
    await here.flush()
    late = record("s1", 7)
    await there.opened(late)
    ledger.gate = threading.Event()
    flushing = asyncio.create_task(there.flush())
    assert await asyncio.to_thread(ledger.started.wait, 10)
    await there.settled(settle(late, State.CANCELLED))  # settled while its pending row is in flight
    ledger.gate.set()
    await asyncio.wait_for(flushing, 10)
    assert refused == []  # no longer pending: nothing to refuse
    assert len(there) == 1
    await there.flush()
    assert len(there) == 0
    assert await stored_state(ledger, late) == "cancelled"
    assert await pending_pks(ledger) == [held.pk]


async def test_settled_and_reused_in_the_same_batch_do_not_conflict(
    ledger: Instrumented, new_writer: Any
) -> None:
    refused: list[LedgerRecord] = []

    async def on_refused(rec: LedgerRecord) -> None:
        refused.append(rec)

    writer: LedgerWriter = new_writer(on_refused=on_refused)
    first = record("s1", 1)
    await writer.opened(first)
    await writer.flush()
    await writer.settled(settle(first))
    reused = record("s1", 1)
    await writer.opened(reused)
    await writer.flush()
    assert ledger.batches[-1] == (["pending"], ["answered"])  # one batch carried both
    assert refused == []
    assert await stored_state(ledger, first) == "answered"
    assert await pending_pks(ledger) == [reused.pk]


@pytest.mark.parametrize("written_before", [False, True], ids=["final-row", "update"])
async def test_a_failed_store_keeps_the_batch_queued(
    ledger: Instrumented, new_writer: Any, written_before: bool
) -> None:
    writer: LedgerWriter = new_writer()
    rec = record("s1", 1)
    await writer.opened(rec)
    if written_before:
        await writer.flush()
    await writer.settled(settle(rec))
    ledger.fail = 1
    with pytest.raises(ledger.error):
        await writer.flush()
    assert len(writer) == 1
    assert await pending_pks(ledger) == ([rec.pk] if written_before else [])
    await writer.flush()  # the store answers again
    assert len(writer) == 0
    assert await stored_state(ledger, rec) == "answered"
    assert await pending_pks(ledger) == []


async def test_settled_records_are_handed_as_they_are_pending_ones_as_copies(
    ledger: Instrumented, new_writer: Any
) -> None:
    """Nothing changes a settled record, and both backends change nothing of a record but its pk: the
    writer's thread gets the record itself (no copy made on the event loop). A pending one may settle while
    its batch is written: that thread gets a copy."""
    assert ledger.sets_only_pk
    writer: LedgerWriter = new_writer()
    done, running, later = record("s1", 1), record("s1", 2), record("s1", 3)
    for rec in (done, running, later):
        await writer.opened(rec)
    await writer.settled(settle(done))
    await writer.flush()
    inserts, _updates = ledger.handed[-1]
    assert id(done) in inserts
    assert id(running) not in inserts
    assert id(later) not in inserts
    assert done.pk is not None
    assert running.pk is not None
    await writer.settled(settle(running))
    await writer.flush()
    assert ledger.handed[-1] == ([], [id(running)])
    assert await stored_state(ledger, done) == "answered"
    assert await stored_state(ledger, running) == "answered"
    assert await pending_pks(ledger) == [later.pk]


async def test_a_write_that_fails_after_its_rows_leaves_no_pk_behind(
    ledger: Instrumented, new_writer: Any
) -> None:
    """A settled record handed as it is gets its pk during the write; a write that fails before its commit
    takes that pk back, and the record is written again, once."""
    writer: LedgerWriter = new_writer()
    rec = record("s1", 1)
    await writer.opened(rec)
    await writer.settled(settle(rec))
    ledger.fail_after = 1
    with pytest.raises(ledger.error):
        await writer.flush()
    assert rec.pk is None
    assert len(writer) == 1
    await writer.flush()
    assert rec.pk is not None
    assert await stored_state(ledger, rec) == "answered"
    if isinstance(ledger, InstrumentedDatabase):  # (the cache keeps what it was sent before the failure)
        from mcp_server.models import LedgerEntry

        assert await LedgerEntry.objects.filter(request_key=rec.request_key).acount() == 1


async def test_a_site_ledger_that_changes_records_is_always_handed_copies(
    ledger: Instrumented, new_writer: Any
) -> None:
    ledger.sets_only_pk = False
    writer: LedgerWriter = new_writer()
    rec = record("s1", 1)
    await writer.opened(rec)
    await writer.settled(settle(rec))
    await writer.flush()
    assert ledger.handed[-1][0]
    assert id(rec) not in ledger.handed[-1][0]
    assert await stored_state(ledger, rec) == "answered"


async def test_the_background_loop_retries_until_the_ledger_converges(
    ledger: Instrumented, new_writer: Any
) -> None:
    writer: LedgerWriter = new_writer(interval=0.01)
    ledger.fail = 3
    long = record("s1", 1)
    await writer.opened(long)
    short = record("s1", 2)
    await writer.opened(short)
    await writer.settled(settle(short))
    await ledger.until_written(1)  # after three failures (backoff 0.02 + 0.04 + 0.08 s)
    assert ledger.fail == 0
    gaps = [later - earlier for earlier, later in zip(ledger.attempts, ledger.attempts[1:], strict=False)]
    assert gaps[2] >= 0.08, f"the backoff doubles after each failure: {gaps}"
    assert [r.request_key for r in await ledger.apending()] == [request_key(1)]
    await writer.settled(settle(long, State.CLOSED))
    await ledger.until_written(2)
    assert len(writer) == 0
    assert await stored_state(ledger, long) == "closed"
    assert await stored_state(ledger, short) == "answered"
    assert await pending_pks(ledger) == []
    assert writer.failures == 0
