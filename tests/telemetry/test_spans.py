"""One SERVER span per request, named, attributed, classified and parented by the MCP semantic conventions:
real requests through the exchange and the request table, recorded by the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.propagate import inject
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from mcp_server.core.context import SessionState
from mcp_server.core.records import request_key
from mcp_server.runtime import Runtime
from mcp_server.wire.jsonrpc import JSONRPCResponse

from .conftest import SESSION, Recorded, call, held, new_post, run

pytestmark = pytest.mark.asyncio


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_tool_call(runtime: Runtime, recorded: Recorded) -> None:
    await run(new_post(runtime), call(1, "echo", text="hi"))
    span = recorded.span("tools/call echo")
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.UNSET
    assert attributes(span) == {
        "mcp.method.name": "tools/call",
        "jsonrpc.request.id": "1",
        "mcp.protocol.version": "2025-11-25",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "mcp.session.id": SESSION,
    }
    assert span.parent is None  # no _meta, no header, no ambient span: a root


async def test_a_tool_error(runtime: Runtime, recorded: Recorded) -> None:
    await run(new_post(runtime), call(2, "raises"))
    span = recorded.span("tools/call raises")
    assert attributes(span)["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in attributes(span)  # the JSON-RPC call itself succeeded
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize(
    ("message", "name", "code"),
    [
        ({"jsonrpc": "2.0", "id": 3, "method": "nope/nothing"}, "nope/nothing", "-32601"),
        (call(3, "no_such_tool"), "tools/call no_such_tool", "-32602"),
    ],
)
async def test_a_refusal_leaves_the_status_unset(
    runtime: Runtime, recorded: Recorded, message: dict[str, Any], name: str, code: str
) -> None:
    await run(new_post(runtime), message)
    span = recorded.span(name)
    assert attributes(span)["rpc.response.status_code"] == code
    assert "error.type" not in attributes(span)
    assert span.status.status_code is StatusCode.UNSET


async def test_a_server_fault_is_an_error(runtime: Runtime, recorded: Recorded) -> None:
    await run(new_post(runtime), {"jsonrpc": "2.0", "id": 4, "method": "test/raise"})
    span = recorded.span("test/raise")
    assert attributes(span)["rpc.response.status_code"] == "-32603"
    assert attributes(span)["error.type"] == "-32603"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Internal error while handling test/raise"


async def test_a_deadline_is_an_error(runtime: Runtime, recorded: Recorded) -> None:
    await run(new_post(runtime), call(5, "short_deadline", seconds=5))
    span = recorded.span("tools/call short_deadline")
    assert attributes(span)["error.type"] == "-32001"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Request timed out after 0.5s"


async def test_a_cancel_is_recorded_not_an_error(runtime: Runtime, recorded: Recorded) -> None:
    post = new_post(runtime)
    running = asyncio.create_task(run(post, call(6, "slow", seconds=30)))
    await held(runtime, 6)
    assert await runtime.requests.cancel(SESSION, request_key(6))
    await asyncio.wait_for(running, 10)
    span = recorded.span("tools/call slow")
    assert [event.name for event in span.events] == ["mcp.request.cancelled"]
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attributes(span)


async def test_a_session_closed_mid_flight_is_an_error(runtime: Runtime, recorded: Recorded) -> None:
    post = new_post(runtime)
    running = asyncio.create_task(run(post, call(7, "slow", seconds=30)))
    await held(runtime, 7)
    assert await runtime.requests.close_session(SESSION, "deleted by the client") == 1
    await asyncio.wait_for(running, 10)
    span = recorded.span("tools/call slow")
    assert attributes(span)["error.type"] == "-32000"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Connection closed: deleted by the client"


async def test_a_batch_has_one_span_per_member(runtime: Runtime, recorded: Recorded) -> None:
    post = new_post(runtime, batch=True)
    await run(post, call(8, "echo", text="a"), call(9, "echo", text="b"), call(10, "raises"))
    spans = recorded.spans()
    assert sorted(attributes(s)["jsonrpc.request.id"] for s in spans) == ["10", "8", "9"]
    assert all(s.kind is SpanKind.SERVER and s.parent is None for s in spans)  # siblings, not nested
    assert len({s.context.trace_id for s in spans}) == 3


async def test_meta_traceparent_is_the_parent_and_the_ambient_span_a_link(
    runtime: Runtime, recorded: Recorded
) -> None:
    tracer = recorded.telemetry.tracer
    with tracer.start_as_current_span("client call", kind=SpanKind.CLIENT) as client:
        meta: dict[str, Any] = {}
        inject(meta)
    with tracer.start_as_current_span("POST /mcp", kind=SpanKind.SERVER) as http:  # as the ASGI middleware's
        await run(new_post(runtime), call(11, "echo", meta=meta, text="traced"))
    span = recorded.span("tools/call echo")
    assert span.context.trace_id == client.get_span_context().trace_id
    assert parent_id(span) == client.get_span_context().span_id
    assert [link.context.span_id for link in span.links] == [http.get_span_context().span_id]


async def test_the_http_header_is_the_parent_without_meta(runtime: Runtime, recorded: Recorded) -> None:
    with recorded.telemetry.tracer.start_as_current_span("upstream") as upstream:
        carrier: dict[str, str] = {}
        inject(carrier)
    request = SimpleNamespace(META={"HTTP_TRACEPARENT": carrier["traceparent"]}, auth=None)
    await run(new_post(runtime, request=request), call(12, "echo", text="x"))
    span = recorded.span("tools/call echo")
    assert parent_id(span) == upstream.get_span_context().span_id


async def test_a_hostile_traceparent_is_ignored(runtime: Runtime, recorded: Recorded) -> None:
    meta = {"traceparent": "00-zz-not-a-trace-01", "tracestate": 7, "baggage": ["x"]}
    await run(new_post(runtime), call(13, "echo", meta=meta, text="x"))
    assert recorded.span("tools/call echo").parent is None


async def test_a_2026_call_has_no_session_id(runtime: Runtime, recorded: Recorded) -> None:
    state = SessionState(id=None, protocol_version="2026-07-28")
    await run(new_post(runtime, session=state), call(14, "echo", text="x"))
    span = recorded.span("tools/call echo")
    assert "mcp.session.id" not in attributes(span)
    assert attributes(span)["mcp.protocol.version"] == "2026-07-28"


@pytest.mark.django_db(transaction=True)  # an SSE stream's events go to the event store
async def test_an_elicitation_round_is_a_client_span_under_the_request(
    runtime: Runtime, recorded: Recorded
) -> None:
    state = SessionState(id=SESSION, protocol_version="2025-11-25", client_capabilities={"elicitation": {}})
    post = new_post(runtime, mode="sse", session=state)
    asked = asyncio.Event()
    sent: list[dict[str, Any]] = []
    send = post.exchange.send

    async def watch(message: dict[str, Any]) -> None:
        await send(message)
        for data in re.findall(rb"data: (\{.*\})\n", message.get("body", b"")):
            sent.append(json.loads(data))
            if sent[-1].get("method") == "elicitation/create":
                asked.set()

    post.exchange.send = watch
    running = asyncio.create_task(run(post, call(15, "feature_elicit", message="Who?")))
    await asyncio.wait_for(asked.wait(), 10)
    ask = next(m for m in sent if m.get("method") == "elicitation/create")
    answer = JSONRPCResponse(
        jsonrpc="2.0", id=ask["id"], result={"action": "accept", "content": {"name": "A"}}
    )
    assert runtime.outbound.resolve(SESSION, answer)
    await asyncio.wait_for(running, 10)
    server = recorded.span("tools/call feature_elicit")
    client = recorded.span("elicitation/create")
    assert client.kind is SpanKind.CLIENT
    assert parent_id(client) == server.context.span_id
    assert attributes(client)["jsonrpc.request.id"] == ask["id"]
    traceparent = ask["params"]["_meta"]["traceparent"]
    assert traceparent.startswith(f"00-{client.context.trace_id:032x}-{client.context.span_id:016x}-")


async def test_a_resource_uri_is_cut_as_the_ledger_keeps_it(runtime: Runtime, recorded: Recorded) -> None:
    """A megabyte URI does not travel with every exported span: the attribute is the ledger's 300
    characters."""
    uri = "file:///" + "x" * 1_000_000
    read = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}}
    await run(new_post(runtime), read)
    (span,) = recorded.spans("resources/read")
    assert attributes(span)["mcp.resource.uri"] == uri[:300]
