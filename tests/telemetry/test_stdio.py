"""Over stdio: one SERVER span per request, ``network.transport`` ``pipe`` (the loop run in this process on a
real pair of pipes)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from opentelemetry.trace import SpanKind

from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.transports.stdio import StdioLoop

from .conftest import INITIALIZE, Recorded, call


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)  # the session is stored
async def test_a_stdio_call(runtime: Runtime, recorded: Recorded) -> None:
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    lines = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call(1, "echo", text="hi"),
    ]
    os.write(write_in, b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    os.close(write_in)  # end of input once the lines are read: the loop winds down and returns
    with os.fdopen(write_out, "wb", buffering=0) as output:
        loop = StdioLoop(mcp, runtime=runtime, input_fd=read_in, output=output, grace=5.0)
        assert await asyncio.wait_for(loop.run(), 20) == "stdin closed"
    with os.fdopen(read_out, "rb") as answers:
        replies = [json.loads(line) for line in answers.read().splitlines()]
    os.close(read_in)
    assert [r["id"] for r in replies] == [0, 1]
    (initialize,) = recorded.spans("initialize")
    span = recorded.span("tools/call echo")
    assert span.kind is SpanKind.SERVER
    attributes = dict(span.attributes or {})
    assert attributes["network.transport"] == "pipe"
    assert "network.protocol.name" not in attributes
    assert attributes["mcp.session.id"] == dict(initialize.attributes or {})["mcp.session.id"]
    assert len(recorded.spans()) == 2  # one per request, none for the notification
