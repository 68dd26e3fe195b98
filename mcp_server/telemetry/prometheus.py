"""Prometheus metrics of requests (imported only with ``prometheus_client`` installed).

The request metrics follow the OpenTelemetry names, as an OpenTelemetry-to-Prometheus exporter would write
them: ``mcp_server_operation_duration_seconds`` (``mcp.server.operation.duration``) and
``mcp_server_settlements_total`` (``mcp_server.settlements``), labelled ``mcp_method_name``,
``gen_ai_tool_name`` (empty but for ``tools/call``) and ``mcp_server_outcome``, with the same ``_OTHER`` for a
name the client made up (:mod:`.names`) and, past :data:`SERIES_LIMIT` pairs of method and tool in one
process, for any new pair.

Recording stays off the request path's costs: each request keeps one slotted handle (its method, its tool,
its start), and its settlement increments one counter and one histogram through children found in one dict by
their labels (no ``labels()`` call, no lock beyond the one each ``prometheus_client`` value takes,
uncontended on the event loop that settles every request).

The ledger writer's queue and lag are set by each worker every second (:func:`watch_writer`): in
``prometheus_client``'s multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``) the queue is summed over the live
workers, the lag is the largest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from ..conf import now as clock_now
from ..core.records import LedgerRecord
from ..wire.jsonrpc import RequestId
from . import RequestSpan, RequestTelemetry, WriterView
from .names import BUCKETS, OTHER, SERIES_LIMIT, settlement_labels

__all__ = [
    "LABELS",
    "SERIES_LIMIT",
    "WRITER_INTERVAL",
    "Instruments",
    "PrometheusRequest",
    "PrometheusTelemetry",
    "instruments",
    "publish_writer",
    "watch_writer",
]

logger = logging.getLogger("mcp_server.telemetry")

LABELS = ("mcp_method_name", "gen_ai_tool_name", "mcp_server_outcome")
"""The labels of both request metrics."""

WRITER_INTERVAL = 1.0
"""Seconds between two settings of the ledger writer's gauges by a worker."""


Children = tuple[Any, Any]
"""A counter's and a histogram's child for one method, tool and outcome."""


class Instruments:
    """The process's request metrics and writer gauges, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.settlements = Counter(
            "mcp_server_settlements", "Requests settled, by outcome.", LABELS, registry=registry
        )
        self.duration = Histogram(
            "mcp_server_operation_duration_seconds",
            "MCP request duration as observed on the server, from its arrival to its settlement.",
            LABELS,
            buckets=BUCKETS,
            registry=registry,
        )
        self.writer_queue = Gauge(
            "mcp_server_ledger_writer_queue",
            "Ledger records waiting to be written (every live worker's writer).",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.writer_lag = Gauge(
            "mcp_server_ledger_writer_lag_seconds",
            "Seconds since the oldest request whose ledger row is not written yet arrived (0: none).",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self._children: dict[tuple[str, str, str], Children] = {}
        self._pairs: set[tuple[str, str]] = set()

    def children(self, method: str, tool: str, outcome: str) -> Children:
        """The counter's and the histogram's child for these labels (made once; past
        :data:`SERIES_LIMIT` pairs of method and tool, a new pair is counted as ``_OTHER``)."""
        labels = (method, tool, outcome)
        found = self._children.get(labels)
        if found is not None:
            return found
        pair = (method, tool)
        if pair not in self._pairs and len(self._pairs) >= SERIES_LIMIT and pair != (OTHER, OTHER):
            return self.children(OTHER, OTHER, outcome)
        self._pairs.add(pair)
        made = self._children[labels] = (self.settlements.labels(*labels), self.duration.labels(*labels))
        return made


_instruments: Instruments | None = None


def instruments() -> Instruments:
    """The process's instruments, in ``prometheus_client``'s default registry (made on first use)."""
    global _instruments
    if _instruments is None:
        _instruments = Instruments()
    return _instruments


class PrometheusRequest:
    """One request's measurement, wrapping its OpenTelemetry span when there is one."""

    __slots__ = ("_inner", "_instruments", "method", "name", "started")

    def __init__(self, measures: Instruments, inner: RequestSpan | None, method: str, name: str) -> None:
        self._instruments = measures
        self._inner = inner
        self.method = method
        self.name = name
        self.started = time.monotonic()

    @property
    def inner(self) -> RequestSpan | None:
        """The request's OpenTelemetry span handle (``None``: no span)."""
        return self._inner

    @property
    def trace_id(self) -> str:
        return self._inner.trace_id if self._inner is not None else ""

    @property
    def span_id(self) -> str:
        return self._inner.span_id if self._inner is not None else ""

    def activate(self) -> None:
        if self._inner is not None:
            self._inner.activate()

    def outbound(self, method: str, message: dict[str, Any]) -> AbstractContextManager[None]:
        if self._inner is not None:
            return self._inner.outbound(method, message)
        return contextlib.nullcontext()

    def end(self, state: str, response: dict[str, Any] | None) -> None:
        if self._inner is not None:
            self._inner.end(state, response)
        try:
            counter, histogram = self._instruments.children(
                *settlement_labels(self.method, self.name, state, response)
            )
            counter.inc()
            histogram.observe(time.monotonic() - self.started)
        except Exception:  # telemetry never stands in the way of a settlement
            logger.exception("could not record the metrics of a request")


class PrometheusTelemetry:
    """The request table's telemetry with Prometheus on: each request measured, and handed on to
    OpenTelemetry's (``inner``) when that is on too."""

    def __init__(self, inner: RequestTelemetry | None = None, measures: Instruments | None = None) -> None:
        self.inner = inner
        self.instruments = measures if measures is not None else instruments()

    def start(
        self,
        record: LedgerRecord,
        request_id: RequestId,
        params: Mapping[str, Any] | None,
        transport: str,
        headers: Mapping[str, Any] | None,
    ) -> PrometheusRequest:
        inner = self.inner
        span = inner.start(record, request_id, params, transport, headers) if inner is not None else None
        method = record.method
        return PrometheusRequest(
            self.instruments, span, method, record.name if method == "tools/call" else ""
        )

    def session_closed(self, session_id: str) -> None:
        if self.inner is not None:
            self.inner.session_closed(session_id)


def publish_writer(writer: WriterView, measures: Instruments | None = None) -> None:
    """Set the writer's gauges from ``writer`` now."""
    measures = measures if measures is not None else instruments()
    oldest = writer.oldest_unwritten()
    lag = (clock_now() - oldest).total_seconds() if oldest is not None else 0.0
    measures.writer_queue.set(len(writer))
    measures.writer_lag.set(max(0.0, lag))


async def watch_writer(writer: WriterView, every: float = WRITER_INTERVAL) -> None:
    """Set the writer's gauges every ``every`` seconds, for as long as the worker runs (cancelled with it)."""
    while True:
        try:
            publish_writer(writer)
        except Exception:
            logger.exception("could not set the ledger writer's gauges")
        await asyncio.sleep(every)
