"""A live server's spans, one JSON object a line in a file: the SDK's global tracer provider with a simple
processor, as a site that owns the SDK sets it up (``MCP_TEST_SPANS`` in ``tests/settings.py``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

__all__ = ["SpanFile", "read_spans", "record_spans"]


class SpanFile(SpanExporter):
    """Appends each finished span to ``path`` as one JSON line."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [json.dumps(as_dict(span), default=str) + "\n" for span in spans]
        with self.lock, self.path.open("a") as out:
            out.writelines(lines)
        return SpanExportResult.SUCCESS


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


def record_spans(path: str) -> None:
    """Set the global tracer provider: every span of this process goes to ``path``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(SpanFile(path)))
    trace.set_tracer_provider(provider)


def read_spans(path: Path) -> list[dict[str, Any]]:
    """The spans recorded in ``path`` so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
