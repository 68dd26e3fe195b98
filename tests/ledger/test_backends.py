"""The ledger backends, in process: compare-and-set settlement, duplicates, listing, leases, pruning."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import caches
from django.db import OperationalError
from django.utils import timezone

from mcp_server.ledger import DuplicateRequest, Ledger, LedgerRecord, State, request_key
from mcp_server.models import Session
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["database", "cache"])
def ledger(request: pytest.FixtureRequest) -> Iterator[Ledger]:
    caches["default"].clear()
    if request.param == "database":
        yield DatabaseLedger({})
    else:
        yield CacheLedger({"RETENTION": 60, "LEASE_TIMEOUT": 1})


def record(session: str | None, request_id: int | str, **extra: object) -> LedgerRecord:
    return LedgerRecord(session_id=session, request_key=request_key(request_id), method="tools/call", **extra)


@pytest.fixture
def session_id() -> str:
    now = timezone.now()
    return Session.objects.create(id="s-ledger-test", protocol_version="2025-11-25", last_seen=now).id


async def test_exactly_one_concurrent_settle_wins(ledger: Ledger, session_id: str) -> None:
    entry = await ledger.aopen(record(session_id, 1))
    results = await asyncio.gather(
        *(ledger.asettle(entry, state, None) for state in [State.CANCELLED, State.ANSWERED, State.CLOSED] * 4)
    )
    assert results.count(True) == 1
    stored = await ledger.aget(entry)
    assert stored is not None
    assert stored.state != State.PENDING
    assert await ledger.apending(session_id) == []


async def test_a_settled_entry_never_changes(ledger: Ledger, session_id: str) -> None:
    entry = await ledger.aopen(record(session_id, "a"))
    assert await ledger.asettle(entry, State.ANSWERED, {"result": True})
    assert not await ledger.asettle(entry, State.ABORTED, {"error": {"code": -1, "message": "x"}})
    stored = await ledger.aget(entry)
    assert stored is not None
    assert stored.state == State.ANSWERED


async def test_duplicate_pending_id_is_refused_until_settled(ledger: Ledger, session_id: str) -> None:
    first = await ledger.aopen(record(session_id, 7))
    with pytest.raises(DuplicateRequest):
        await ledger.aopen(record(session_id, 7))
    await ledger.aopen(record(session_id, "7"))  # a string id is another id
    await ledger.asettle(first, State.ANSWERED, None)
    await ledger.aopen(record(session_id, 7))  # free again once settled


async def test_stateless_requests_never_collide(ledger: Ledger) -> None:
    await ledger.aopen(record(None, 1))
    await ledger.aopen(record(None, 1))
    assert len(await ledger.apending()) == 2


async def test_pending_lists_one_session_oldest_first(ledger: Ledger, session_id: str) -> None:
    entries = [await ledger.aopen(record(session_id, n)) for n in range(5)]
    await ledger.aopen(record(None, 99))
    await ledger.asettle(entries[0], State.ANSWERED, None)
    listed = await ledger.apending(session_id)
    assert [r.request_id for r in listed] == [1, 2, 3, 4]
    found = await ledger.aget_pending(session_id, request_key(3))
    assert found is not None
    assert found.pk == entries[3].pk
    assert await ledger.aget_pending(session_id, request_key(0)) is None


async def test_requests_of_a_dead_worker_expire(ledger: Ledger, session_id: str) -> None:
    now = timezone.now()
    old = now - timedelta(seconds=120)
    dead = await ledger.aopen(record(session_id, 1, worker="dead:1", created=old, lease_expires=old))
    alive = await ledger.aopen(record(session_id, 2, worker="alive:2", created=old, lease_expires=old))
    await ledger.arenew_leases("alive:2", now + timedelta(seconds=30))
    expired = await ledger.aexpired(now)
    assert [r.pk for r in expired] == [dead.pk]
    assert alive.pk not in [r.pk for r in expired]


async def test_prune_removes_only_old_settled_entries(ledger: Ledger, session_id: str) -> None:
    settled = await ledger.aopen(record(session_id, 1))
    pending = await ledger.aopen(record(session_id, 2))
    await ledger.asettle(settled, State.ANSWERED, None)
    assert await ledger.aprune(timezone.now() - timedelta(seconds=60)) == 0
    assert await ledger.aprune(timezone.now() + timedelta(seconds=1)) == 1
    assert await ledger.aget(settled) is None
    assert [r.pk for r in await ledger.apending(session_id)] == [pending.pk]


async def test_both_backends_keep_the_oauth_client_of_a_request(ledger: Ledger, session_id: str) -> None:
    client = {"oauth_client_id": "https://app.example/client.json", "oauth_client_name": "Claude \u00e9"}
    opened = await ledger.aopen(record(session_id, 1, **client))
    now = timezone.now()
    settled = record(session_id, 2, state=State.ANSWERED, created=now, settled_at=now, **client)
    assert await ledger.awrite_batch([settled], []) == []  # the writer's path: one batch of rows
    [listed] = await ledger.apending(session_id)
    for stored in (listed, await ledger.aget(opened), await ledger.aget(settled)):
        assert stored is not None
        assert (stored.oauth_client_id, stored.oauth_client_name) == tuple(client.values())
    other = await ledger.aopen(record(session_id, 3))  # a request of no OAuth client
    found = await ledger.aget(other)
    assert found is not None
    assert (found.oauth_client_id, found.oauth_client_name) == ("", "")


async def test_cache_listing_never_skips_a_record_still_being_opened() -> None:
    caches["default"].clear()
    ledger = CacheLedger({"RETENTION": 60, "LEASE_TIMEOUT": 30})
    first = await ledger.aopen(record(None, 1))
    await ledger.asettle(first, State.ANSWERED, None)
    drawn = ledger._next_pk()  # a worker drew this pk and has not written the record yet
    assert await ledger.apending() == []
    late = record(None, 2)
    late.pk = drawn
    ledger.cache.set(ledger._k("e", drawn), dataclasses.asdict(late), None)
    assert [r.pk for r in await ledger.apending()] == [drawn]


async def test_cache_listing_passes_a_gap_left_by_a_dead_worker() -> None:
    caches["default"].clear()
    lease = 30.0
    ledger = CacheLedger({"RETENTION": 60, "LEASE_TIMEOUT": lease})
    gap = ledger._next_pk()  # drawn by a worker that died before writing the record
    assert await ledger.apending() == []  # the listing notes when it first saw the gap ...
    assert not ledger._dead_gap(gap)  # ... and waits for the lease of the worker that drew it
    # That lease ran out: the gap was first seen longer than a lease ago (no need to wait for it).
    ledger.cache.set(ledger._k("g", gap), timezone.now().timestamp() - lease - 1, None)
    assert ledger._dead_gap(gap)
    after = await ledger.aopen(record(None, 3))
    assert [r.pk for r in await ledger.apending()] == [after.pk]
    assert ledger.cache.get(ledger._k("plow")) == after.pk


class UnreachableLedger(DatabaseLedger):
    """A database that refuses every write until ``reachable`` is set (a fault, injected for real)."""

    reachable = False

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        if not self.reachable:
            raise OperationalError("database went away")
        return super().write_batch(inserts, updates)


async def test_a_request_is_answered_once_even_when_the_ledger_is_out_of_reach() -> None:
    """The reply never waits on the ledger; the record converges once the store answers again."""
    from mcp_server.models import LedgerEntry
    from mcp_server.protocol.settlement import PendingRequest
    from mcp_server.runtime.requests import RequestTable
    from mcp_server.runtime.writer import LedgerWriter

    ledger = UnreachableLedger()
    writer = LedgerWriter(ledger, interval=60)  # flushed by hand below
    table = RequestTable(writer, worker_id="w-test")
    delivered: list[dict[str, Any] | None] = []

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        delivered.append(response)

    entry = await table.open(None, 1, "tools/call", deliver)
    reply = {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert await table.settle(entry, State.ANSWERED, reply)
    assert not await table.settle(entry, State.CLOSED, {"jsonrpc": "2.0", "id": 1, "error": {}})
    assert delivered == [reply]
    assert len(table) == 0
    with pytest.raises(OperationalError):
        await writer.flush()
    assert len(writer) == 1, "the record stays queued while the store is out of reach"
    ledger.reachable = True
    await writer.flush()
    assert len(writer) == 0
    states = [row.state async for row in LedgerEntry.objects.filter(worker="w-test")]
    assert states == [State.ANSWERED], "one final row: never a pending one for a request already answered"
    await writer.aclose()
