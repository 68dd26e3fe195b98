"""Each ledger row names its request's server span: the trace id and span id it records are those the
SDK's in-memory exporter got, in both ledgers; without a span, none."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.models import LedgerEntry
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.database import DatabaseLedger

from .conftest import SESSION, Recorded, call, held, new_post, run


def ids_of(recorded: Recorded, name: str) -> tuple[str, str]:
    span = recorded.span(name)
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


async def test_the_cache_ledger_keeps_the_server_spans_ids(runtime: Runtime, recorded: Recorded) -> None:
    running = asyncio.create_task(run(new_post(runtime), call(1, "slow", seconds=30)))
    await held(runtime, 1)
    entry = runtime.requests.get(SESSION, request_key(1))
    await runtime.writer.flush()
    pending = await runtime.ledger.aget(entry.record)  # the pending row, as the ledger stored it
    await runtime.requests.cancel(SESSION, request_key(1))
    await running
    await run(new_post(runtime), call(2, "echo", text="hi"))  # settled before its batch: one final row
    await runtime.writer.flush()
    assert (pending.trace_id, pending.span_id) == ids_of(recorded, "tools/call slow")
    (answered,) = [r for r in await _all(runtime) if r.request_key == request_key(2)]
    assert (answered.trace_id, answered.span_id) == ids_of(recorded, "tools/call echo")


async def _all(runtime: Runtime) -> list[LedgerRecord]:
    """The records the cache ledger holds (its pks count from 1)."""
    found = []
    for pk in range(1, 10):
        record = await runtime.ledger.aget(LedgerRecord(session_id=None, request_key="", method="", pk=pk))
        if record is not None:
            found.append(record)
    return found


@pytest.mark.django_db(transaction=True)
async def test_the_database_ledger_keeps_the_server_spans_ids(runtime: Runtime, recorded: Recorded) -> None:
    runtime.ledger = runtime.writer.ledger = DatabaseLedger()
    await run(new_post(runtime, batch=True), call(3, "echo", text="a"), call(4, "no_such_tool"))
    await runtime.writer.flush()
    rows = {
        row.request_key: (row.trace_id, row.span_id)
        async for row in LedgerEntry.objects.filter(session_id=SESSION)
    }
    assert rows == {
        request_key(3): ids_of(recorded, "tools/call echo"),
        request_key(4): ids_of(recorded, "tools/call no_such_tool"),
    }
    assert len({trace for trace, _span in rows.values()}) == 2  # no parent given: a trace each


async def test_a_traceparent_header_gives_the_row_the_callers_trace(
    runtime: Runtime, recorded: Recorded
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    request = SimpleNamespace(META={"HTTP_TRACEPARENT": f"00-{trace_id}-00f067aa0ba902b7-01"}, auth=None)
    running = asyncio.create_task(run(new_post(runtime, request=request), call(5, "slow", seconds=30)))
    await held(runtime, 5)
    entry = runtime.requests.get(SESSION, request_key(5))
    assert entry.record.trace_id == trace_id
    await runtime.requests.cancel(SESSION, request_key(5))
    await running
    assert ids_of(recorded, "tools/call slow") == (entry.record.trace_id, entry.record.span_id)


async def test_without_a_span_the_row_names_none(runtime: Runtime) -> None:
    runtime.requests.telemetry = None  # telemetry off
    running = asyncio.create_task(run(new_post(runtime), call(6, "slow", seconds=30)))
    await held(runtime, 6)
    entry = runtime.requests.get(SESSION, request_key(6))
    assert (entry.record.trace_id, entry.record.span_id) == ("", "")
    await runtime.requests.cancel(SESSION, request_key(6))
    await running
