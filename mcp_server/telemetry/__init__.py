"""Telemetry of requests: OpenTelemetry spans and metrics (when ``opentelemetry-api`` is installed),
Prometheus metrics (when ``prometheus_client`` is installed), and the request's fields on every log record
about it.

The protocol layer holds one :class:`RequestTelemetry` per process, or ``None``: :func:`load_telemetry`
imports :mod:`.otel` (and with it ``opentelemetry``) only when the API is installed, and :mod:`.prometheus`
(and with it ``prometheus_client``) only when that is installed, both only while ``MCP_SERVER["TELEMETRY"]``
is on. Without either nothing here imports them, and a request pays one ``is None`` check where its span
would start, and one where it would end.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Coroutine, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from ..conf import mcp_settings
from ..core.records import LedgerRecord
from ..wire.jsonrpc import RequestId
from .logs import RequestJSONFormatter, RequestLogFilter, bind_request, log_fields

__all__ = [
    "RequestJSONFormatter",
    "RequestLogFilter",
    "RequestSpan",
    "RequestTelemetry",
    "WriterView",
    "bind_request",
    "load_telemetry",
    "log_fields",
    "prometheus_enabled",
    "writer_gauges",
]


class RequestSpan(Protocol):
    """The telemetry of one request, from its arrival to its settlement."""

    @property
    def trace_id(self) -> str:
        """The span's trace id (32 hex digits), or ``""`` when it has none (no valid span context)."""

    @property
    def span_id(self) -> str:
        """The span's own id (16 hex digits), or ``""`` when it has none."""

    def activate(self) -> None:
        """Make the span current in the calling task (the request's own): the handler's spans nest under
        it, its log records carry its trace id. Never undone: the task's context ends with the task."""

    def outbound(self, method: str, message: dict[str, Any]) -> AbstractContextManager[None]:
        """A CLIENT span around a server-to-client request (``message``, whose ``params._meta`` it writes the
        trace context into), under this request's span."""

    def end(self, state: str, response: dict[str, Any] | None) -> None:
        """The request settled in ``state`` with ``response`` (``None``: cancelled): end the span, record
        the metrics."""


class RequestTelemetry(Protocol):
    """What the request table asks of telemetry (one per process)."""

    def start(
        self,
        record: LedgerRecord,
        request_id: RequestId,
        params: Mapping[str, Any] | None,
        transport: str,
        headers: Mapping[str, Any] | None,
    ) -> RequestSpan | None:
        """A request arrived (``transport``: ``"http"`` or ``"stdio"``; ``headers``: the HTTP request's
        ``META``, for a ``traceparent`` header): start its SERVER span (``None``: nothing would record it)."""

    def session_closed(self, session_id: str) -> None:
        """The session ended here: record its duration, if it was opened here."""


class WriterView(Protocol):
    """What the writer's gauges read of the ledger writer
    (:class:`~mcp_server.runtime.writer.LedgerWriter`)."""

    def __len__(self) -> int: ...

    def oldest_unwritten(self) -> datetime | None: ...


def _otel() -> RequestTelemetry | None:
    if importlib.util.find_spec("opentelemetry") is None:
        return None
    try:
        from .otel import OTelTelemetry
    except ImportError:  # an install without opentelemetry.trace / .metrics (a broken or partial one)
        return None
    return OTelTelemetry()


def prometheus_enabled() -> bool:
    """Whether requests are measured for Prometheus: ``prometheus_client`` is installed and
    ``MCP_SERVER["TELEMETRY"]`` is on (nothing is imported to tell)."""
    return mcp_settings.TELEMETRY is True and importlib.util.find_spec("prometheus_client") is not None


def load_telemetry() -> RequestTelemetry | None:
    """The process's telemetry: ``None`` when neither ``opentelemetry-api`` nor ``prometheus_client`` is
    installed, or ``MCP_SERVER["TELEMETRY"]`` is off (then nothing imports either)."""
    if mcp_settings.TELEMETRY is not True:
        return None
    inner = _otel()
    if not prometheus_enabled():
        return inner
    try:
        from .prometheus import PrometheusTelemetry
    except ImportError:  # a broken install of prometheus_client
        return inner
    return PrometheusTelemetry(inner)


def writer_gauges(writer: WriterView) -> Coroutine[Any, Any, None] | None:
    """The loop that sets the ledger writer's Prometheus gauges (a worker runs it in the background), or
    ``None`` when Prometheus is off."""
    if not prometheus_enabled():
        return None
    try:
        from .prometheus import watch_writer
    except ImportError:
        return None
    return watch_writer(writer)
