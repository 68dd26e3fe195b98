"""``Context``: what a handler asks of its request, down to the messages that leave and the answers that
come back (``protocol/context.py``, ``protocol/peer.py``, ``protocol/outbound.py``).

Most tests run the real ``RequestPeer`` / ``OutboundTable`` / ``handle_client_message`` path in this process,
with a transport whose client is the test (:class:`LoopbackPeer`, a ``RequestPeer`` like the HTTP exchange's
and the stdio loop's). ``tests/end_to_end/core/test_context.py`` proves the same over HTTP: a progress token,
and a client's error answer that reaches the handler through another worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import get_channel_layer

from mcp_server import MCPServer
from mcp_server.conf import mcp_settings
from mcp_server.core.context import LOG_LEVELS, Context, SessionState
from mcp_server.core.records import LedgerRecord
from mcp_server.protocol.client_messages import handle_client_message
from mcp_server.protocol.outbound import aforward_answer
from mcp_server.protocol.peer import RequestPeer
from mcp_server.protocol.settlement import ANSWERED, CANCELLED, PENDING, PendingRequest
from mcp_server.runtime import Runtime
from mcp_server.runtime.outbound import OutboundTable
from mcp_server.wire.errors import CONNECTION_CLOSED, JSONRPCError
from mcp_server.wire.jsonrpc import JSONRPCResponse, WireError, parse_message
from tests.support.raw import rpc
from tests.testapp.mcp import FEATURE_ELICIT_SCHEMA

SESSION = "ctx-session"
ALL_CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
CLIENT_ERROR = {"code": -32042, "message": "The user closed the dialog", "data": {"where": "test"}}


RUNTIME: Runtime
"""The runtime of the test running now (a fresh one per test, see ``_runtime``)."""
outbound: OutboundTable
"""Its table of server-to-client requests waiting for the client."""


@pytest.fixture(autouse=True)
def _runtime() -> None:
    global RUNTIME, outbound
    RUNTIME = Runtime(flush_interval=60)
    outbound = RUNTIME.outbound


def entry(state: str) -> PendingRequest:
    """An in-flight request in ``state`` (its settlement is not under test here)."""

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        raise AssertionError("not settled here")

    record = LedgerRecord(session_id=SESSION, request_key="i:7", method="tools/call")
    return PendingRequest(record=record, request_id=7, deliver=deliver, state=state)


class LoopbackPeer(RequestPeer):
    """A request's transport whose client is the test: emitted messages land in ``sent``."""

    def __init__(self, *, channel: str = "", reading: bool = True) -> None:
        super().__init__(RUNTIME.outbound, channel)
        self.reading = reading
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.entry = entry(PENDING)

    @property
    def session_id(self) -> str | None:
        return SESSION

    async def emit(self, message: dict[str, Any]) -> bool:
        if not self.reading:
            return False
        self.sent.put_nowait(message)
        return True

    def drained(self) -> list[dict[str, Any]]:
        """Everything emitted so far (emit is synchronous: nothing is on its way)."""
        out = []
        while not self.sent.empty():
            out.append(self.sent.get_nowait())
        return out


def make_context(
    peer: RequestPeer,
    *,
    capabilities: dict[str, Any] | None = None,
    log_level: str | None = None,
    params: dict[str, Any] | None = None,
) -> Context:
    session = SessionState(
        id=SESSION,
        protocol_version="2025-11-25",
        client_capabilities=ALL_CAPABILITIES if capabilities is None else capabilities,
        log_level=log_level,
    )
    return Context(
        server=MCPServer("context-tests"),
        session=session,
        request_id=7,
        method="tools/call",
        params=params or {},
        peer=peer,
    )


async def asked(peer: LoopbackPeer) -> dict[str, Any]:
    """The next server-to-client request the handler sent."""
    async with asyncio.timeout(5):
        return await peer.sent.get()


async def answer(ctx: Context, message: dict[str, Any]) -> None:
    """Hand a client's message to the server as a POST or a stdio line does."""
    await handle_client_message(RUNTIME, ctx.session, parse_message(message))


# -- elicitation, sampling, roots: requests out, answers back ------------------------------------------------


async def test_elicit_asks_for_a_form_and_returns_the_clients_answer() -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ctx.elicit("Your name?", FEATURE_ELICIT_SCHEMA))
    request = await asked(peer)
    assert request == {
        "jsonrpc": "2.0",
        "id": request["id"],
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Your name?", "requestedSchema": FEATURE_ELICIT_SCHEMA},
    }
    assert isinstance(request["id"], str)
    assert request["id"].startswith("srv-")
    assert len(outbound) == 1
    content = {"action": "accept", "content": {"name": "Ada"}}
    await answer(ctx, {"jsonrpc": "2.0", "id": request["id"], "result": content})
    assert await task == content
    assert len(outbound) == 0


async def test_an_answer_with_a_lone_surrogate_never_reaches_the_handler() -> None:
    """What the user typed is text the handler stores; a lone surrogate (a JSON escape, no text) would fail
    its query on SQLite and PostgreSQL alike: the handler's ask raises -32602 naming where it is."""
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ctx.elicit("Your name?", FEATURE_ELICIT_SCHEMA))
    request = await asked(peer)
    unreadable = {"action": "accept", "content": {"name": "Ad\ud800a"}}
    await answer(ctx, {"jsonrpc": "2.0", "id": request["id"], "result": unreadable})
    with pytest.raises(JSONRPCError) as refused:
        await task
    assert refused.value.code == -32602
    assert refused.value.message == (
        "the client's answer is not a valid elicitation/create result: content.name: "
        "a string holds a lone UTF-16 surrogate"
    )


async def test_each_request_gets_its_own_id() -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    first = asyncio.create_task(ctx.elicit("First?", FEATURE_ELICIT_SCHEMA))
    second = asyncio.create_task(ctx.elicit("Second?", FEATURE_ELICIT_SCHEMA))
    one, two = await asked(peer), await asked(peer)
    assert one["id"] != two["id"]
    # Answered out of order: each answer reaches the call that asked.
    by_message = {one["params"]["message"]: one["id"], two["params"]["message"]: two["id"]}
    await answer(ctx, {"jsonrpc": "2.0", "id": by_message["Second?"], "result": {"action": "decline"}})
    await answer(ctx, {"jsonrpc": "2.0", "id": by_message["First?"], "result": {"action": "cancel"}})
    assert await first == {"action": "cancel"}
    assert await second == {"action": "decline"}


def _elicit(ctx: Context) -> Any:
    return ctx.elicit("Your name?", FEATURE_ELICIT_SCHEMA)


def _sample(ctx: Context) -> Any:
    return ctx.sample("What is 2+2?")


def _roots(ctx: Context) -> Any:
    return ctx.list_roots()


ASKS = [
    pytest.param(_elicit, "elicitation/create", "elicitation", id="elicit"),
    pytest.param(_sample, "sampling/createMessage", "sampling", id="sample"),
    pytest.param(_roots, "roots/list", "roots", id="list_roots"),
]


@pytest.mark.parametrize(("ask", "method", "capability"), ASKS)
@pytest.mark.parametrize(
    "error",
    [CLIENT_ERROR, {"code": -1, "message": "User rejected the request"}],
    ids=["with-data", "without-data"],
)
async def test_a_client_error_answer_raises_that_error_in_the_handler(
    ask: Any, method: str, capability: str, error: dict[str, Any]
) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ask(ctx))
    request = await asked(peer)
    assert request["method"] == method
    await answer(ctx, {"jsonrpc": "2.0", "id": request["id"], "error": error})
    with pytest.raises(JSONRPCError) as raised:
        await task
    assert raised.value.to_error() == error
    assert len(outbound) == 0


@pytest.mark.parametrize(("ask", "method", "capability"), ASKS)
async def test_an_undeclared_capability_is_refused_before_anything_is_sent(
    ask: Any, method: str, capability: str
) -> None:
    peer = LoopbackPeer()
    others = {k: v for k, v in ALL_CAPABILITIES.items() if k != capability}
    ctx = make_context(peer, capabilities=others)
    with pytest.raises(JSONRPCError) as raised:
        await ask(ctx)
    assert raised.value.to_error() == {
        "code": -32600,
        "message": f"The client did not declare the {capability!r} capability",
    }
    assert peer.drained() == []
    assert len(outbound) == 0


async def test_a_client_that_stopped_reading_fails_the_request_at_once() -> None:
    peer = LoopbackPeer(reading=False)
    ctx = make_context(peer)
    with pytest.raises(JSONRPCError) as raised:
        async with asyncio.timeout(5):
            await ctx.elicit("Anyone there?", FEATURE_ELICIT_SCHEMA)
    assert raised.value.to_error() == {
        "code": CONNECTION_CLOSED,
        "message": "Connection closed: the client stopped reading",
    }
    assert len(outbound) == 0


async def test_a_cancelled_handler_stops_waiting_and_a_late_answer_is_ignored() -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ctx.elicit("Your name?", FEATURE_ELICIT_SCHEMA))
    request = await asked(peer)
    assert len(outbound) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(outbound) == 0
    late = parse_message({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}})
    assert isinstance(late, JSONRPCResponse)
    assert outbound.resolve(SESSION, late) is False
    await handle_client_message(RUNTIME, ctx.session, late)  # nobody waits: dropped, nothing raised


async def test_an_answer_counts_once_and_only_in_its_own_session() -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ctx.list_roots())
    request = await asked(peer)
    reply = parse_message({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": []}})
    assert isinstance(reply, JSONRPCResponse)
    assert outbound.resolve("another-session", reply) is False
    assert not task.done()
    assert outbound.resolve(SESSION, reply) is True
    assert outbound.resolve(SESSION, reply) is False
    assert await task == []


async def test_an_error_without_an_id_resolves_nothing() -> None:
    unreadable = parse_message(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    )
    assert isinstance(unreadable, WireError)
    assert outbound.resolve(SESSION, unreadable) is False
    assert await aforward_answer(SESSION, unreadable) is False
    assert await aforward_answer(None, unreadable) is False


async def test_answers_forwarded_from_another_worker_resolve_the_waiting_handler() -> None:
    """The route a request leaves in the cache takes the answer, error or result, to the waiting worker."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    assert layer is not None
    channel = await layer.new_channel()
    peer = LoopbackPeer(channel=channel)
    ctx = make_context(peer)

    refused = asyncio.create_task(ctx.elicit("Your name?", FEATURE_ELICIT_SCHEMA))
    request = await asked(peer)
    error = parse_message({"jsonrpc": "2.0", "id": request["id"], "error": CLIENT_ERROR})
    assert isinstance(error, WireError)
    assert await aforward_answer(SESSION, error) is True  # what a worker without the waiter does
    assert await aforward_answer(SESSION, error) is False  # the route is used up
    async with asyncio.timeout(5):
        delivered = await layer.receive(channel)
    assert delivered == {
        "type": "mcp.answer",
        "session_id": SESSION,
        "message": {"jsonrpc": "2.0", "id": request["id"], "error": CLIENT_ERROR},
    }
    assert outbound.resolve_forwarded(delivered["session_id"], delivered["message"]) is True
    with pytest.raises(JSONRPCError) as raised:
        await refused
    assert raised.value.to_error() == CLIENT_ERROR

    accepted = asyncio.create_task(ctx.elicit("Your name?", FEATURE_ELICIT_SCHEMA))
    request = await asked(peer)
    content = {"action": "accept", "content": {"name": "Ada"}}
    result = parse_message({"jsonrpc": "2.0", "id": request["id"], "result": content})
    assert isinstance(result, JSONRPCResponse)
    assert await aforward_answer(SESSION, result) is True
    async with asyncio.timeout(5):
        delivered = await layer.receive(channel)
    assert delivered["message"] == {"jsonrpc": "2.0", "id": request["id"], "result": content}
    assert outbound.resolve_forwarded(SESSION, delivered["message"]) is True
    assert await accepted == content


async def test_a_forwarded_message_that_is_no_answer_resolves_nothing() -> None:
    assert outbound.resolve_forwarded(SESSION, {"not": "json-rpc"}) is False
    assert outbound.resolve_forwarded(SESSION, rpc("ping", None, "srv-x")) is False
    assert outbound.resolve_forwarded(SESSION, {"jsonrpc": "2.0", "id": "srv-x", "result": {}}) is False


async def test_an_answer_without_a_route_is_not_forwarded() -> None:
    stray = parse_message({"jsonrpc": "2.0", "id": "srv-nobody", "result": {}})
    assert isinstance(stray, JSONRPCResponse)
    assert await aforward_answer(SESSION, stray) is False


@pytest.mark.parametrize(
    ("messages", "kwargs", "expected"),
    [
        (
            "What is 2+2?",
            {},
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": "What is 2+2?"}}],
                "maxTokens": 1000,
            },
        ),
        (
            [{"role": "assistant", "content": {"type": "text", "text": "Hi"}}],
            {"max_tokens": 5, "system_prompt": "Be brief.", "temperature": 0.1, "stopSequences": ["\n"]},
            {
                "messages": [{"role": "assistant", "content": {"type": "text", "text": "Hi"}}],
                "maxTokens": 5,
                "temperature": 0.1,
                "stopSequences": ["\n"],
                "systemPrompt": "Be brief.",
            },
        ),
    ],
)
async def test_sample_builds_the_request_the_client_gets(
    messages: Any, kwargs: dict[str, Any], expected: dict[str, Any]
) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ctx.sample(messages, **kwargs))
    request = await asked(peer)
    assert request["method"] == "sampling/createMessage"
    assert request["params"] == expected
    reply = {
        "role": "assistant",
        "content": {"type": "text", "text": "4"},
        "model": "m",
        "stopReason": "endTurn",
    }
    await answer(ctx, {"jsonrpc": "2.0", "id": request["id"], "result": reply})
    assert await task == reply


@pytest.mark.parametrize(
    ("result", "roots"),
    [
        ({"roots": [{"uri": "file:///srv/", "name": "srv"}]}, [{"uri": "file:///srv/", "name": "srv"}]),
        ({"roots": []}, []),
        ({}, []),
        ({"roots": "file:///srv/"}, []),
    ],
)
async def test_list_roots_returns_the_clients_list(
    result: dict[str, Any], roots: list[dict[str, Any]]
) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer)
    task = asyncio.create_task(ctx.list_roots())
    request = await asked(peer)
    assert request == {"jsonrpc": "2.0", "id": request["id"], "method": "roots/list"}
    await answer(ctx, {"jsonrpc": "2.0", "id": request["id"], "result": result})
    assert await task == roots


# -- logging -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [None, *LOG_LEVELS])
async def test_log_sends_the_levels_at_or_above_the_clients_level(threshold: str | None) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer, log_level=threshold)
    for level in LOG_LEVELS:
        await ctx.log(level, {"n": level}, logger="app")
    sent = [m["params"]["level"] for m in peer.drained()]
    assert sent == ([] if threshold is None else list(LOG_LEVELS[LOG_LEVELS.index(threshold) :]))


async def test_log_messages_carry_data_and_logger() -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer, log_level="debug")
    await ctx.log("notice", {"rows": 3}, logger="db")
    await ctx.log("notice", "no logger", logger="")
    await ctx.debug("d")
    await ctx.info("i")
    await ctx.warning("w")
    await ctx.error("e")
    assert peer.drained() == [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": p}
        for p in [
            {"level": "notice", "data": {"rows": 3}, "logger": "db"},
            {"level": "notice", "data": "no logger"},
            {"level": "debug", "data": "d"},
            {"level": "info", "data": "i"},
            {"level": "warning", "data": "w"},
            {"level": "error", "data": "e"},
        ]
    ]


@pytest.mark.parametrize("threshold", [None, "debug"])
async def test_an_unknown_log_level_is_a_programming_error(threshold: str | None) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer, log_level=threshold)
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        await ctx.log("loud", "x")
    assert peer.drained() == []


# -- progress, meta, and notifications after settlement ----------------------------------------------------


@pytest.mark.parametrize("token", ["tok-1", 0, 42, "é🎉"])
async def test_progress_goes_to_the_clients_token(token: str | int) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer, params={"_meta": {"progressToken": token}})
    assert ctx.progress_token == token
    await ctx.report_progress(1)
    await ctx.report_progress(2, 4)
    await ctx.report_progress(3, message="three")
    await ctx.report_progress(4, 4, "done")
    assert [m["params"] for m in peer.drained()] == [
        {"progressToken": token, "progress": 1},
        {"progressToken": token, "progress": 2, "total": 4},
        {"progressToken": token, "progress": 3, "message": "three"},
        {"progressToken": token, "progress": 4, "total": 4, "message": "done"},
    ]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": "not-a-dict"},
        {"_meta": {}},
        {"_meta": {"progressToken": None}},
        {"_meta": {"progressToken": 1.5}},
        {"_meta": {"progressToken": True}},
        {"_meta": {"progressToken": ["a"]}},
        {"_meta": {"progressToken": "\ud800"}},  # valid in the request's JSON; UTF-8 cannot carry it back
        {"_meta": {"progressToken": "a\udfffb"}},
    ],
)
async def test_without_a_usable_progress_token_progress_sends_nothing(params: dict[str, Any]) -> None:
    peer = LoopbackPeer()
    ctx = make_context(peer, params=params)
    assert ctx.progress_token is None
    await ctx.report_progress(1, 2, "half")
    assert peer.drained() == []


def test_meta_and_session_id() -> None:
    ctx = make_context(LoopbackPeer(), params={"_meta": {"progressToken": "t", "x": 1}})
    assert ctx.meta == {"progressToken": "t", "x": 1}
    assert ctx.session_id == SESSION
    assert make_context(LoopbackPeer(), params={"_meta": 3}).meta == {}


@pytest.mark.parametrize(
    ("state", "sent"), [(PENDING, True), (ANSWERED, False), (CANCELLED, False), (None, False)]
)
async def test_notifications_go_out_only_while_the_request_is_pending(state: str | None, sent: bool) -> None:
    """A settled request sends nothing more; neither does a peer that holds no request (``entry`` unset)."""
    peer = LoopbackPeer()
    peer.entry = None if state is None else entry(state)
    ctx = make_context(peer, log_level="debug", params={"_meta": {"progressToken": "t"}})
    await ctx.info("hello")
    await ctx.report_progress(1)
    assert len(peer.drained()) == (2 if sent else 0)


def test_sessionless_is_one_test_of_the_revision_and_modern_its_deprecated_alias() -> None:
    """``SessionState.sessionless`` is the one test of "this request speaks the sessionless revision";
    ``Context.sessionless`` asks it, and the old ``Context.modern`` still answers it with a warning."""
    handshake = make_context(LoopbackPeer())
    sessionless = Context(
        server=MCPServer("context-tests"),
        session=SessionState(id=None, protocol_version="2026-07-28"),
        request_id=8,
        method="tools/list",
        params={},
        peer=LoopbackPeer(),
    )
    assert (handshake.session.sessionless, handshake.sessionless) == (False, False)
    assert (sessionless.session.sessionless, sessionless.sessionless) == (True, True)
    assert not SessionState(id=None, protocol_version="2025-03-26").sessionless  # stateless handshake era
    for ctx in (handshake, sessionless):
        with pytest.warns(DeprecationWarning, match=r"Context\.modern is deprecated"):
            assert ctx.modern is ctx.sessionless
