"""What the OpenTelemetry SDK itself costs a request, against what this project's telemetry costs it.

The SDK's own calls for one request, in a loop: the SERVER span's start and end with the attributes a
``tools/call`` carries (batched to an exporter that drops them: no export, no memory), and one
``mcp.server.operation.duration`` measurement with the histogram's attributes. Then this project's whole
telemetry of one request (:class:`~mcp_server.telemetry.otel.OTelTelemetry`: start, the ids the ledger row
takes, end with its metrics), on the same SDK. The difference is ours; the floor is the SDK's, whoever
calls it. With ``--request-us`` (this project's CPU per call without OpenTelemetry: ``bench/inprocess.py``
or ``bench/compare.py``), it prints the floor's share of a request.

    .venv/bin/python bench/otel_floor.py --request-us 210

Each figure is the best of ``--rounds`` loops of ``--calls`` (the least disturbed by the machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ATTRIBUTES = {
    "mcp.method.name": "tools/call",
    "jsonrpc.request.id": "12",
    "mcp.protocol.version": "2026-07-28",
    "gen_ai.tool.name": "echo",
    "gen_ai.operation.name": "execute_tool",
    "network.transport": "tcp",
    "network.protocol.name": "http",
}
"""A ``tools/call``'s span attributes at 2026-07-28 (what ``span_attributes`` gives it)."""

METRIC_ATTRIBUTES = {k: v for k, v in ATTRIBUTES.items() if k != "jsonrpc.request.id"}


def best_of(function: Callable[[], Any], calls: int, rounds: int) -> float:
    """The fewest microseconds one call of ``function`` took, over ``rounds`` loops of ``calls``."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        best = min(best, (time.perf_counter() - started) / calls * 1e6)
    return best


def measure(calls: int, rounds: int) -> dict[str, float]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind

    from mcp_server.core.records import LedgerRecord
    from mcp_server.telemetry.otel import BUCKETS, NO_EXEMPLAR, OTelTelemetry

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracer = tracer_provider.get_tracer("floor")
    histogram = meter_provider.get_meter("floor").create_histogram(
        "floor.duration", unit="s", explicit_bucket_boundaries_advisory=list(BUCKETS)
    )
    telemetry = OTelTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    record = LedgerRecord(
        session_id=None, request_key="i:12", method="tools/call", name="echo", protocol_version="2026-07-28"
    )
    params = {"name": "echo", "arguments": {"text": "hello"}}
    response = {"jsonrpc": "2.0", "id": 12, "result": {"content": [{"type": "text", "text": "hello"}]}}

    def sdk_span() -> None:
        tracer.start_span("tools/call echo", kind=SpanKind.SERVER, attributes=ATTRIBUTES).end()

    def sdk_measurement() -> None:
        histogram.record(0.001, METRIC_ATTRIBUTES, NO_EXEMPLAR)

    def ours() -> None:
        span = telemetry.start(record, 12, params, "http", {})
        assert span is not None
        span.trace_id, span.span_id  # noqa: B018 (the ledger row's columns)
        span.end("answered", response)

    figures: dict[str, float] = {}
    for _ in range(2):  # alternated: a disturbance of the machine falls on both
        for label, function in (("span", sdk_span), ("measurement", sdk_measurement), ("ours", ours)):
            figure = best_of(function, calls, rounds)
            figures[label] = min(figures.get(label, figure), figure)
    tracer_provider.shutdown()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--request-us", type=float, help="this project's CPU per call without OpenTelemetry")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    figures = measure(args.calls, args.rounds)
    floor = figures["span"] + figures["measurement"]
    span, measurement, ours = figures["span"], figures["measurement"], figures["ours"]
    print(f"SDK span, start and end with {len(ATTRIBUTES)} attributes: {span:.1f} us")
    print(f"SDK histogram measurement with {len(METRIC_ATTRIBUTES)} attributes: {measurement:.1f} us")
    print(f"SDK floor of a request: {floor:.1f} us")
    print(f"this project's telemetry of a request: {ours:.1f} us ({ours - floor:+.1f} us)")
    if args.request_us:
        share = floor / args.request_us
        ceiling = 1 / (1 + share)
        print(f"the floor is {share:.0%} of a {args.request_us:.0f} us request (at most {ceiling:.2f}x)")


if __name__ == "__main__":
    main()
