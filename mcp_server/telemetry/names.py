"""What every exporter of request metrics says alike (OpenTelemetry and Prometheus), with no import of either:
how a settlement is classified, its outcome, and the label values a client cannot multiply.

A client chooses the method and the tool it names. Where the server refused the name as made up (a code of
:data:`CLIENT_ERRORS`: -32601 for a method it does not know, -32602 for a tool it does not have), the metric
says ``_OTHER`` instead (:func:`method_label`, :func:`name_label`): a client cannot add time series by making
names up. And whatever a client names, a Prometheus metric keeps at most :data:`SERIES_LIMIT` pairs of method
and tool.
"""

from __future__ import annotations

from typing import Any

from ..core.states import State
from ..wire.v2026_07_28 import BUILTIN_METHODS
from ..wire.versions import SESSIONLESS_VERSIONS, SUPPORTED_VERSIONS

__all__ = [
    "BUCKETS",
    "CLIENT_ERRORS",
    "KNOWN_VERSIONS",
    "OTHER",
    "OUTCOMES",
    "RATE_LIMITED",
    "SERIES_LIMIT",
    "classify",
    "made_up",
    "method_label",
    "name_label",
    "outcome_label",
    "settlement_labels",
]

BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""Seconds: the explicit bucket boundaries the conventions advise for both duration histograms."""

CLIENT_ERRORS = frozenset({-32700, -32600, -32601, -32602, -32002})
"""Codes of a request the client got wrong: recorded, but the server span's status stays unset."""

RATE_LIMITED = "rate_limited"
"""The ``error.type`` and the outcome of a request refused by a rate limit or a quota."""

OTHER = "_OTHER"
"""The label value of a name the client made up (and of a protocol version the server refused)."""

SERIES_LIMIT = 1000
"""Pairs of method and tool a Prometheus metric keeps series for, per process (and per scrape for the
pending requests); past it, a new pair is counted as ``_OTHER``."""

OUTCOMES = {
    State.ANSWERED.value: "answered",
    State.CANCELLED.value: "cancelled",
    State.CLOSED.value: "closed",
    State.TIMED_OUT.value: "timed_out",
    State.ABORTED.value: "aborted",
    State.RATE_LIMITED.value: "rate_limited",
}

_ANSWERED_STATE = State.ANSWERED.value
_RATE_LIMITED_STATE = State.RATE_LIMITED.value
"""The states :func:`classify` tells apart, read off the enum once (each ``.value`` costs ~0.5 µs)."""

KNOWN_VERSIONS = (*SUPPORTED_VERSIONS, *SESSIONLESS_VERSIONS)
"""The revisions a metric names; any other version a request carried (one the server refused) counts as
``_OTHER``, as does a method the server does not know: a client cannot add time series by making names up."""


def classify(
    method: str, state: str, response: dict[str, Any] | None
) -> tuple[str | None, str | None, str | None]:
    """``(rpc.response.status_code, error.type, status description)`` of a settlement: ``error.type`` is
    set (and the status is ERROR) for a server fault, a deadline, an abort, a session's end, a tool error,
    a refusal by a rate limit (``rate_limited``, whether answered as an error or as a tool result); a
    client's mistake has a code but no ``error.type``."""
    if response is None:
        return None, None, None
    error = response.get("error")
    if state == _RATE_LIMITED_STATE:
        code = error.get("code") if isinstance(error, dict) else None
        return (str(code) if isinstance(code, int) else None), RATE_LIMITED, "rate limited"
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        description = message if isinstance(message, str) else None
        if not isinstance(code, int) or isinstance(code, bool):
            return None, "_OTHER", description
        if code in CLIENT_ERRORS and state == _ANSWERED_STATE:
            return str(code), None, None
        return str(code), str(code), description
    result = response.get("result")
    if method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
        return None, "tool_error", None
    return None, None, None


def made_up(code: str | None) -> bool:
    """Whether a settlement's code (as :func:`classify` gives it) says the client got the request wrong."""
    return code is not None and int(code) in CLIENT_ERRORS


def method_label(method: str, code: str | None) -> str:
    """The method as a metric names it: ``_OTHER`` for one the client made up."""
    return OTHER if made_up(code) and method not in BUILTIN_METHODS else method


def name_label(name: str, code: str | None) -> str:
    """The tool's (or prompt's) name as a metric names it: ``_OTHER`` for one the client made up."""
    return OTHER if name and made_up(code) else name


def outcome_label(state: str, code: str | None, error_type: str | None) -> str:
    """``mcp_server.outcome``: ``answered``, ``error`` (an error answer or a tool error), ``cancelled``,
    ``closed``, ``timed_out``, ``aborted`` or ``rate_limited``."""
    outcome = OUTCOMES.get(state, state)
    if outcome == "answered" and (code is not None or error_type is not None):
        return "error"
    return outcome


def settlement_labels(
    method: str, name: str, state: str, response: dict[str, Any] | None
) -> tuple[str, str, str]:
    """``(method, name, outcome)`` labels of a settlement (:func:`method_label`, :func:`name_label`,
    :func:`outcome_label` of what :func:`classify` says). A result answered, not a tool error (most
    settlements), is told without classifying: ``(method, name, "answered")``."""
    if state == _ANSWERED_STATE and response is not None and "error" not in response:
        result = response.get("result")
        if method != "tools/call" or not isinstance(result, dict) or result.get("isError") is not True:
            return method, name, "answered"
    code, error_type, _ = classify(method, state, response)
    return method_label(method, code), name_label(name, code), outcome_label(state, code, error_type)
