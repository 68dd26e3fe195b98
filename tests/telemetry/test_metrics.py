"""``mcp.server.operation.duration``, ``mcp.server.session.duration`` and the settlement counter, read by the
SDK's ``InMemoryMetricReader``: units, bucket boundaries, low-cardinality attributes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from mcp_server.core.context import SessionState
from mcp_server.core.records import request_key
from mcp_server.runtime import Runtime
from mcp_server.telemetry.otel import BUCKETS
from mcp_server.wire.messages import AbortRequest

from .conftest import INITIALIZE, SESSION, Recorded, call, held, new_post, run

pytestmark = pytest.mark.asyncio


def points(recorded: Recorded, name: str) -> list[Any]:
    return list(recorded.metric(name).data.data_points)


async def test_the_operation_histogram(runtime: Runtime, recorded: Recorded) -> None:
    post = new_post(runtime, batch=True)
    await run(post, call(1, "echo", text="a"), call(2, "echo", text="b"), call(3, "no_such_tool"))
    metric = recorded.metric("mcp.server.operation.duration")
    assert metric.unit == "s"
    by_tool = {dict(p.attributes)["gen_ai.tool.name"]: p for p in metric.data.data_points}
    assert set(by_tool) == {"echo", "_OTHER"}  # a made-up tool name is not a series of its own
    echo = by_tool["echo"]
    assert echo.count == 2
    assert tuple(echo.explicit_bounds) == BUCKETS
    assert dict(echo.attributes) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": "2025-11-25",
        "network.transport": "tcp",
        "network.protocol.name": "http",
    }  # no request id, no session id: low cardinality
    assert dict(by_tool["_OTHER"].attributes)["rpc.response.status_code"] == "-32602"


async def test_settlements_are_counted_by_outcome(runtime: Runtime, recorded: Recorded) -> None:
    await run(new_post(runtime, batch=True), call(1, "echo", text="a"), call(2, "raises"))
    await run(new_post(runtime), call(3, "short_deadline", seconds=5))
    running = asyncio.create_task(run(new_post(runtime), call(4, "slow")))
    await held(runtime, 4)
    await runtime.requests.cancel(SESSION, request_key(4))
    await running
    running = asyncio.create_task(run(new_post(runtime), call(6, "slow")))
    await held(runtime, 6)
    await runtime.handle(AbortRequest(session_id=SESSION, key=request_key(6)))  # as the admin's abort does
    await running
    running = asyncio.create_task(run(new_post(runtime), call(5, "slow")))
    await held(runtime, 5)
    await runtime.requests.close_session(SESSION, "gone")
    await running
    counted = {
        dict(p.attributes)["mcp_server.outcome"]: p.value for p in points(recorded, "mcp_server.settlements")
    }
    assert counted == {"answered": 1, "error": 1, "timed_out": 1, "cancelled": 1, "aborted": 1, "closed": 1}
    aborted = next(
        s for s in recorded.spans("tools/call slow") if dict(s.attributes or {})["jsonrpc.request.id"] == "6"
    )
    assert dict(aborted.attributes or {})["error.type"] == "-32003"
    assert aborted.status.status_code is StatusCode.ERROR


@pytest.mark.django_db(transaction=True)  # the session is stored
async def test_the_session_histogram(runtime: Runtime, recorded: Recorded) -> None:
    state = SessionState(id=None, protocol_version="")
    post = await run(new_post(runtime, session=state), INITIALIZE)
    session_id = dict(post.sent[0]["headers"])[b"mcp-session-id"].decode()
    await runtime.requests.close_session(session_id, "deleted by the client")
    (point,) = points(recorded, "mcp.server.session.duration")
    assert recorded.metric("mcp.server.session.duration").unit == "s"
    assert tuple(point.explicit_bounds) == BUCKETS
    assert point.count == 1
    assert dict(point.attributes) == {
        "mcp.protocol.version": "2025-11-25",
        "network.transport": "tcp",
        "network.protocol.name": "http",
    }
    initialized = next(s for s in recorded.spans() if s.name == "initialize")
    assert dict(initialized.attributes or {})["mcp.session.id"] == session_id


async def test_names_a_client_makes_up_add_no_series(runtime: Runtime, recorded: Recorded) -> None:
    """A flood of unknown methods, or a version no revision has, ends in one ``_OTHER`` series each: a
    client cannot grow the SDK's aggregation by making names up."""
    made_up = [{"jsonrpc": "2.0", "id": n, "method": f"made/up/{n}"} for n in range(1, 41)]
    await run(new_post(runtime, batch=True), *made_up)
    odd = SessionState(id=SESSION, protocol_version="1999-01-01")
    await run(new_post(runtime, session=odd), call(50, "echo", text="a"))
    durations = [dict(p.attributes) for p in points(recorded, "mcp.server.operation.duration")]
    methods = {a["mcp.method.name"] for a in durations}
    assert methods == {"_OTHER", "tools/call"}
    assert {a["mcp.protocol.version"] for a in durations} == {"2025-11-25", "_OTHER"}
    counted = {
        dict(p.attributes)["mcp.method.name"]: p.value for p in points(recorded, "mcp_server.settlements")
    }
    assert counted == {"_OTHER": 40, "tools/call": 1}
    assert len(recorded.spans()) == 41  # each request still has its span, with the method it named
    assert {"made/up/1", "made/up/40"} <= {
        dict(s.attributes or {})["mcp.method.name"] for s in recorded.spans()
    }
