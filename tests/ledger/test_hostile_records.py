"""I10 in the ledger: what a hostile client sends is stored as every backend can hold it, the record says what
was sent, and a value the store refuses never blocks the writer.

The tests run on the database this process has (SQLite) and its cache (local memory); the last test runs
this file again on PostgreSQL with Redis as the cache, where NUL characters and lone surrogates are refused
by the store itself.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.utils import timezone

from mcp_server.core.records import (
    KEY_LENGTH,
    NAME_LENGTH,
    LedgerRecord,
    long_id_of,
    request_key,
    storable,
    storable_json,
    storable_outcome,
)
from mcp_server.core.states import State
from mcp_server.models import LedgerEntry
from mcp_server.protocol.settlement import ANSWERED, PendingRequest
from mcp_server.runtime.requests import RequestTable
from mcp_server.runtime.writer import MAX_ATTEMPTS, LedgerWriter
from mcp_server.stores.ledger.base import Ledger
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.errors import INTERNAL_ERROR, INVALID_REQUEST, JSONRPCError
from mcp_server.wire.jsonrpc import (
    MAX_INT_ID,
    MAX_METHOD_LENGTH,
    MIN_INT_ID,
    error_response,
    result_response,
)
from tests.support.rerun import not_in_rerun, rerun_on_postgresql
from tests.support.wait import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SURROGATE = "\ud800"
"""Set in the run of this file on PostgreSQL (which does not start itself once more)."""


def test_the_wire_limits_fit_the_ledger_columns() -> None:
    column = LedgerEntry._meta.get_field
    longest = max(len(request_key(i)) for i in ("x" * 198, "x" * 199, "é" * 10**6, MIN_INT_ID, MAX_INT_ID))
    assert longest == KEY_LENGTH == column("request_key").max_length
    assert column("method").max_length == MAX_METHOD_LENGTH
    assert column("name").max_length == NAME_LENGTH


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("日本語 ✓ 🎉", "日本語 ✓ 🎉"),
        ("a\x00b", "a\ufffdb"),
        ("a" + SURROGATE + "b", "a\ufffdb"),
        ("\x00" + SURROGATE, "\ufffd\ufffd"),
        ("n" * 1_000, "n" * 10),
    ],
)
def test_storable_text(text: str, stored: str) -> None:
    assert storable(text, 10 if len(text) > 100 else 100) == stored


def test_storable_json() -> None:
    """What a client described itself with (a session's ``clientInfo`` and ``capabilities``), as every
    backend's JSON column holds it; a value that needs nothing is the value itself."""
    clean = {"name": "é", "tags": [1, 2.5, None, True], "nested": {"k": "v"}}
    assert storable_json(clean) is clean
    hostile = {"a\x00": ["\ud800", float("inf"), {"\udc00": -float("inf")}], "n": float("nan")}
    assert storable_json(hostile) == {"a\ufffd": ["\ufffd", "inf", {"\ufffd": "-inf"}], "n": "nan"}
    assert storable_json("x\x00y") == "x\ufffdy"
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert storable_json(deep) is None  # deeper than anything is stored


def test_storable_outcome() -> None:
    assert storable_outcome({"result": True}) == {"result": True}
    assert storable_outcome(None) is None
    hostile = {"error": {"code": -32602, "message": "Unknown tool: \x00" + SURROGATE + "x" * 1_000}}
    assert storable_outcome(hostile) == {
        "error": {"code": -32602, "message": ("Unknown tool: \ufffd\ufffd" + "x" * 1_000)[:500]}
    }


# -- the request table and the writer, on both backends --------------------------------------------------


@pytest.fixture(params=["database", "cache"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    # The cache is never cleared: under PostgreSQL it is a Redis shared with other runs (keys are unique).
    return (
        DatabaseLedger({})
        if request.param == "database"
        else CacheLedger({"RETENTION": 60, "LEASE_TIMEOUT": 5})
    )


@pytest.fixture
async def writer(ledger: Ledger) -> AsyncIterator[LedgerWriter]:
    """A writer whose background loop stays asleep (the tests flush)."""
    made = LedgerWriter(ledger, interval=60.0)
    yield made
    await made.aclose()


def session() -> str:
    return f"s-hostile-{secrets.token_hex(6)}"


async def stored(ledger: Ledger, record: LedgerRecord) -> LedgerRecord:
    assert record.pk is not None, "never written"
    found = await ledger.aget(record)
    assert found is not None
    return found


async def test_an_unencodable_reply_is_delivered_and_recorded_as_the_error_sent(
    ledger: Ledger, writer: LedgerWriter
) -> None:
    table = RequestTable(writer, worker_id="w")
    delivered: list[tuple[dict[str, Any] | None, bytes | None]] = []

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        delivered.append((response, entry.reply.data if entry.reply is not None else None))

    entry = await table.open(session(), 4, "tools/call", deliver, name="echo\x00" + SURROGATE)
    assert await table.settle(entry, ANSWERED, result_response(4, {"content": [{"text": SURROGATE}]}))
    [(response, data)] = delivered
    assert response is not None
    assert data is not None
    assert json.loads(data.decode("utf-8")) == response  # the bytes sent are the response delivered
    assert response["id"] == 4
    assert response["error"]["code"] == INTERNAL_ERROR
    await writer.flush()
    record = await stored(ledger, entry.record)
    assert record.state == State.ANSWERED
    assert record.outcome == {"error": response["error"]}  # recorded as sent: not {"result": True}
    assert record.name == "echo\ufffd\ufffd"


async def test_an_error_message_with_nul_and_surrogates_is_stored_scrubbed(
    ledger: Ledger, writer: LedgerWriter
) -> None:
    table = RequestTable(writer, worker_id="w")

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        assert response is not None
        assert response["error"] == {"code": -32602, "message": "Unknown tool: a\x00b\ufffd"}  # NUL is JSON

    entry = await table.open(session(), "x", "tools/call", deliver, name="a\x00b" + SURROGATE)
    error = JSONRPCError(-32602, "Unknown tool: a\x00b" + SURROGATE)
    assert await table.settle(entry, ANSWERED, error_response("x", error))
    await writer.flush()
    record = await stored(ledger, entry.record)
    assert record.outcome == {"error": {"code": -32602, "message": "Unknown tool: a\ufffdb\ufffd"}}


def test_a_long_id_is_keyed_by_its_hash_and_kept_whole() -> None:
    """Ids past the column share no key unless they are equal (not even with a long common prefix); short
    ones keep their plain key (no hashing on the hot path)."""
    short = "x" * 198
    assert request_key(short) == "s:" + short
    assert request_key(1) == "i:1"
    first, second = "p" * 500 + "1", "p" * 500 + "2"
    assert request_key(first) != request_key(second)
    assert request_key(first) == request_key("p" * 500 + "1")
    assert request_key("s" * 300) != request_key("h:" + "s" * 300)
    key = request_key(first)
    assert key.startswith("h:")
    assert key.endswith("p" * 50)
    record = LedgerRecord(session_id="s", request_key=key, method="ping", long_id=long_id_of(first, key))
    assert record.request_id == first
    assert long_id_of(short, request_key(short)) == ""


@pytest.mark.parametrize("request_id", ["a\x00", SURROGATE, MAX_INT_ID + 1])
async def test_the_table_refuses_an_id_the_ledger_cannot_hold(writer: LedgerWriter, request_id: Any) -> None:
    table = RequestTable(writer, worker_id="w")

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        raise AssertionError("nothing to deliver")

    with pytest.raises(JSONRPCError) as caught:
        await table.open(session(), request_id, "ping", deliver)
    assert caught.value.code == INVALID_REQUEST
    assert len(writer) == 0
    assert len(table) == 0


def unstorable(session_id: str, request_id: int | str, **fields: Any) -> LedgerRecord:
    """A record that did not come through the request table (which makes text storable): as a bug, or a
    future caller, could hand the writer."""
    now = timezone.now()
    return LedgerRecord(
        session_id=session_id,
        request_key=request_key(request_id),
        method="tools/call",
        worker="w",
        created=now,
        **fields,
    )


def settled(record: LedgerRecord, outcome: dict[str, Any]) -> LedgerRecord:
    record.state, record.outcome, record.settled_at = State.ANSWERED, outcome, timezone.now()
    return record


async def test_a_value_the_store_refuses_does_not_hold_the_batch_back(
    ledger: Ledger, writer: LedgerWriter, caplog: pytest.LogCaptureFixture
) -> None:
    sid = session()
    good = unstorable(sid, 1)
    bad_name = unstorable(sid, 2, name="n\x00" + SURROGATE)
    bad_outcome = settled(unstorable(sid, 3), {"error": {"code": -32602, "message": "m\x00" + SURROGATE}})
    bad_key = unstorable(sid, 4)
    bad_key.request_key = "s:" + SURROGATE
    done = settled(unstorable(sid, 5), {"result": True})
    for record in (good, bad_name, bad_outcome, bad_key, done):
        await writer.opened(record)
    await writer.settled(done)
    for _ in range(MAX_ATTEMPTS):  # no error: the store's refusal is handled, not retried for ever
        await writer.flush()
    assert len(writer) == 0
    for logged in caplog.records:  # the log names the client's values escaped: a UTF-8 log file takes it
        logged.getMessage().encode("utf-8")
    assert (await stored(ledger, good)).state == State.PENDING
    assert (await stored(ledger, done)).state == State.ANSWERED
    assert (await stored(ledger, bad_name)).name in (
        "n\x00" + SURROGATE,
        "n\ufffd\ufffd",
    )  # as is where it fits
    assert (await stored(ledger, bad_outcome)).outcome in (
        {"error": {"code": -32602, "message": "m\x00" + SURROGATE}},
        {"error": {"code": -32602, "message": "m\ufffd\ufffd"}},
    )
    if isinstance(ledger, DatabaseLedger):  # SQLite and PostgreSQL refuse a lone surrogate
        assert (await stored(ledger, bad_name)).name == "n\ufffd\ufffd"
        assert bad_key.pk is None  # its identity cannot be stored: dropped (logged), the others written
    # Settling the records later works as for any other.
    await writer.settled(settled(good, {"result": True}))
    await writer.settled(settled(bad_name, {"result": True}))
    await writer.flush()
    assert (await stored(ledger, good)).state == State.ANSWERED
    assert (await stored(ledger, bad_name)).state == State.ANSWERED
    assert len(writer) == 0


async def test_the_background_writer_converges_past_a_refused_value(ledger: Ledger) -> None:
    writer = LedgerWriter(ledger, interval=0.01)
    try:
        sid = session()
        bad = settled(unstorable(sid, 1, name="\x00" + SURROGATE), {"result": True})
        good = settled(unstorable(sid, 2), {"result": True})
        await writer.opened(bad)
        await writer.opened(good)

        async def written() -> bool:
            return len(writer) == 0 and good.pk is not None

        await wait_for(written)
        assert (await stored(ledger, good)).state == State.ANSWERED
        assert writer.failures == 0
    finally:
        await writer.aclose()


async def test_write_through_stores_a_refused_value_made_storable(ledger: Ledger) -> None:
    writer = LedgerWriter(ledger, interval=0)
    try:
        record = unstorable(session(), 1, name="\x00" + SURROGATE)
        await writer.opened(record)
        await writer.settled(settled(record, {"error": {"code": -1, "message": "\x00"}}))
        found = await stored(ledger, record)
        assert found.state == State.ANSWERED
        assert found.name in ("\x00" + SURROGATE, "\ufffd\ufffd")
    finally:
        await writer.aclose()


# -- the same on PostgreSQL and Redis --------------------------------------------------------------------


@not_in_rerun
def test_the_same_on_postgresql_with_redis() -> None:
    """PostgreSQL refuses NUL characters and lone surrogates (text and ``jsonb``); Redis refuses keys that are
    not UTF-8. This file, run again there, must pass."""
    rerun_on_postgresql(__file__)
