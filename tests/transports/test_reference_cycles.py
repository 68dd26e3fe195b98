"""A served request leaves no reference cycle behind: everything it made is freed by reference counting as
soon as it is answered. A cycle per request (the request's task holding its context, the context the request)
made every request's objects wait for the cyclic garbage collector, whose passes over them were a tenth of a
call's CPU at high concurrency."""

from __future__ import annotations

import asyncio
import gc
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.transports.consumer import MCPConsumer
from mcp_server.wire.asgi import Message
from tests.support.collector import cyclic_garbage
from tests.support.raw import MODERN, sessionless_meta
from tests.support.runtimes import in_memory_runtime
from tests.support.stdio import INITIALIZE

pytestmark = pytest.mark.django_db(transaction=True)  # sessions, and the upkeep's queries

META = sessionless_meta(client_info={"name": "cycles", "version": "1"})


@pytest.fixture
async def runtime(settings: Any) -> AsyncIterator[Runtime]:
    async with in_memory_runtime(settings, "worker-cycles") as made:
        yield made


async def post(
    runtime: Runtime, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, bytes, dict[str, str]]:
    """One POST through the consumer, as an ASGI server makes it; its status, body and headers."""
    data = json.dumps(body).encode()
    raw = [(b"host", b"testserver"), (b"content-type", b"application/json")]
    raw += [(b"accept", b"application/json, text/event-stream")]
    raw += [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": raw, "client": ("127.0.0.1", 1)}
    bodies = [{"type": "http.request", "body": data, "more_body": False}]
    sent: list[Message] = []

    async def receive() -> Message:
        if bodies:
            return bodies.pop()
        await asyncio.get_running_loop().create_future()  # cancelled once the response is complete
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    await MCPConsumer(mcp, runtime)(scope, receive, send)
    start, *chunks = sent
    answer = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], b"".join(c.get("body", b"") for c in chunks), answer


SERVED = ("MCPConsumer", "PostExchange", "PendingRequest", "Context", "LazyASGIRequest")


def alive() -> Counter[str]:
    """The objects of a served request still alive, by type (none once it is answered: nothing keeps them,
    not even a cancelled deadline's timer, which holds the task's context until its loop drops it)."""
    return Counter(
        name
        for o in gc.get_objects()
        if (name := type(o).__name__) in SERVED and type(o).__module__.startswith("mcp_server.")
    )


def tool_call(request_id: int, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_a_2026_call_leaves_no_cycle(runtime: Runtime, no_collection: None) -> None:
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    for request_id in range(-3, 0):  # the runtime starts, the caches of first calls fill
        assert (await post(runtime, tool_call(request_id, META), headers))[0] == 200
    cyclic_garbage()
    for request_id in range(1, 21):
        status, body, _ = await post(runtime, tool_call(request_id, META), headers)
        assert status == 200
        assert json.loads(body)["result"]["content"][0]["text"] == "hi"
    assert alive() == Counter()
    assert cyclic_garbage() == Counter()


async def test_a_session_call_leaves_no_cycle(runtime: Runtime, no_collection: None) -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE}
    status, _, answer = await post(runtime, init, {})
    assert status == 200
    session = {"Mcp-Session-Id": answer["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await post(runtime, initialized, session))[0] == 202
    for request_id in range(-3, 0):
        assert (await post(runtime, tool_call(request_id), session))[0] == 200
    cyclic_garbage()
    for request_id in range(1, 21):
        status, body, _ = await post(runtime, tool_call(request_id), session)
        assert status == 200
        assert json.loads(body)["result"]["content"][0]["text"] == "hi"
    assert alive() == Counter()
    assert cyclic_garbage() == Counter()
