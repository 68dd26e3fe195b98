"""Settings of this project's server for ``bench/compare.py --otel``: the test site, with OpenTelemetry as
``MCP_BENCH_OTEL`` says.

- ``none``: ``opentelemetry`` cannot be imported (as when it is not installed);
- ``api``: the API only, no SDK set up (what a site gets with the ``otel`` extra and nothing else);
- ``sdk``: the SDK's tracer and meter providers, spans batched to an in-memory exporter, metrics aggregated
  for an in-memory reader (the cost of recording, without an exporter's network). The exporter forgets its
  spans past 10,000 (``MCP_BENCH_OTEL_KEPT``), as one that ships them away would: memory stays flat over a
  long run. The spans it holds cost the cyclic collector: with 512 kept, the SDK row read 0.72x against
  0.665x with 10,000, in runs side by side on one quiet machine.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

MODE = os.environ.get("MCP_BENCH_OTEL", "api")
if MODE == "none":
    sys.modules["opentelemetry"] = None  # type: ignore[assignment]

from tests.settings import *  # noqa: E402, F403

KEPT = int(os.environ.get("MCP_BENCH_OTEL_KEPT", "10000"))
"""How many finished spans the in-memory exporter holds before it forgets them (``MCP_BENCH_OTEL_KEPT``)."""

if MODE == "sdk":
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class _Kept(InMemorySpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            result = super().export(spans)
            if len(self.get_finished_spans()) > KEPT:
                self.clear()
            return result

    _provider = TracerProvider()
    _provider.add_span_processor(BatchSpanProcessor(_Kept()))
    trace.set_tracer_provider(_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
