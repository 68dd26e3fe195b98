"""A write's claim (``Context.claim_answer``) against the ledger batch that holds its request's pending row.

The handler's transaction holds the database's write lock (SQLite) when it claims; the batch being written
needs that lock. The claim must never wait for that batch (docs, "Writes and the guarantee"): here a real
handler thread holds a write transaction on the test database while the writer's batch with its record is in
flight, claims, and commits or rolls back; the batch must then land without one failure ("database is
locked"), and the request must have exactly one row. The writer's connection gets a short SQLite timeout, so
that a claim waiting for the batch would make the batch fail (rather than stall for 30 s).

The same tests run again on PostgreSQL in a child pytest (there no lock is shared, but the claim still never
waits, and the rows must be the same).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import caches
from django.db import OperationalError, connections, transaction
from django.utils import timezone

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.core.states import State
from mcp_server.core.writes import write_transaction
from mcp_server.models import LedgerEntry
from mcp_server.runtime.writer import LedgerWriter
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from project.catalogue.models import Author
from tests.support.services_rerun import ON_SERVICES, rerun_on_services

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 20.0
"""Longest wait for any event here (generous: the machine is shared)."""


class Counting(DatabaseLedger):
    """The database ledger, counting the batches that failed (the writer retries them)."""

    def __init__(self) -> None:
        super().__init__({})
        self.failures: list[str] = []

    def write_claimed(self, *args: Any) -> Any:
        try:
            return super().write_claimed(*args)
        except OperationalError as exc:
            self.failures.append(str(exc))
            raise


@pytest.fixture
def short_lock_timeout() -> Iterator[None]:
    """New SQLite connections (the writer's) wait at most 2 s for the write lock."""
    options = connections.settings["default"].setdefault("OPTIONS", {})
    saved = dict(options)
    if connections["default"].vendor == "sqlite":
        options["timeout"] = 2
    yield
    options.clear()
    options.update(saved)


@pytest.fixture
async def writer(short_lock_timeout: None) -> AsyncIterator[LedgerWriter]:
    made = LedgerWriter(Counting(), interval=60.0)  # the background loop sleeps: the test flushes
    yield made
    await made.aclose()


@pytest.fixture(params=["database", "cache"])
async def any_writer(request: pytest.FixtureRequest, short_lock_timeout: None) -> AsyncIterator[LedgerWriter]:
    caches["default"].clear()
    ledger = Counting() if request.param == "database" else CacheLedger({"RETENTION": 60})
    made = LedgerWriter(ledger, interval=60.0)
    yield made
    await made.aclose()


def new_record(request_id: int) -> LedgerRecord:
    return LedgerRecord(
        session_id=None,
        request_key=request_key(request_id),
        method="tools/call",
        worker="w",
        created=timezone.now(),
    )


def settle(record: LedgerRecord) -> LedgerRecord:
    record.state, record.outcome, record.settled_at = State.ANSWERED, {"result": True}, timezone.now()
    return record


class Handler(threading.Thread):
    """A write tool's thread: one write transaction that creates an author, waits until ``go`` (the batch is
    in flight by then), claims the answer as ``RequestClaim`` does (``adopt`` on the loop, then
    ``answer_within`` in the transaction), and commits (or rolls back)."""

    def __init__(self, writer: LedgerWriter, record: LedgerRecord, name: str, *, rollback: bool) -> None:
        super().__init__(daemon=True)
        self.writer, self.record, self.author, self.rollback = writer, record, name, rollback
        self.loop = asyncio.get_running_loop()
        self.locked, self.go = threading.Event(), threading.Event()
        self.events: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with write_transaction():
                Author.objects.create(name=self.author)
                self.locked.set()
                assert self.go.wait(WAIT)
                adopt = self.writer.adopt(self.record, "default")
                joined = asyncio.run_coroutine_threadsafe(adopt, self.loop).result(WAIT)
                assert joined == self.writer.ledger.joins("default")
                if joined:  # as RequestClaim.confirm: only a ledger that joins the transaction
                    assert self.writer.answer_within(self.record, "default")
                in_flight = id(self.record) in self.writer._writing
                self.events.append("claimed, batch " + ("in flight" if in_flight else "done"))
                transaction.set_rollback(self.rollback)
            self.events.append("rolled back" if self.rollback else "committed")
        except BaseException as exc:
            self.error = exc
        finally:
            connections.close_all()


async def claim_while_in_flight(
    writer: LedgerWriter, record: LedgerRecord, *, rollback: bool, in_flight: bool = True
) -> Handler:
    """Run a handler whose claim comes while the batch holding ``record`` is being written (or, not
    ``in_flight``, while the record is still queued: the batch starts after the handler is done)."""
    handler = Handler(writer, record, f"Author {record.request_key}", rollback=rollback)
    await writer.opened(record)
    handler.start()
    assert await asyncio.to_thread(handler.locked.wait, WAIT)  # its transaction holds the write lock
    if not in_flight:
        handler.go.set()
        await asyncio.to_thread(handler.join, WAIT)
    batch = asyncio.create_task(writer.flush())
    await asyncio.sleep(0)  # one loop turn: the batch takes its records and goes to the writer's thread
    if in_flight:
        assert id(record) in writer._writing
    handler.go.set()
    await asyncio.to_thread(handler.join, WAIT)
    assert handler.error is None, repr(handler.error)
    await asyncio.wait_for(batch, WAIT)
    await writer.settled(settle(record))
    await writer.flush()
    return handler


async def rows_of(record: LedgerRecord) -> list[tuple[str, Any]]:
    rows = LedgerEntry.objects.filter(request_key=record.request_key, session_id=None)
    return [(row.state, row.outcome) async for row in rows]


@pytest.mark.skipif(ON_SERVICES, reason="runs in the parent")
def test_claims_in_flight_on_postgresql(tmp_path: Path) -> None:
    rerun_on_services(__file__, test_claims_in_flight_on_postgresql, tmp_path, 6)


async def test_a_claim_never_waits_for_the_batch_that_holds_its_row(writer: LedgerWriter) -> None:
    """The handler claims and commits while the batch with its pending row is in flight; the batch lands
    afterwards without failing once, and the request has one row: answered, as the handler's transaction
    wrote it (the batch left the row to it, or the handler updated the row the batch had committed)."""
    record = new_record(1)
    handler = await claim_while_in_flight(writer, record, rollback=False)
    ledger = writer.ledger
    assert isinstance(ledger, Counting)
    assert ledger.failures == []
    if connections["default"].vendor == "sqlite":  # the batch waits for the handler's lock, not the reverse
        assert handler.events == ["claimed, batch in flight", "committed"]
    assert await rows_of(record) == [(State.ANSWERED, {"result": True})]
    assert await Author.objects.filter(name=f"Author {record.request_key}").aexists()
    assert writer.unwritten_sessions() == set()
    assert len(writer) == 0


@pytest.mark.parametrize("in_flight", [True, False], ids=["in-flight", "queued"])
async def test_a_write_that_rolls_back_after_its_claim_leaves_one_row(
    any_writer: LedgerWriter, in_flight: bool
) -> None:
    """The handler claims while its record's batch is in flight (or while it is still queued), then its
    transaction rolls back: no author, and exactly one row for the request, answered (the handler's result
    is its answer), on both ledgers."""
    record = new_record(2)
    await claim_while_in_flight(any_writer, record, rollback=True, in_flight=in_flight)
    assert not await Author.objects.filter(name=f"Author {record.request_key}").aexists()
    ledger = any_writer.ledger
    if isinstance(ledger, Counting):
        assert ledger.failures == []
        assert await rows_of(record) == [(State.ANSWERED, {"result": True})]
        return
    stored = await ledger.aget(record)  # the cache ledger: the row the writer wrote, final
    assert stored is not None
    assert (stored.state, stored.outcome) == (State.ANSWERED, {"result": True})
    assert await ledger.apending() == []


async def test_a_batch_forgets_the_rows_it_landed(writer: LedgerWriter) -> None:
    """Records are known by ``id()``, which Python reuses once a record is gone: a batch must not leave its
    landed pks behind, or a later record with a reused id would claim a stranger's (answered) row and be
    told "settled by another worker" (seen under 200 concurrent writes)."""
    records = [new_record(10 + n) for n in range(3)]
    for record in records:
        await writer.opened(record)
    await writer.flush()
    assert all(record.pk is not None for record in records)
    assert writer._flight._landed == {}
