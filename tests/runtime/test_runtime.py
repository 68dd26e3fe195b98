"""Two ``Runtime`` objects in one process, as two worker processes see each other: a channel each on the
in-memory channel layer, both in the workers group, one shared ledger. Requests are started through
``start_request`` (the path the HTTP exchange and the stdio loop take), running the test app's tools."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, get_args

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.utils import timezone

from mcp_server.core.context import SessionState
from mcp_server.core.records import request_key
from mcp_server.models import Session
from mcp_server.protocol.peer import RequestPeer
from mcp_server.protocol.serving import start_request
from mcp_server.protocol.settlement import CANCELLED, CLOSED, PENDING, PendingRequest, aborted_response
from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.base import Ledger
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.jsonrpc import JSONRPCRequest, parse_message
from mcp_server.wire.messages import (
    AbortRequest,
    AbortResult,
    StreamMessage,
    WorkerMessage,
    parse_event,
    session_group,
    to_event,
)
from mcp_server.wire.versions import LATEST_VERSION

pytestmark = pytest.mark.django_db(transaction=True)

LAYER = "default"  # the alias sessions.aend_session broadcasts on (MCP_SERVER["CHANNEL_LAYER"])


@dataclass(eq=False)
class Watched:
    """Something the runtime calls into; :meth:`until` waits for a condition on it (no polling)."""

    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def until(self, condition: Callable[[], bool], within: float = 5.0) -> None:
        async with asyncio.timeout(within):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


@dataclass(eq=False)
class Replies(Watched):
    got: list[tuple[PendingRequest, dict[str, Any] | None]] = field(default_factory=list)

    async def __call__(self, entry: PendingRequest, response: dict[str, Any] | None) -> None:
        self.got.append((entry, response))
        self.changed.set()

    def of(self, entry: PendingRequest) -> list[dict[str, Any] | None]:
        return [response for e, response in self.got if e is entry]


@dataclass(eq=False)
class Sink(Watched):
    got: list[dict[str, Any]] = field(default_factory=list)
    closed: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        self.got.append(message)
        self.changed.set()

    def close(self, reason: str) -> None:
        self.closed = reason
        self.changed.set()


class Peer(RequestPeer):
    """A request's way out that keeps what it is handed."""

    def __init__(self, runtime: Runtime, session_id: str | None) -> None:
        super().__init__(runtime.outbound, runtime.channel)
        self._session_id = session_id
        self.sent: list[dict[str, Any]] = []

    @property
    def session_id(self) -> str | None:
        return self._session_id

    async def emit(self, message: dict[str, Any]) -> bool:
        self.sent.append(message)
        return True


async def start(
    runtime: Runtime, session_id: str | None, request_id: int, replies: Replies
) -> PendingRequest:
    """A ``slow`` tool call (30 s) held by ``runtime``."""
    message = parse_message(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 30}},
        }
    )
    assert isinstance(message, JSONRPCRequest)
    session = SessionState(id=session_id, protocol_version=LATEST_VERSION)
    peer = Peer(runtime, session_id)
    return await start_request(runtime, message, server=mcp, session=session, peer=peer, deliver=replies)


async def fence(runtime: Runtime) -> None:
    """Return once ``runtime`` has acted on every message queued on its channel before now."""
    layer = get_channel_layer(LAYER)
    reply = await layer.new_channel()
    await layer.send(runtime.channel, to_event(AbortRequest(session_id="fence", key="fence", reply_to=reply)))
    answer = await asyncio.wait_for(layer.receive(reply), 5)
    assert parse_event(answer) == AbortResult(session_id="fence", key="fence", aborted=False)


async def stopped(entry: PendingRequest) -> None:
    assert entry.task is not None
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(entry.task, 5)


@pytest.fixture
def ledger() -> Ledger:
    return DatabaseLedger({})


@pytest.fixture
async def make(settings: Any, ledger: Ledger) -> AsyncIterator[Callable[..., Any]]:
    """Start runtimes on a fresh in-memory channel layer (setting it drops the layers of earlier tests)."""
    settings.CHANNEL_LAYERS = {LAYER: {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    made: list[Runtime] = []

    async def _make(worker_id: str, flush_interval: float = 0.01) -> Runtime:
        runtime = Runtime(
            worker_id=worker_id, ledger=ledger, channel_layer_alias=LAYER, flush_interval=flush_interval
        )
        await runtime.start()
        assert runtime.channel
        made.append(runtime)
        return runtime

    yield _make
    for runtime in made:
        await runtime.requests.shutdown("test over")
        await runtime.aclose()


@pytest.fixture
async def pair(make: Callable[..., Any]) -> tuple[Runtime, Runtime]:
    a, b = await make("worker-a"), await make("worker-b")
    assert a.channel != b.channel
    return a, b


async def test_a_cancel_through_b_reaches_the_request_held_by_a(pair: tuple[Runtime, Runtime]) -> None:
    a, b = pair
    replies = Replies()
    entry = await start(a, "s1", 1, replies)
    assert entry.state == PENDING
    assert not await b.cancel("s1", 1)  # not held by B: told to every worker
    await replies.until(lambda: bool(replies.got))
    assert replies.of(entry) == [None]  # settled with no reply
    await stopped(entry)
    assert replies.got == [(entry, None)]
    assert len(a.requests) == 0
    await a.writer.flush()
    stored = await a.ledger.aget(entry.record)
    assert stored is not None
    assert stored.state == CANCELLED
    # B remembered the cancel it broadcast (its request might have been on its way); A's settlement made
    # it forget: the id can be used again at B.
    await fence(a)
    await fence(b)
    again = await start(b, "s1", 1, Replies())
    assert again.state == PENDING


async def test_a_cancel_that_overtakes_its_request_across_workers(pair: tuple[Runtime, Runtime]) -> None:
    a, b = pair
    assert not await b.cancel("s1", 2)  # held by nobody yet: every worker remembers it (I9)
    await fence(a)
    replies = Replies()
    entry = await start(a, "s1", 2, replies)
    assert entry.state == CANCELLED
    assert entry.task is None  # never ran
    assert replies.got == [(entry, None)]
    await fence(a)  # A has told the others, and B acts on it before on this fence
    await fence(b)
    elsewhere = await start(b, "s1", 2, Replies())
    assert elsewhere.state == PENDING


async def test_end_session_through_b_closes_as_requests_and_streams(pair: tuple[Runtime, Runtime]) -> None:
    a, b = pair
    now = timezone.now()
    session = await Session.objects.acreate(id="s-end", protocol_version=LATEST_VERSION, last_seen=now)
    a.sessions.remember(session)
    replies = Replies()
    ending = [await start(a, "s-end", n, replies) for n in (1, 2)]
    other = await start(a, "s-other", 1, replies)
    sink, other_sink = Sink(), Sink()
    await a.attach_stream("s-end", sink)
    await a.attach_stream("s-other", other_sink)
    assert await b.end_session("s-end", "session terminated by the client")
    await sink.until(lambda: sink.closed is not None)  # A acted on it: requests first, then streams
    assert sink.closed == "session terminated by the client"
    for entry in ending:
        [reply] = replies.of(entry)
        assert reply is not None
        assert reply["error"] == {
            "code": -32000,
            "message": "Connection closed: session terminated by the client",
        }
        await stopped(entry)
    assert other.state == PENDING
    assert replies.of(other) == []
    assert other_sink.closed is None
    assert len(a.sessions) == 0  # the cached copy is dropped at once
    assert (await Session.objects.aget(pk="s-end")).ended_at is not None
    assert not await b.end_session("s-end", "again")  # ended already


async def test_an_abort_request_gets_its_result(pair: tuple[Runtime, Runtime]) -> None:
    a, _ = pair
    layer = get_channel_layer(LAYER)
    replies = Replies()
    entry = await start(a, "s1", 3, replies)

    async def abort(key: str) -> AbortResult:
        reply_to = await layer.new_channel()
        await layer.send(a.channel, to_event(AbortRequest(session_id="s1", key=key, reply_to=reply_to)))
        result = parse_event(await asyncio.wait_for(layer.receive(reply_to), 5))
        assert isinstance(result, AbortResult)
        assert (result.session_id, result.key) == ("s1", key)
        return result

    assert (await abort(request_key(3))).aborted
    assert replies.got == [(entry, aborted_response(3))]
    await stopped(entry)
    assert not (await abort(request_key(3))).aborted  # settled already
    assert not (await abort(request_key(404))).aborted  # never held here
    assert len(replies.got) == 1


async def test_stream_messages_reach_the_attached_sinks_only(pair: tuple[Runtime, Runtime]) -> None:
    a, b = pair
    layer = get_channel_layer(LAYER)
    sink_a, sink_b, sink_b2 = Sink(), Sink(), Sink()
    await a.attach_stream("s1", sink_a)
    await b.attach_stream("s1", sink_b)
    await b.attach_stream("s2", sink_b2)  # B holds a stream of another session too
    first = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": 1}}
    await layer.group_send(session_group("s1"), to_event(StreamMessage(session_id="s1", message=first)))
    await sink_a.until(lambda: bool(sink_a.got))
    await sink_b.until(lambda: bool(sink_b.got))
    await a.detach_stream("s1", sink_a)
    second = {**first, "params": {"n": 2}}
    await layer.group_send(session_group("s1"), to_event(StreamMessage(session_id="s1", message=second)))
    third = {**first, "params": {"n": 3}}
    await layer.group_send(session_group("s2"), to_event(StreamMessage(session_id="s2", message=third)))
    await sink_b.until(lambda: len(sink_b.got) == 2)  # it was sent
    await sink_b2.until(lambda: bool(sink_b2.got))
    await fence(a)  # had A still been in the group, the message would have been queued before the fence
    await fence(b)
    assert sink_a.got == [first]
    assert sink_b.got == [first, second]  # and nothing of the other session
    assert sink_b2.got == [third]
    await a.detach_stream("s1", sink_a)  # detaching twice is harmless


async def test_shutdown_answers_everything_and_flushes_the_ledger(
    make: Callable[..., Any], ledger: Ledger
) -> None:
    a = await make("worker-a", flush_interval=60.0)  # the writer's loop would not flush before the test ends
    replies = Replies()
    held = [await start(a, "s1", 1, replies), await start(a, None, 2, replies)]
    sink = Sink()
    await a.attach_stream("s1", sink)
    assert await a.ashutdown("server shutting down") == 2
    for entry in held:
        [reply] = replies.of(entry)
        assert reply is not None
        assert reply["error"] == {"code": -32000, "message": "Connection closed: server shutting down"}
        await stopped(entry)
    assert sink.closed == "server shutting down"
    assert len(a.requests) == 0
    assert len(a.writer) == 0
    for entry in held:  # written by the shutdown itself
        stored = await ledger.aget(entry.record)
        assert stored is not None
        assert stored.state == CLOSED
    assert await ledger.apending() == []
    assert await a.ashutdown() == 0


def test_a_runtime_names_its_worker_and_uses_the_configured_ledger() -> None:
    from mcp_server.ledger import get_ledger

    runtime = Runtime()
    assert runtime.worker_id.split(":")[1] == str(os.getpid())
    assert Runtime().worker_id != runtime.worker_id  # each runtime is a worker of its own
    assert Runtime(worker_id="w-1").worker_id == "w-1"
    assert runtime.ledger is get_ledger()


def test_every_message_a_worker_receives_has_the_method_that_acts_on_it() -> None:
    """``Runtime.handle`` goes by the message's type: each type of the union but the abort's result (sent
    to the asker's own channel, awaited there) maps to a method of this runtime."""
    runtime = Runtime(worker_id="table")
    acts = runtime._message_table()
    assert set(acts) == set(get_args(WorkerMessage)) - {AbortResult}
    assert all(getattr(act, "__self__", None) is runtime for act in acts.values())


class LeakingLayer(InMemoryChannelLayer):  # type: ignore[misc]
    """An in-memory layer whose first ``receive`` on each channel raises ``CancelledError`` though nobody
    cancelled its caller, as ``channels_redis`` can when a process's receivers share one receive."""

    leaked: set[str] = set()

    async def receive(self, channel: str) -> dict[str, Any]:
        if channel not in LeakingLayer.leaked:
            LeakingLayer.leaked.add(channel)
            raise asyncio.CancelledError
        return await super().receive(channel)  # type: ignore[no-any-return]


async def test_a_cancel_that_escapes_the_layer_does_not_stop_a_worker_listening(
    settings: Any, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker whose layer's ``receive`` raised a ``CancelledError`` of its own keeps receiving what other
    workers send (it used to end its listening, silently: deaf to every cancel, abort and revocation)."""
    settings.CHANNEL_LAYERS = {LAYER: {"BACKEND": f"{__name__}.LeakingLayer"}}
    LeakingLayer.leaked = set()
    a = Runtime(worker_id="worker-a", ledger=ledger, channel_layer_alias=LAYER, flush_interval=0.01)
    b = Runtime(worker_id="worker-b", ledger=ledger, channel_layer_alias=LAYER, flush_interval=0.01)
    await a.start()
    await b.start()
    try:
        replies = Replies()
        entry = await start(a, "s-leak", 1, replies)
        assert not await b.cancel("s-leak", 1)  # told to every worker: a must still hear it
        await replies.until(lambda: bool(replies.got))
        assert replies.of(entry) == [None]
        assert a.channel in LeakingLayer.leaked
        assert "cancelled from within the layer" in caplog.text
    finally:
        for runtime in (a, b):
            await runtime.requests.shutdown("test over")
            await runtime.aclose()
