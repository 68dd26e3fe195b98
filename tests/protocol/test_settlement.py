"""``RequestTable`` (:mod:`mcp_server.runtime.requests`): each request settled exactly once, in memory,
recorded by a real ``LedgerWriter`` on a real ledger (the database ledger on the test database, the cache
ledger on local memory)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.cache import caches

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.protocol.settlement import (
    ABORTED,
    ANSWERED,
    CANCELLED,
    CLOSED,
    PENDING,
    TIMED_OUT,
    PendingRequest,
    aborted_response,
    closed_response,
    name_of,
    outcome_of,
)
from mcp_server.runtime import requests
from mcp_server.runtime.requests import RequestTable
from mcp_server.runtime.writer import LedgerWriter
from mcp_server.stores.ledger.base import Ledger
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.errors import JSONRPCError
from mcp_server.wire.jsonrpc import error_response, result_response

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["database", "cache"])
def ledger(request: pytest.FixtureRequest) -> Ledger:
    caches["default"].clear()
    return DatabaseLedger({}) if request.param == "database" else CacheLedger({"RETENTION": 60})


@dataclass
class Replies:
    """A deliver callback that records what it was handed (the transport's side)."""

    got: list[tuple[PendingRequest, dict[str, Any] | None]] = field(default_factory=list)

    async def __call__(self, entry: PendingRequest, response: dict[str, Any] | None) -> None:
        await asyncio.sleep(0)  # a real send yields to the loop: a second settle would run meanwhile
        self.got.append((entry, response))

    def of(self, entry: PendingRequest) -> list[dict[str, Any] | None]:
        return [response for e, response in self.got if e is entry]


@dataclass
class Setup:
    ledger: Ledger
    writer: LedgerWriter
    table: RequestTable
    replies: Replies
    remembered: list[tuple[str | None, str]]

    async def open(
        self, session: str | None, request_id: int | str, method: str = "tools/call"
    ) -> PendingRequest:
        return await self.table.open(session, request_id, method, self.replies)

    async def stored(self, entry: PendingRequest) -> LedgerRecord:
        await self.writer.flush()
        record = await self.ledger.aget(entry.record)
        assert record is not None
        return record

    async def ledger_pending(self) -> list[str]:
        await self.writer.flush()
        return sorted(f"{r.session_id}/{r.request_key}" for r in await self.ledger.apending())


@pytest.fixture
async def s(ledger: Ledger) -> AsyncIterator[Setup]:
    writer = LedgerWriter(ledger, interval=0.01)
    remembered: list[tuple[str | None, str]] = []

    async def on_remembered_cancel(session_id: str | None, key: str) -> None:
        remembered.append((session_id, key))

    table = RequestTable(writer, worker_id="w-test", on_remembered_cancel=on_remembered_cancel)
    yield Setup(ledger, writer, table, Replies(), remembered)
    await table.shutdown("test over")
    await writer.aclose()


async def idle_handler(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


async def running(entry: PendingRequest) -> asyncio.Task[None]:
    """Give ``entry`` a handler task that runs until cancelled."""
    started = asyncio.Event()
    entry.task = asyncio.create_task(idle_handler(started))
    await asyncio.wait_for(started.wait(), 5)
    return entry.task


async def assert_cancelled(task: asyncio.Task[None]) -> None:
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert task.cancelled()


async def test_exactly_one_concurrent_settle_wins(s: Setup) -> None:
    entry = await s.open("s1", 1)
    outcomes: list[tuple[str, dict[str, Any] | None]] = [
        (ANSWERED, result_response(1, {"n": 1})),
        (CANCELLED, None),
        (CLOSED, closed_response(1, "bye")),
        (TIMED_OUT, error_response(1, JSONRPCError(-32001, "timed out"))),
        (ABORTED, aborted_response(1)),
        (ANSWERED, result_response(1, {"n": 2})),
    ] * 3
    wins = await asyncio.gather(*(s.table.settle(entry, state, reply) for state, reply in outcomes))
    assert wins.count(True) == 1
    state, reply = outcomes[wins.index(True)]
    assert s.replies.of(entry) == [reply]  # the losers delivered nothing
    assert entry.state == state
    assert len(s.table) == 0
    record = await s.stored(entry)
    assert (record.state, record.outcome) == (state, outcome_of(reply))
    assert not await s.table.settle(entry, ANSWERED, result_response(1, {}))
    assert len(s.replies.got) == 1


async def test_cancel_settles_with_no_reply_and_stops_the_handler(s: Setup) -> None:
    entry = await s.open("s1", "job")
    task = await running(entry)
    assert await s.table.cancel("s1", request_key("job"))
    assert s.replies.of(entry) == [None]
    await assert_cancelled(task)
    assert not await s.table.cancel("s1", request_key("job"))  # settled already
    assert not await s.table.settle(entry, ANSWERED, result_response("job", {}))
    assert s.replies.of(entry) == [None]
    assert (await s.stored(entry)).state == CANCELLED
    assert await s.ledger_pending() == []


async def test_initialize_cannot_be_cancelled(s: Setup) -> None:
    entry = await s.open("s1", 0, "initialize")
    assert not await s.table.cancel("s1", request_key(0))
    assert entry.state == PENDING
    assert s.replies.got == []
    assert await s.table.settle(entry, ANSWERED, result_response(0, {"protocolVersion": "x"}))
    assert (await s.stored(entry)).state == ANSWERED


async def test_a_cancel_that_overtakes_its_request_settles_it_on_arrival(s: Setup) -> None:
    assert not await s.table.cancel("s1", request_key(5))  # not here yet: remembered (I9)
    entry = await s.open("s1", 5)
    assert entry.state == CANCELLED
    assert s.replies.of(entry) == [None]
    assert s.remembered == [("s1", request_key(5))]
    assert len(s.table) == 0
    assert (await s.stored(entry)).state == CANCELLED
    # The remembered cancel is used up; it was for that id of that session only.
    assert (await s.open("s1", 5)).state == PENDING
    assert (await s.open("s1", "5")).state == PENDING
    assert (await s.open("s2", 5)).state == PENDING
    assert s.remembered == [("s1", request_key(5))]


async def test_an_initialize_is_not_cancelled_by_a_remembered_cancel(s: Setup) -> None:
    await s.table.cancel("s1", request_key(0))
    entry = await s.open("s1", 0, "initialize")
    assert entry.state == PENDING
    assert s.remembered == []


@pytest.mark.parametrize(
    ("session", "remember"), [("s1", False), (None, True)], ids=["told-not-to", "stateless"]
)
async def test_cancels_not_remembered(s: Setup, session: str | None, remember: bool) -> None:
    assert not await s.table.cancel(session, request_key(3), remember=remember)
    assert (await s.open(session, 3)).state == PENDING
    assert s.replies.got == []


async def test_forget_cancel(s: Setup) -> None:
    await s.table.cancel("s1", request_key(4))
    s.table.forget_cancel("s1", request_key(4))  # another worker settled the request it was for
    s.table.forget_cancel("s1", request_key(404))  # unknown: nothing to forget
    entry = await s.open("s1", 4)
    assert entry.state == PENDING
    assert s.replies.got == []
    assert s.remembered == []


async def test_remembered_cancels_expire(s: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "EARLY_CANCEL_WINDOW", 30.0)
    await s.table.cancel("s1", request_key(1))
    # The next one is stale as soon as it is kept (behind the live one, so not dropped on the way in).
    monkeypatch.setattr(requests, "EARLY_CANCEL_WINDOW", -1.0)
    await s.table.cancel("s1", request_key(2))
    assert (await s.open("s1", 2)).state == PENDING  # its window had passed
    assert (await s.open("s1", 1)).state == CANCELLED
    for n in range(100, 200):
        await s.table.cancel("s2", request_key(n))
    assert len(s.table._early_cancels) == 0  # stale ones are dropped, not kept until their id comes


async def test_remembered_cancels_are_limited(s: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(requests, "EARLY_CANCEL_LIMIT", 3)
    for n in range(1, 6):
        await s.table.cancel("s1", request_key(n))
    assert len(s.table._early_cancels) == 3
    states = [(await s.open("s1", n)).state for n in range(1, 6)]
    assert states == [PENDING, PENDING, CANCELLED, CANCELLED, CANCELLED]  # the oldest were forgotten


async def test_duplicate_id_in_a_session_is_refused_until_settled(s: Setup) -> None:
    first = await s.open("s1", 1)
    with pytest.raises(JSONRPCError) as refused:
        await s.open("s1", 1)
    assert refused.value.code == -32600
    assert "already in flight" in refused.value.message
    assert len(s.table) == 1
    await s.open("s1", "1")  # a string id is another id
    await s.open("s2", 1)  # another session
    assert await s.table.settle(first, ANSWERED, result_response(1, {}))
    again = await s.open("s1", 1)  # free once settled
    assert again.state == PENDING
    assert s.table.get("s1", request_key(1)) is again
    assert s.replies.of(first) == [result_response(1, {})]
    assert await s.ledger_pending() == ["s1/i:1", "s1/s:1", "s2/i:1"]


async def test_a_duplicate_pending_at_another_worker_is_refused_when_writing_through(s: Setup) -> None:
    other = RequestTable(LedgerWriter(s.ledger, interval=0), worker_id="w-other")
    mine = RequestTable(LedgerWriter(s.ledger, interval=0), worker_id="w-mine")
    held = await other.open("s1", 9, "tools/call", s.replies)
    with pytest.raises(JSONRPCError) as refused:
        await mine.open("s1", 9, "tools/call", s.replies)
    assert refused.value.code == -32600
    assert len(mine) == 0
    assert await other.settle(held, ANSWERED, result_response(9, {}))
    assert (await mine.open("s1", 9, "tools/call", s.replies)).state == PENDING
    await mine.shutdown()
    for table in (other, mine):
        assert isinstance(table.sink, LedgerWriter)
        await table.sink.aclose()


async def test_close_session_and_shutdown_answer_minus_32000(s: Setup) -> None:
    mine = [await s.open("s1", n) for n in (1, 2, 3)]
    task = await running(mine[0])
    other = await s.open("s2", 1)
    stateless = await s.open(None, 1)
    assert await s.table.close_session("s1", "session terminated by the client") == 3
    for entry in mine:
        assert s.replies.of(entry) == [closed_response(entry.request_id, "session terminated by the client")]
        assert entry.state == CLOSED
    await assert_cancelled(task)
    assert [e.state for e in (other, stateless)] == [PENDING, PENDING]
    assert await s.table.close_session("s1", "again") == 0
    assert await s.table.shutdown("server shutting down") == 2
    for entry in (other, stateless):
        assert s.replies.of(entry) == [closed_response(entry.request_id, "server shutting down")]
    error = closed_response(1, "server shutting down")["error"]
    assert (error["code"], error["message"]) == (-32000, "Connection closed: server shutting down")
    assert len(s.table) == 0
    assert len(s.replies.got) == 5
    assert {(await s.stored(e)).state for e in [*mine, other, stateless]} == {CLOSED}
    assert await s.ledger_pending() == []


async def test_refuse_answers_minus_32600(s: Setup) -> None:
    entry = await s.open("s1", 8)
    entry.task = asyncio.create_task(asyncio.sleep(60))  # its handler, which must not go on
    await s.table.refuse(LedgerRecord(session_id="s1", request_key=request_key(8), method="tools/call"))
    assert s.replies.got == []  # only the very record the ledger refused is answered
    await s.table.refuse(entry.record)
    [reply] = s.replies.of(entry)
    assert reply is not None
    assert reply["id"] == 8
    assert reply["error"]["code"] == -32600
    assert entry.state == ANSWERED
    assert len(s.table) == 0
    with pytest.raises(asyncio.CancelledError):
        await entry.task
    await s.table.refuse(entry.record)  # settled already: nothing more
    assert len(s.replies.got) == 1


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "echo", "uri": "x"}, "echo"),
        ("prompts/get", {"name": "summary"}, "summary"),
        ("resources/read", {"uri": "books://1", "name": "n"}, "books://1"),
        ("resources/subscribe", {"uri": "books://2"}, "books://2"),
        ("tools/list", {"name": "ignored"}, ""),
        ("tools/call", {}, ""),
    ],
)
def test_name_of_names_the_tool_prompt_or_resource(method: str, params: dict[str, Any], name: str) -> None:
    assert name_of(method, params) == name


async def test_stateless_entries_never_collide(s: Setup) -> None:
    entries = [await s.open(None, 1) for _ in range(3)]
    assert len(s.table) == 3
    assert len({id(e) for e in entries}) == 3
    assert s.table.get(None, request_key(1)) is None
    assert not await s.table.cancel(None, request_key(1))  # a stateless request cannot be cancelled by id
    assert [e.state for e in entries] == [PENDING] * 3
    assert await s.table.settle(entries[1], ANSWERED, result_response(1, {"which": 1}))
    assert [e.state for e in entries] == [PENDING, ANSWERED, PENDING]
    assert set(s.table.pending()) == {entries[0], entries[2]}
    assert s.replies.got == [(entries[1], result_response(1, {"which": 1}))]
    assert len(await s.ledger_pending()) == 2
    # Once stored, each is named by its ledger key (an operator's abort names it so).
    assert entries[0].record.pk is not None
    assert entries[2].record.pk is not None
    assert s.table.get(None, request_key(1), entries[2].record.pk) is entries[2]
    assert s.table.get(None, request_key(2), entries[2].record.pk) is None
    assert s.table.get(None, request_key(1), entries[1].record.pk) is None  # settled: no longer held


def test_the_ledger_keeps_that_there_was_a_result_or_the_error() -> None:
    """What the record says of a reply: never the result itself, the error's code and (bounded) message."""
    assert outcome_of(None) is None
    assert outcome_of({"jsonrpc": "2.0", "id": 1, "result": {"big": "x" * 10_000}}) == {"result": True}
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "m" * 600}}
    assert outcome_of(error) == {"error": {"code": -32000, "message": "m" * 500}}
