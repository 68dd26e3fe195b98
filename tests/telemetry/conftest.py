"""A real ``Runtime`` whose request table records to the OpenTelemetry SDK's in-memory exporter and metric
reader, and POSTs driven at the exchange's ASGI boundary (as in ``tests/transports/test_exchange.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.cache import caches
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_server.core.context import SessionState
from mcp_server.core.records import request_key
from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.telemetry.otel import OTelTelemetry
from mcp_server.transports.exchange import PostExchange
from mcp_server.wire.jsonrpc import IncomingMessage, parse_message
from mcp_server.wire.versions import LATEST_VERSION
from tests.support.wait import wait_for

SESSION = "s-telemetry"

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@dataclass
class Recorded:
    """What the SDK recorded."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    telemetry: OTelTelemetry

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        (found,) = self.spans(name)
        return found

    def metric(self, name: str) -> Any:
        data = self.reader.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        return metric
        raise AssertionError(f"no metric {name}")


@pytest.fixture
def recorded() -> Recorded:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = OTelTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return Recorded(exporter, reader, telemetry)


@pytest.fixture
async def runtime(settings: Any, recorded: Recorded) -> AsyncIterator[Runtime]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    caches["default"].clear()
    runtime = Runtime(
        worker_id="worker-t",
        ledger=CacheLedger({"RETENTION": 60}),
        channel_layer_alias="default",
        flush_interval=0.01,
    )
    runtime.requests.telemetry = recorded.telemetry
    await runtime.start()
    yield runtime
    await runtime.requests.shutdown("test over")
    await runtime.aclose()


@dataclass
class Post:
    """One POST's exchange and what it sent."""

    exchange: PostExchange
    sent: list[dict[str, Any]] = field(default_factory=list)


def new_post(
    runtime: Runtime,
    *,
    mode: str = "json",
    batch: bool = False,
    session: SessionState | None = None,
    request: Any = None,
) -> Post:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    state = session or SessionState(id=SESSION, protocol_version=LATEST_VERSION)
    exchange = PostExchange(
        runtime=runtime, server=mcp, session=state, mode=mode, send=send, is_batch=batch, request=request
    )
    return Post(exchange, sent)


async def run(post: Post, *body: dict[str, Any]) -> Post:
    messages: list[IncomingMessage | dict[str, Any]] = [parse_message(m) for m in body]
    await asyncio.wait_for(post.exchange.run(messages), 10)
    return post


def call(request_id: int, tool: str, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def held(runtime: Runtime, request_id: int) -> None:
    """Wait until the runtime holds the request (registration has no event of its own)."""

    async def holds() -> bool:
        return runtime.requests.get(SESSION, request_key(request_id)) is not None

    await wait_for(holds, f"request {request_id} to arrive", within=5)
