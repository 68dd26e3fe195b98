"""The ledger's batch insert gives each record the id of its own row, however the backend returns ids (on
SQLite, counted back from the last one), with rows already there, gaps left by deleted ones, and a query
log on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from mcp_server.core.records import LedgerRecord
from mcp_server.models import LedgerEntry
from mcp_server.stores.ledger.database import DatabaseLedger

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def records(prefix: str, count: int) -> list[LedgerRecord]:
    return [
        LedgerRecord(
            session_id=None,
            request_key=f"s:{prefix}-{n}",
            method="tools/call",
            name=f"tool-{n}",
            worker="w",
            created=NOW,
            state="answered" if n % 3 else "pending",
            settled_at=NOW if n % 3 else None,
            outcome={"result": True, "n": n} if n % 3 else None,
        )
        for n in range(count)
    ]


def write(batch: list[LedgerRecord]) -> None:
    with transaction.atomic():
        assert DatabaseLedger().write_batch(batch, []) == []


def assert_each_row_is_its_own(batch: list[LedgerRecord]) -> None:
    rows = LedgerEntry.objects.in_bulk([r.pk for r in batch])
    assert len(rows) == len(batch)
    for record in batch:
        row = rows[record.pk]
        assert (row.request_key, row.name, row.state, row.outcome) == (
            record.request_key,
            record.name,
            record.state,
            record.outcome,
        )


@pytest.mark.parametrize("count", [1, 2, 57, 400])
def test_each_record_gets_the_id_of_its_row(count: int) -> None:
    write(records("before", 5))
    LedgerEntry.objects.filter(request_key__in=["s:before-3", "s:before-4"]).delete()  # the newest ids go
    batch = records("batch", count)
    write(batch)
    assert_each_row_is_its_own(batch)
    assert len({r.pk for r in batch}) == count


def test_the_same_with_the_query_log_on(settings: Any) -> None:
    batch = records("logged", 30)
    with CaptureQueriesContext(connection) as queries:  # Django's debug cursor: it counts the rows given
        write(batch)
    assert queries.captured_queries
    assert_each_row_is_its_own(batch)
