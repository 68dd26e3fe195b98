"""``PostExchange``: the answers of one POST framed as one JSON body or an SSE stream, driven at the ASGI
boundary (a recording ``send``) with a real ``Runtime`` running the test app's tools."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.cache import caches

from mcp_server.core.context import SessionState
from mcp_server.core.records import request_key
from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.transports.exchange import PostExchange
from mcp_server.wire.jsonrpc import IncomingMessage, parse_message
from mcp_server.wire.messages import EndSession
from mcp_server.wire.versions import LATEST_VERSION
from tests.support.wait import wait_for

SESSION = "s-exchange"


@dataclass
class Response:
    """What the exchange sent through ASGI."""

    sent: list[dict[str, Any]]

    @property
    def status(self) -> int:
        assert self.sent[0]["type"] == "http.response.start"
        return int(self.sent[0]["status"])

    @property
    def content_type(self) -> str | None:
        headers = dict(self.sent[0]["headers"])
        value = headers.get(b"content-type")
        return None if value is None else bytes(value).decode()

    @property
    def bodies(self) -> list[bytes]:
        assert all(m["type"] == "http.response.body" for m in self.sent[1:])
        assert [m.get("more_body", False) for m in self.sent[1:]] == [True] * (len(self.sent) - 2) + [False]
        return [bytes(m["body"]) for m in self.sent[1:]]

    def json(self) -> Any:
        assert self.content_type == "application/json"
        assert len(self.bodies) == 1
        # A whole body goes out with its length (one write, no chunked framing).
        assert dict(self.sent[0]["headers"])[b"content-length"] == str(len(self.bodies[0])).encode()
        return json.loads(self.bodies[0])

    def events(self) -> list[dict[str, Any]]:
        assert self.content_type == "text/event-stream"
        *chunks, end = self.bodies
        assert end == b""
        events = []
        for chunk in chunks:
            assert chunk.endswith(b"\n\n")
            if chunk.startswith(b"id: ") and chunk.endswith(b"\ndata: \n\n"):  # a priming event
                continue
            chunk = re.sub(rb"^id: p[0-9a-f]{32}:\d+\n", b"", chunk)  # resumable: every event has an id
            assert chunk.startswith(b"event: message\ndata: ")
            events.append(json.loads(chunk.removeprefix(b"event: message\ndata: ")))
        return events


@pytest.fixture
async def runtime(settings: Any) -> AsyncIterator[Runtime]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    caches["default"].clear()
    runtime = Runtime(
        worker_id="worker-x",
        ledger=CacheLedger({"RETENTION": 60}),
        channel_layer_alias="default",
        flush_interval=0.01,
    )
    await runtime.start()
    yield runtime
    await runtime.requests.shutdown("test over")
    await runtime.aclose()


def call(request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if tool == "progress":
        params["_meta"] = {"progressToken": f"p{request_id}"}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def cancel(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


def exchange(runtime: Runtime, mode: str, is_batch: bool) -> tuple[PostExchange, Response]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    session = SessionState(id=SESSION, protocol_version=LATEST_VERSION)
    post = PostExchange(runtime=runtime, server=mcp, session=session, mode=mode, send=send, is_batch=is_batch)
    return post, Response(sent)


async def post(runtime: Runtime, mode: str, *body: dict[str, Any], batch: bool | None = None) -> Response:
    """One POST carrying ``body`` (a batch when it has several messages), run to its last byte."""
    is_batch = len(body) > 1 if batch is None else batch
    ex, response = exchange(runtime, mode, is_batch)
    messages: list[IncomingMessage | dict[str, Any]] = [parse_message(m) for m in body]
    await asyncio.wait_for(ex.run(messages), 10)
    return response


def text_of(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


@pytest.mark.parametrize("mode", ["json", "auto"])
async def test_one_request_one_json_object(runtime: Runtime, mode: str) -> None:
    response = await post(runtime, mode, call(1, "echo", text="hi"))
    assert response.status == 200
    body = response.json()
    assert body["id"] == 1
    assert text_of(body) == "hi"


@pytest.mark.parametrize("mode", ["json", "auto"])
async def test_a_batch_is_one_json_array(runtime: Runtime, mode: str) -> None:
    response = await post(runtime, mode, call(1, "echo", text="a"), call(2, "echo", text="b"))
    body = response.json()
    assert isinstance(body, list)
    assert sorted((a["id"], text_of(a)) for a in body) == [(1, "a"), (2, "b")]
    one = (await post(runtime, mode, call(3, "echo", text="c"), batch=True)).json()  # a batch of one
    assert [a["id"] for a in one] == [3]


@pytest.mark.parametrize("tool", ["echo", "progress"])
async def test_sse_streams_every_message_then_ends(runtime: Runtime, tool: str) -> None:
    arguments = {"text": "hi"} if tool == "echo" else {"steps": 2}
    response = await post(runtime, "sse", call(1, tool, **arguments))
    assert response.status == 200
    events = response.events()
    notes = [e for e in events if e.get("method") == "notifications/progress"]
    assert len(notes) == (2 if tool == "progress" else 0)
    assert [n["params"]["progress"] for n in notes] == [1, 2][: len(notes)]
    assert events[-1]["id"] == 1
    assert "result" in events[-1]
    assert len(events) == len(notes) + 1


async def test_auto_switches_to_a_stream_when_a_notification_comes_first(runtime: Runtime) -> None:
    response = await post(runtime, "auto", call(1, "progress", steps=3), call(2, "echo", text="b"))
    events = response.events()
    assert [e["params"]["progress"] for e in events if "method" in e] == [1, 2, 3]
    assert sorted(e["id"] for e in events if "id" in e) == [1, 2]
    progress_answer = next(e for e in events if e.get("id") == 1)
    assert events.index(progress_answer) > max(i for i, e in enumerate(events) if "method" in e)


@pytest.mark.parametrize("mode", ["json", "sse", "auto"])
@pytest.mark.parametrize(
    "body",
    [
        [{"jsonrpc": "2.0", "method": "notifications/initialized"}],
        [cancel(404)],
        [{"jsonrpc": "2.0", "id": "srv-nobody", "result": {}}],  # an answer no handler waits for
        [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, cancel(405)],
    ],
    ids=["initialized", "cancel", "answer", "two"],
)
async def test_nothing_to_answer_is_202_without_a_body(
    runtime: Runtime, mode: str, body: list[dict[str, Any]]
) -> None:
    response = await post(runtime, mode, *body)
    assert response.sent == [
        {"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]


async def held(runtime: Runtime, request_id: int) -> None:
    """Wait until the runtime holds the request (polled: registration has no event of its own)."""

    async def arrived() -> bool:
        return runtime.requests.get(SESSION, request_key(request_id)) is not None

    await wait_for(arrived, f"request {request_id} to arrive", within=5)


@pytest.mark.parametrize("mode", ["json", "sse", "auto"])
async def test_a_cancelled_request_is_settled_without_an_answer(runtime: Runtime, mode: str) -> None:
    ex, response = exchange(runtime, mode, False)
    running = asyncio.create_task(ex.run([parse_message(call(5, "slow", seconds=30))]))
    await held(runtime, 5)
    assert (await post(runtime, "json", cancel(5))).status == 202
    await asyncio.wait_for(running, 5)
    if mode == "sse":
        assert response.events() == []  # the stream closes once its requests are all settled
    else:
        assert response.status == 202  # nothing left to answer: no body
        assert response.bodies == [b""]
    assert len(runtime.requests) == 0


@pytest.mark.parametrize("mode", ["json", "auto"])
async def test_a_cancelled_request_leaves_its_siblings_answered(runtime: Runtime, mode: str) -> None:
    body = [call(5, "slow", seconds=30), call(6, "echo", text="left")]
    ex, response = exchange(runtime, mode, True)
    running = asyncio.create_task(ex.run([parse_message(m) for m in body]))
    await held(runtime, 5)
    await post(runtime, "json", cancel(5))
    await asyncio.wait_for(running, 5)
    answers = response.json()
    assert [(a["id"], text_of(a)) for a in answers] == [(6, "left")]


@pytest.mark.parametrize(("is_batch", "shape"), [(False, dict), (True, list)], ids=["single", "batch"])
async def test_a_session_ending_keeps_the_json_envelope(
    runtime: Runtime, is_batch: bool, shape: type
) -> None:
    ex, response = exchange(runtime, "json", is_batch)
    running = asyncio.create_task(ex.run([parse_message(call(5, "slow", seconds=30))]))
    await held(runtime, 5)
    await runtime.handle(EndSession(session_id=SESSION, reason="session terminated by the client"))
    await asyncio.wait_for(running, 5)
    body = response.json()
    assert isinstance(body, shape)
    [answer] = body if isinstance(body, list) else [body]
    assert answer == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32000, "message": "Connection closed: session terminated by the client"},
    }


@pytest.mark.parametrize("mode", ["json", "auto"])
async def test_a_duplicate_id_in_a_batch_gets_its_error_in_the_batch(runtime: Runtime, mode: str) -> None:
    # The first is still running (0.2 s) when the second, with the same id, is taken.
    response = await post(runtime, mode, call(7, "slow", seconds=0.2), call(7, "echo", text="twice"))
    answers = response.json()
    assert isinstance(answers, list)
    assert len(answers) == 2
    assert all(a["id"] == 7 for a in answers)
    [error] = [a["error"] for a in answers if "error" in a]
    assert error["code"] == -32600
    [result] = [a for a in answers if "result" in a]
    assert text_of(result) == "slept 0.2"


def initialize_message() -> IncomingMessage:
    params = {
        "protocolVersion": LATEST_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return parse_message({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["json", "auto", "sse"])
async def test_initialize_is_framed_like_every_answer_and_names_the_new_session(
    runtime: Runtime, mode: str
) -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    handshake = SessionState(id=None, protocol_version=LATEST_VERSION)
    ex = PostExchange(runtime=runtime, server=mcp, session=handshake, mode=mode, send=send, is_batch=False)
    await asyncio.wait_for(ex.run([initialize_message()]), 10)

    response = Response(sent)
    assert response.status == 200
    answer = response.events()[0] if mode == "sse" else response.json()
    assert answer["id"] == 0
    assert answer["result"]["protocolVersion"] == LATEST_VERSION
    session_id = bytes(dict(sent[0]["headers"])[b"mcp-session-id"]).decode()
    stored = await runtime.sessions.aget_active(session_id, mcp.key)
    assert stored is not None
    assert stored.state.protocol_version == LATEST_VERSION


@pytest.mark.django_db(transaction=True)
async def test_a_stateless_initialize_names_no_session(runtime: Runtime) -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    handshake = SessionState(id=None, protocol_version=LATEST_VERSION)
    ex = PostExchange(
        runtime=runtime, server=mcp, session=handshake, mode="auto", send=send, is_batch=False, stateless=True
    )
    await asyncio.wait_for(ex.run([initialize_message()]), 10)

    assert Response(sent).json()["result"]["protocolVersion"] == LATEST_VERSION
    assert b"mcp-session-id" not in dict(sent[0]["headers"])
