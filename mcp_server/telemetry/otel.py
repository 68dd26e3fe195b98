"""Spans and metrics by the OpenTelemetry MCP semantic conventions (imported only with ``opentelemetry-api``).

Followed: the MCP conventions as now developed in ``semantic-conventions-genai`` (``docs/gen-ai/mcp.md``,
``model/mcp/*.yaml``), where they differ from the last full release (semantic-conventions v1.41.1):

- error classification of a server span: the codes a client causes (-32700, -32600, -32601, -32602,
  -32002) are not errors, every other code is (v1.41.1 named only -32603 and -32000 to -32099);
- ``mcp.session.id`` only for a handshake-era session, never at 2026-07-28 (which has none);
- the trace context of ``params._meta`` (SEP-414, unprefixed ``traceparent``, ``tracestate``, ``baggage``) is
  the parent, the ambient context (the ASGI HTTP span, when instrumented) a link.

Ours, where the conventions say nothing: a request's ``traceparent`` HTTP header is the parent when its
``_meta`` has none; a cancelled request's span ends with a ``mcp.request.cancelled`` event, status unset;
the counter ``mcp_server.settlements`` counts settlements by ``mcp_server.outcome``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ..core.records import LedgerRecord
from ..core.states import State
from ..wire.errors import JSONRPCError
from ..wire.jsonrpc import RequestId
from ..wire.versions import is_sessionless_version
from .names import (
    BUCKETS,
    CLIENT_ERRORS,
    KNOWN_VERSIONS,
    OTHER,
    classify,
    method_label,
    name_label,
    outcome_label,
)

__all__ = ["BUCKETS", "CLIENT_ERRORS", "SCOPE", "OTelRequestSpan", "OTelTelemetry"]

logger = logging.getLogger("mcp_server.telemetry")

SCOPE = "mcp_server"
"""The instrumentation scope of the tracer and the meter."""

SESSIONS_REMEMBERED = 100_000
"""At most this many open sessions' start times are kept per process (oldest forgotten first)."""

METRIC_KEYS = (
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "gen_ai.operation.name",
    "mcp.protocol.version",
    "network.transport",
    "network.protocol.name",
)
"""The low-cardinality span attributes the operation histogram keeps (no id, no session, no URI)."""

TRACE_KEYS = ("traceparent", "tracestate", "baggage")

_MISSING = object()

_CANCELLED = State.CANCELLED.value
"""(Read off the enum once: each ``.value`` costs ~0.5 µs.)"""

NO_EXEMPLAR = otel_context.Context()
"""The (empty) context measurements are recorded in: no span, so the SDK's default trace-based exemplar
filter samples none. An exemplar costs more than the measurement itself (~80 µs against ~15 µs on the
SDK 1.45 histogram), several times the whole budget of a request's telemetry."""


def _carrier(source: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, str]:
    """The trace-context strings of ``source`` (``keys``: propagation key -> key in ``source``)."""
    out: dict[str, str] = {}
    for key, where in keys.items():
        value = source.get(where)
        if isinstance(value, str):
            out[key] = value
    return out


def _remote(carrier: dict[str, str]) -> otel_context.Context | None:
    """The context the configured propagators extract from ``carrier``; ``None`` without a valid span."""
    if "traceparent" not in carrier:
        return None
    try:
        extracted = extract(carrier)
    except (TypeError, ValueError):
        return None
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def parent_of(
    params: Mapping[str, Any] | None, headers: Mapping[str, Any] | None
) -> otel_context.Context | None:
    """The server span's parent: ``params._meta``'s trace context, else the HTTP ``traceparent`` header's,
    else ``None`` (the ambient context)."""
    meta = params.get("_meta") if params is not None else None
    if isinstance(meta, Mapping) and "traceparent" in meta:  # (no parent without it: nothing to extract)
        found = _remote(_carrier(meta, _META_KEYS))
        if found is not None:
            return found
    if headers and "HTTP_TRACEPARENT" in headers:
        return _remote(_carrier(headers, _HEADER_KEYS))
    return None


_META_KEYS = {key: key for key in TRACE_KEYS}
_HEADER_KEYS = {key: f"HTTP_{key.upper()}" for key in TRACE_KEYS}
"""Where each trace-context key is found in ``params._meta``, and in the request's ``META``."""


def span_attributes(record: LedgerRecord, request_id: RequestId, transport: str) -> dict[str, Any]:
    """The attributes a request's SERVER span starts with."""
    method = record.method
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if record.protocol_version:
        attributes["mcp.protocol.version"] = record.protocol_version
    if method == "tools/call" and record.name:
        attributes["gen_ai.tool.name"] = record.name
        attributes["gen_ai.operation.name"] = "execute_tool"
    elif method == "prompts/get" and record.name:
        attributes["gen_ai.prompt.name"] = record.name
    elif method in ("resources/read", "resources/subscribe", "resources/unsubscribe") and record.name:
        attributes["mcp.resource.uri"] = record.name  # the URI as the ledger keeps it: cut to its column
    if transport == "stdio":
        attributes["network.transport"] = "pipe"
    else:
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
    if record.session_id is not None and not is_sessionless_version(record.protocol_version):
        attributes["mcp.session.id"] = record.session_id
    return attributes


def span_name(attributes: Mapping[str, Any]) -> str:
    """``{mcp.method.name} {target}``: the tool's or the prompt's name, never a resource URI."""
    method = str(attributes["mcp.method.name"])
    target = attributes.get("gen_ai.tool.name") or attributes.get("gen_ai.prompt.name")
    return f"{method} {target}" if target else method


def _providers_unset() -> bool:
    """Whether no global tracer or meter provider is set: read off the API's module globals, which costs
    ~40 ns where its getters cost ~6 µs (each looks up an environment variable); the getters where an API
    version lacks them."""
    tracing = getattr(trace, "_TRACER_PROVIDER", _MISSING)
    metering = getattr(metrics_internal, "_METER_PROVIDER", _MISSING)
    if tracing is _MISSING or metering is _MISSING:
        return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and (
            type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
        )
    return tracing is None and metering is None


class OTelRequestSpan:
    """One request's SERVER span, and what its metrics need at the end."""

    __slots__ = ("_ids", "_telemetry", "attributes", "context", "span", "started")

    def __init__(
        self,
        telemetry: OTelTelemetry,
        span: trace.Span,
        attributes: dict[str, Any],
        parent: otel_context.Context | None,
    ) -> None:
        self._telemetry = telemetry
        self.span = span
        self.attributes = attributes
        self.context = trace.set_span_in_context(span, parent)
        """The span in its parent's context (with the parent's baggage)."""
        self.started = time.monotonic()
        self._ids: tuple[str, str] | None = None

    def _read_ids(self) -> tuple[str, str]:
        """The span's trace id and own id as hex, read off its context once (the ledger row takes both)."""
        if self._ids is None:
            span_context = self.span.get_span_context()
            self._ids = (
                (trace.format_trace_id(span_context.trace_id), trace.format_span_id(span_context.span_id))
                if span_context.is_valid
                else ("", "")
            )
        return self._ids

    @property
    def trace_id(self) -> str:
        return self._read_ids()[0]

    @property
    def span_id(self) -> str:
        return self._read_ids()[1]

    def activate(self) -> None:
        otel_context.attach(self.context)

    @contextlib.contextmanager
    def outbound(self, method: str, message: dict[str, Any]) -> Iterator[None]:
        attributes: dict[str, Any] = {"mcp.method.name": method, "jsonrpc.request.id": str(message["id"])}
        for key in ("mcp.protocol.version", "mcp.session.id", "network.transport", "network.protocol.name"):
            if key in self.attributes:
                attributes[key] = self.attributes[key]
        tracer = self._telemetry.tracer
        with tracer.start_as_current_span(
            method,
            context=self.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            params = message.get("params")
            params = dict(params) if isinstance(params, dict) else {}
            meta = params.get("_meta")
            params["_meta"] = meta = dict(meta) if isinstance(meta, dict) else {}
            inject(meta, context=trace.set_span_in_context(span, self.context))
            message["params"] = params
            try:
                yield
            except JSONRPCError as exc:  # the client answered with an error: every code is one for a client
                span.set_attribute("rpc.response.status_code", str(exc.code))
                span.set_attribute("error.type", str(exc.code))
                span.set_status(Status(StatusCode.ERROR, exc.message))
                raise
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(Status(StatusCode.ERROR))
                raise

    def end(self, state: str, response: dict[str, Any] | None) -> None:
        try:
            self._end(state, response)
        except Exception:  # telemetry never stands in the way of a settlement
            logger.exception("could not end the span of a request")

    def _end(self, state: str, response: dict[str, Any] | None) -> None:
        span = self.span
        method = str(self.attributes["mcp.method.name"])
        code, error_type, description = classify(method, state, response)
        if code is not None:
            span.set_attribute("rpc.response.status_code", code)
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(Status(StatusCode.ERROR, description))
        if state == _CANCELLED:
            span.add_event("mcp.request.cancelled")
        span.end()
        self._telemetry.settled(self, state, code, error_type)


class OTelTelemetry:
    """The process's tracer, meter and instruments (the global providers unless given others)."""

    def __init__(
        self, *, tracer_provider: trace.TracerProvider | None = None, meter_provider: Any = None
    ) -> None:
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.operation_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed on the server, from its arrival to its settlement.",
            explicit_bucket_boundaries_advisory=list(BUCKETS),
        )
        self.session_duration = meter.create_histogram(
            "mcp.server.session.duration",
            unit="s",
            description="The duration of the MCP session as observed on the MCP server.",
            explicit_bucket_boundaries_advisory=list(BUCKETS),
        )
        self._settled: dict[tuple[str, str], int] = {}
        """Settlements so far by (outcome, method label): counted here and read by the SDK at collection,
        an observable counter (a dict increment per settlement, where a synchronous counter's ``add`` costs
        ~6 µs on the SDK 1.45: a quarter of a request's whole telemetry)."""
        self.settlements = meter.create_observable_counter(
            "mcp_server.settlements",
            callbacks=[self._observe_settlements],
            unit="{request}",
            description="Requests settled, by outcome.",
        )
        self._sessions: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._unset = tracer_provider is None and meter_provider is None and _providers_unset()
        """Whether nobody has set a global provider yet (then a request's telemetry costs one check)."""

    def recording(self) -> bool:
        """Whether anything would record: ``False`` while the site has set up neither a tracer nor a meter
        provider (the API alone records nothing, so the request's span is not even made)."""
        if self._unset and _providers_unset():
            return False
        self._unset = False  # set up now: from now on, always
        return True

    def start(
        self,
        record: LedgerRecord,
        request_id: RequestId,
        params: Mapping[str, Any] | None,
        transport: str,
        headers: Mapping[str, Any] | None,
    ) -> OTelRequestSpan | None:
        if not self.recording():
            return None
        attributes = span_attributes(record, request_id, transport)
        parent = parent_of(params, headers)
        links: list[Link] = []
        if parent is not None:
            ambient = trace.get_current_span().get_span_context()
            if ambient.is_valid:
                links.append(Link(ambient))
        span = self.tracer.start_span(
            span_name(attributes), context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        return OTelRequestSpan(self, span, attributes, parent)

    def settled(self, handle: OTelRequestSpan, state: str, code: str | None, error_type: str | None) -> None:
        """Record a settled request's duration and outcome."""
        attributes = {key: handle.attributes[key] for key in METRIC_KEYS if key in handle.attributes}
        if attributes.get("mcp.protocol.version", KNOWN_VERSIONS[0]) not in KNOWN_VERSIONS:
            attributes["mcp.protocol.version"] = OTHER  # a version the client made up (then refused)
        if code is not None:
            attributes["rpc.response.status_code"] = code
            for key in ("gen_ai.tool.name", "gen_ai.prompt.name"):  # names the client made up: not a series
                if key in attributes:
                    attributes[key] = name_label(attributes[key], code)
            attributes["mcp.method.name"] = method_label(attributes["mcp.method.name"], code)
        if error_type is not None:
            attributes["error.type"] = error_type
        self.operation_duration.record(time.monotonic() - handle.started, attributes, NO_EXEMPLAR)
        counted = (outcome_label(state, code, error_type), str(attributes["mcp.method.name"]))
        self._settled[counted] = self._settled.get(counted, 0) + 1
        method = handle.attributes["mcp.method.name"]
        session_id = handle.attributes.get("mcp.session.id")
        if method == "initialize" and session_id is not None and code is None:
            self._opened(str(session_id), handle.attributes)

    def _observe_settlements(self, options: metrics.CallbackOptions) -> Iterator[metrics.Observation]:
        """The cumulative counts, for the SDK's collection (in its reader's thread: the copy is one step
        under the GIL, so a settlement counted meanwhile is read at the next collection)."""
        for (outcome, method), count in list(self._settled.items()):
            yield metrics.Observation(count, {"mcp_server.outcome": outcome, "mcp.method.name": method})

    def _opened(self, session_id: str, attributes: dict[str, Any]) -> None:
        keys = ("mcp.protocol.version", "network.transport", "network.protocol.name")
        self._sessions[session_id] = (time.monotonic(), {k: attributes[k] for k in keys if k in attributes})
        while len(self._sessions) > SESSIONS_REMEMBERED:
            self._sessions.popitem(last=False)

    def session_closed(self, session_id: str) -> None:
        opened = self._sessions.pop(session_id, None)
        if opened is not None:
            started, attributes = opened
            self.session_duration.record(time.monotonic() - started, attributes, NO_EXEMPLAR)
