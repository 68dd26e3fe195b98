"""Prometheus's request metrics, recorded by a real ``Runtime`` in a registry of the test's own: counts and
durations by method, tool and outcome, ``_OTHER`` for names a client made up, a bound on the series, the
ledger writer's gauges; and OpenTelemetry's span inside, whose ids the request's handle gives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import caches
from prometheus_client import CollectorRegistry

from mcp_server.conf import now
from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.runtime import Runtime
from mcp_server.runtime.writer import LedgerWriter
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.telemetry import load_telemetry
from mcp_server.telemetry import prometheus as prometheus_module
from mcp_server.telemetry.names import (
    BUCKETS,
    classify,
    method_label,
    name_label,
    outcome_label,
    settlement_labels,
)
from mcp_server.telemetry.prometheus import (
    Instruments,
    PrometheusRequest,
    PrometheusTelemetry,
    instruments,
    publish_writer,
)
from mcp_server.wire.messages import AbortRequest

from .conftest import SESSION, Recorded, call, held, new_post, run


class Measured:
    """A registry of the test's own and the instruments in it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.instruments = Instruments(self.registry)

    def count(self, method: str, tool: str = "", outcome: str = "answered") -> float:
        labels = {"mcp_method_name": method, "gen_ai_tool_name": tool, "mcp_server_outcome": outcome}
        return self.registry.get_sample_value("mcp_server_settlements_total", labels) or 0.0

    def observed(self, method: str, tool: str = "", outcome: str = "answered") -> float:
        labels = {"mcp_method_name": method, "gen_ai_tool_name": tool, "mcp_server_outcome": outcome}
        return self.registry.get_sample_value("mcp_server_operation_duration_seconds_count", labels) or 0.0

    def series(self, name: str) -> list[dict[str, str]]:
        return [s.labels for m in self.registry.collect() for s in m.samples if s.name == name]


@pytest.fixture
def measured() -> Measured:
    return Measured()


@pytest.fixture
async def prometheus_runtime(settings: Any, measured: Measured) -> AsyncIterator[Runtime]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    caches["default"].clear()
    runtime = Runtime(
        worker_id="worker-p",
        ledger=CacheLedger({"RETENTION": 60}),
        channel_layer_alias="default",
        flush_interval=0.01,
    )
    runtime.requests.telemetry = PrometheusTelemetry(None, measured.instruments)
    await runtime.start()
    yield runtime
    await runtime.requests.shutdown("test over")
    await runtime.aclose()


async def test_requests_are_counted_and_timed_by_method_tool_and_outcome(
    prometheus_runtime: Runtime, measured: Measured
) -> None:
    runtime = prometheus_runtime
    await run(
        new_post(runtime, batch=True), call(1, "echo", text="a"), call(2, "echo", text="b"), call(3, "raises")
    )
    await run(new_post(runtime), {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    await run(new_post(runtime), call(5, "short_deadline", seconds=5))
    running = asyncio.create_task(run(new_post(runtime), call(6, "slow")))
    await held(runtime, 6)
    await runtime.requests.cancel(SESSION, request_key(6))
    await running
    running = asyncio.create_task(run(new_post(runtime), call(7, "slow")))
    await held(runtime, 7)
    await runtime.handle(AbortRequest(session_id=SESSION, key=request_key(7)))
    await running
    assert measured.count("tools/call", "echo") == 2
    assert measured.observed("tools/call", "echo") == 2
    assert measured.count("tools/call", "raises", "error") == 1  # a tool error is an error, as in OTel's
    assert measured.count("ping") == 1  # not a tool call: no tool
    assert measured.count("tools/call", "short_deadline", "timed_out") == 1
    assert measured.count("tools/call", "slow", "cancelled") == 1
    assert measured.count("tools/call", "slow", "aborted") == 1
    buckets = [
        labels["le"]
        for labels in measured.series("mcp_server_operation_duration_seconds_bucket")
        if labels["gen_ai_tool_name"] == "echo"
    ]
    assert buckets == [*(str(float(b)) for b in BUCKETS), "+Inf"]  # the conventions' boundaries


async def test_a_name_the_client_made_up_is_not_a_series(
    prometheus_runtime: Runtime, measured: Measured
) -> None:
    runtime = prometheus_runtime
    for n, name in enumerate(["no_such_tool", "another_made_up_one", "x" * 200]):
        await run(new_post(runtime), call(10 + n, name))
        await run(new_post(runtime), {"jsonrpc": "2.0", "id": 20 + n, "method": f"made/up/{name}"})
    assert measured.count("tools/call", "_OTHER", "error") == 3  # refused -32602: one series for all
    assert measured.count("_OTHER", "", "error") == 3  # refused -32601
    tools = {labels["gen_ai_tool_name"] for labels in measured.series("mcp_server_settlements_total")}
    assert tools == {"_OTHER", ""}


async def test_past_the_series_limit_new_pairs_are_counted_as_other(
    measured: Measured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus_module, "SERIES_LIMIT", 3)
    record = LedgerRecord(session_id="s", request_key="i:1", method="tools/call")
    telemetry = PrometheusTelemetry(None, measured.instruments)
    for n in range(10):
        record.name = f"tool_{n}"
        handle = telemetry.start(record, n, None, "http", None)
        handle.end("answered", {"jsonrpc": "2.0", "id": n, "result": {"content": []}})
    tools = sorted(labels["gen_ai_tool_name"] for labels in measured.series("mcp_server_settlements_total"))
    assert tools == ["_OTHER", "tool_0", "tool_1", "tool_2"]
    assert measured.count("_OTHER", "_OTHER") == 7
    assert measured.count("tools/call", "tool_0") == 1


SETTLEMENTS = [
    ("tools/call", "echo", "answered", {"result": {"content": []}}),
    ("tools/call", "echo", "answered", {"result": {"content": [], "isError": True}}),
    ("tools/call", "echo", "answered", {"result": {"content": [], "isError": "yes"}}),
    ("tools/call", "echo", "answered", {"result": "not an object"}),
    ("prompts/get", "p", "answered", {"result": {"isError": True}}),
    ("tools/call", "nope", "answered", {"error": {"code": -32602, "message": "Unknown tool"}}),
    ("made/up", "", "answered", {"error": {"code": -32601, "message": "Method not found"}}),
    ("tools/call", "echo", "answered", {"error": {"code": -32603, "message": "Internal error"}}),
    ("tools/call", "echo", "answered", {"result": {}, "error": {"code": -32603, "message": "both"}}),
    ("tools/call", "echo", "timed_out", {"error": {"code": -32001, "message": "Request timed out"}}),
    ("tools/call", "echo", "rate_limited", {"result": {"content": [], "isError": True}}),
    ("tools/call", "echo", "cancelled", None),
    ("tools/call", "echo", "closed", {"error": {"code": -32000, "message": "Connection closed"}}),
]


@pytest.mark.parametrize(("method", "name", "state", "response"), SETTLEMENTS)
def test_the_labels_of_a_plain_answer_are_what_its_classification_gives(
    method: str, name: str, state: str, response: dict[str, Any] | None
) -> None:
    """``settlement_labels`` tells a plain answer without classifying it: the same labels as the whole
    classification, whatever the settlement."""
    code, error_type, _ = classify(method, state, response)
    expected = (method_label(method, code), name_label(name, code), outcome_label(state, code, error_type))
    assert settlement_labels(method, name, state, response) == expected


def test_a_settlement_reuses_its_series() -> None:
    """The request path finds its children in nested dicts: the same ones for every request of a kind."""
    measures = Instruments(CollectorRegistry())
    first = measures.children("tools/call", "echo", "answered")
    assert measures.children("tools/call", "echo", "answered") is first
    assert measures.children("tools/call", "echo", "error") is not first


async def test_opentelemetry_inside_keeps_its_spans_and_ids(
    runtime: Runtime, recorded: Recorded, measured: Measured
) -> None:
    """Both on: the Prometheus handle wraps the OTel span; the ids it gives are the span's."""
    runtime.requests.telemetry = PrometheusTelemetry(recorded.telemetry, measured.instruments)
    running = asyncio.create_task(run(new_post(runtime), call(1, "slow", seconds=30)))
    await held(runtime, 1)
    entry = runtime.requests.get(SESSION, request_key(1))
    assert isinstance(entry.span, PrometheusRequest)
    inner = entry.span.inner
    assert inner is not None
    assert (entry.span.trace_id, entry.span.span_id) == (inner.trace_id, inner.span_id)
    assert len(entry.span.trace_id) == 32
    assert len(entry.span.span_id) == 16
    await runtime.requests.cancel(SESSION, request_key(1))
    await running
    span = recorded.span("tools/call slow")
    assert f"{span.context.trace_id:032x}" == entry.span.trace_id
    assert measured.count("tools/call", "slow", "cancelled") == 1


def test_load_telemetry_measures_for_prometheus_around_opentelemetry() -> None:
    telemetry = load_telemetry()
    assert isinstance(telemetry, PrometheusTelemetry)  # prometheus_client is installed here (the test extra)
    assert type(telemetry.inner).__name__ == "OTelTelemetry"
    assert telemetry.instruments is instruments()  # one set per process, whatever the number of runtimes


async def test_the_writer_gauges(measured: Measured) -> None:
    writer = LedgerWriter(CacheLedger({"RETENTION": 60}), interval=60)  # never flushes during the test
    publish_writer(writer, measured.instruments)
    assert measured.registry.get_sample_value("mcp_server_ledger_writer_queue") == 0
    assert measured.registry.get_sample_value("mcp_server_ledger_writer_lag_seconds") == 0
    arrived = now() - timedelta(seconds=5)
    await writer.opened(LedgerRecord(session_id="s", request_key="i:1", method="ping", created=arrived))
    publish_writer(writer, measured.instruments)
    assert measured.registry.get_sample_value("mcp_server_ledger_writer_queue") == 1
    lag = measured.registry.get_sample_value("mcp_server_ledger_writer_lag_seconds")
    assert lag is not None
    assert 5 <= lag < 60
    await writer.aclose()
