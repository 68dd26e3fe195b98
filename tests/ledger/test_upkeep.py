"""``Upkeep`` (I11): a live worker renews the leases of what it holds only, and settles its own strays, the
rows it no longer holds (their settlement was lost), so that nothing stays pending for a settled request."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.test import override_settings
from django.utils import timezone

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.models import LedgerEntry
from mcp_server.runtime.upkeep import STRAY_REASON, Holding, Upkeep
from mcp_server.stores.ledger.base import Ledger
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "w-upkeep"


@pytest.fixture(params=["database", "cache"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    caches["default"].clear()
    return DatabaseLedger({}) if request.param == "database" else CacheLedger({"RETENTION": 60})


async def opened(ledger: Ledger, request_id: int, *, age: float, worker: str = WORKER) -> LedgerRecord:
    created = timezone.now() - timedelta(seconds=age)
    record = LedgerRecord(
        session_id="s-upkeep",
        request_key=request_key(request_id),
        method="tools/call",
        worker=worker,
        created=created,
        lease_expires=created + timedelta(seconds=1),
    )
    await sync_to_async(ledger.write_batch, thread_sensitive=False)([record], [])
    return record


async def states(ledger: Ledger, *records: LedgerRecord) -> list[str | None]:
    found = [await ledger.aget(r) for r in records]
    return [None if f is None else str(f.state) for f in found]


async def test_strays_are_settled_and_what_is_held_is_not(ledger: Ledger) -> None:
    stray = await opened(ledger, 1, age=60)
    held = await opened(ledger, 2, age=60)
    young = await opened(ledger, 3, age=0)  # may still be on its way to this worker's table
    other = await opened(ledger, 4, age=60, worker="another-worker")  # an orphan's business, not a stray
    holding = Holding({held.pk})
    upkeep = Upkeep(ledger, WORKER, holding=lambda: holding)
    assert await upkeep.settle_strays(timezone.now() - timedelta(seconds=30), holding) == 1
    assert await states(ledger, stray, held, young, other) == ["closed", "pending", "pending", "pending"]
    settled = await ledger.aget(stray)
    assert settled is not None
    assert settled.outcome == {"error": {"code": -32000, "message": f"Connection closed: {STRAY_REASON}"}}
    assert await upkeep.settle_strays(timezone.now() - timedelta(seconds=30), holding) == 0


async def test_no_stray_is_younger_than_the_oldest_request_not_yet_written(ledger: Ledger) -> None:
    """A request whose first write is still queued may own any row after it: those wait."""
    before = await opened(ledger, 1, age=60)
    after = await opened(ledger, 2, age=40)
    holding = Holding(set(), oldest_unwritten=timezone.now() - timedelta(seconds=50))
    upkeep = Upkeep(ledger, WORKER, holding=lambda: holding)
    assert await upkeep.settle_strays(timezone.now() - timedelta(seconds=30), holding) == 1
    assert await states(ledger, before, after) == ["closed", "pending"]


async def test_a_record_taken_while_the_store_was_read_is_not_a_stray(ledger: Ledger) -> None:
    """``holding`` is asked again after the read: what the worker took meanwhile is left alone."""
    record = await opened(ledger, 1, age=60)
    answers = iter([Holding(), Holding({record.pk})])
    upkeep = Upkeep(ledger, WORKER, holding=lambda: next(answers))
    assert (await upkeep.round())["strays"] == 0
    assert await states(ledger, record) == ["pending"]


async def lease_of(record: LedgerRecord) -> datetime:
    row = await LedgerEntry.objects.aget(pk=record.pk)
    assert row.lease_expires is not None
    return row.lease_expires


async def test_only_held_records_have_their_lease_renewed() -> None:
    """A settled request's row is no longer renewed: it expires, and the ledger converges."""
    ledger = DatabaseLedger({})
    held = await opened(ledger, 1, age=0)
    lost = await opened(ledger, 2, age=0)
    leases = {r.request_key: await lease_of(r) for r in (held, lost)}
    upkeep = Upkeep(ledger, WORKER, holding=lambda: Holding({held.pk}))
    with override_settings(MCP_SERVER={"LEASE_TIMEOUT": 120.0}):
        result: dict[str, Any] = await upkeep.round()
    assert result["renewed"] == 1
    assert await lease_of(held) > leases[held.request_key] + timedelta(seconds=60)
    assert await lease_of(lost) == leases[lost.request_key]
    without_holding = Upkeep(ledger, WORKER)  # ``mcp_prune``: renews all, takes nothing for a stray
    with override_settings(MCP_SERVER={"LEASE_TIMEOUT": 120.0}):
        assert (await without_holding.round())["renewed"] == 2
