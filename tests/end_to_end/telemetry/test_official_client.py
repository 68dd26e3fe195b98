"""The official Python client, traced, calls a live server at 2026-07-28: the ``traceparent`` it puts in
``_meta`` is its own CLIENT span's, and the server's SERVER span is that span's child in the same trace."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support.live import LiveServer
from tests.support.wait import wait_for
from tests.telemetry.span_file import read_spans


@pytest.fixture
def client_spans() -> Iterator[InMemorySpanExporter]:
    """The client's spans (it traces through the global provider: set once per process, so shared)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()  # later tests in this process record nothing more into it


@pytest.mark.asyncio
async def test_the_official_client_s_span_is_the_parent(
    start: Callable[..., LiveServer], tmp_path: Path, client_spans: InMemorySpanExporter
) -> None:
    spans_file = tmp_path / "spans.jsonl"
    server = start({"RESPONSE_MODE": "json"}, MCP_TEST_SPANS=str(spans_file))
    async with Client(server.url) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("search_books", {"query": "Calvino"})
        assert not result.is_error
    (mine,) = [  # the client names it its own way ("MCP send tools/call search_books")
        s
        for s in client_spans.get_finished_spans()
        if s.kind is SpanKind.CLIENT and dict(s.attributes or {}).get("mcp.method.name") == "tools/call"
    ]

    async def served() -> bool:
        return any(s["name"] == "tools/call search_books" for s in read_spans(spans_file))

    await wait_for(served)
    (theirs,) = [s for s in read_spans(spans_file) if s["name"] == "tools/call search_books"]
    assert theirs["kind"] == "SERVER"
    assert theirs["trace_id"] == f"{mine.context.trace_id:032x}"
    assert theirs["parent_id"] == f"{mine.context.span_id:016x}"
    assert theirs["attributes"]["mcp.protocol.version"] == "2026-07-28"
    assert "mcp.session.id" not in theirs["attributes"]
    assert theirs["attributes"]["network.transport"] == "tcp"
    assert theirs["status"] == "UNSET"
