"""``LedgerWriter``: the ledger written behind the request path, in batches, on both backends.

The ledgers here are the real backends with two test hooks in ``write_batch``: it records what each batch
carried (to tell one final row from a pending row and its update), and it can fail like a store that is out
of reach (``OperationalError`` from the database, ``ConnectionError`` from the cache) or hold a batch until
the test lets it through.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.core.cache import caches
from django.db import OperationalError
from django.utils import timezone

from mcp_server.core.records import DuplicateRequest, Ledger, LedgerRecord, request_key
from mcp_server.core.states import State
from mcp_server.ledger.cache import CacheLedger
from mcp_server.ledger.database import DatabaseLedger
from mcp_server.ledger.writer import LedgerWriter

pytestmark = pytest.mark.django_db(transaction=True)

Batch = tuple[list[str], list[str]]


class Instrumented(Ledger):
    """``write_batch`` as the backend's, plus: a record of each batch, injected failures, an optional gate."""

    error: type[Exception] = OperationalError

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.batches: list[Batch] = []
        self.fail = 0
        self.written = 0
        self.wrote = threading.Condition()
        self.gate: threading.Event | None = None
        self.started = threading.Event()
        self.attempts: list[float] = []

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        self.attempts.append(time.monotonic())
        if self.fail:
            self.fail -= 1
            raise self.error("injected: the store is out of reach")
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        self.batches.append(([str(r.state) for r in inserts], [str(r.state) for r in updates]))
        refused = super().write_batch(inserts, updates)
        with self.wrote:
            self.written += 1
            self.wrote.notify_all()
        return refused

    async def until_written(self, batches: int) -> None:
        """Wait until ``batches`` batches have been written (by whatever flushed them)."""

        def wait() -> bool:
            with self.wrote:
                return self.wrote.wait_for(lambda: self.written >= batches, 5)

        assert await asyncio.to_thread(wait)


class InstrumentedDatabase(Instrumented, DatabaseLedger):
    error = OperationalError


class InstrumentedCache(Instrumented, CacheLedger):
    error = ConnectionError


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


def record(session: str | None, request_id: int | str) -> LedgerRecord:
    now = timezone.now()
    return LedgerRecord(
        session_id=session, request_key=request_key(request_id), method="tools/call", worker="w", created=now
    )


def settle(rec: LedgerRecord, state: str = State.ANSWERED) -> LedgerRecord:
    rec.state = state
    rec.outcome = {"result": True} if state == State.ANSWERED else None
    rec.settled_at = timezone.now()
    return rec


async def stored_state(ledger: Ledger, rec: LedgerRecord) -> str | None:
    assert rec.pk is not None, "never written"
    found = await ledger.aget(rec)
    return None if found is None else str(found.state)


async def pending_pks(ledger: Ledger) -> list[Any]:
    return [r.pk for r in await ledger.apending()]


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


# -- I11: faults are bounded ---------------------------------------------------------------------------------


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
    from mcp_server.ledger.writer import MAX_ATTEMPTS

    writer = LedgerWriter(refusing, interval=0.01)
    try:
        good = [record("s1", n) for n in range(3)]
        poison = record("s1", "poison")
        for rec in [good[0], poison, *good[1:]]:
            await writer.opened(rec)
        await writer.settled(settle(good[1]))

        async def dropped(count: int) -> None:
            async with asyncio.timeout(10):
                while writer.dropped < count or len(writer):  # noqa: ASYNC110 - the writer's loop retries
                    await asyncio.sleep(0.01)
            await writer.flush()

        await dropped(1)
        assert refusing.refusals == MAX_ATTEMPTS + 1  # the batch once, then the record alone, dropped
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
    from mcp_server.ledger.writer import MAX_ATTEMPTS

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
    from mcp_server.protocol.settlement import RequestTable

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

    async with asyncio.timeout(10):
        while not await settled():  # noqa: ASYNC110 - written by the writer's own loop
            await asyncio.sleep(0.01)
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

    async with asyncio.timeout(10):
        while not await written():  # noqa: ASYNC110 - the write lands in the writer's thread
            await asyncio.sleep(0.01)
    assert writer.held() == set()


async def test_held_names_the_settlements_still_to_write(ledger: Instrumented, new_writer: Any) -> None:
    writer: LedgerWriter = new_writer()
    long, short = record("s1", 1), record("s1", 2)
    await writer.opened(long)
    assert writer.oldest_unwritten() == long.created
    await writer.flush()
    assert writer.oldest_unwritten() is None
    await writer.opened(short)
    await writer.settled(settle(long))
    assert writer.held() == {long.pk}
    await writer.flush()
    assert writer.held() == set()
