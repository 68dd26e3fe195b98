"""The request's fields on every log record about it, and a JSON formatter that prints them.

The request's own task binds its entry (:func:`bind_request`, a context variable: asgiref carries it into
a sync handler's thread); :class:`RequestLogFilter`, installed on a handler, copies the fields onto each
record that passes while a request is bound. Client-given strings (the request id, the tool's name, the
client's name) are escaped as the server's own messages escape them: nothing a client sends can forge a log
line or a terminal sequence.
"""

from __future__ import annotations

import json
import logging
import weakref
from contextvars import ContextVar
from typing import Any, Protocol

from ..core.records import LedgerRecord

__all__ = ["FIELDS", "RequestJSONFormatter", "RequestLogFilter", "bind_request", "escaped", "log_fields"]

FIELDS = (
    "mcp_request_id",
    "mcp_method",
    "mcp_tool",
    "mcp_session_id",
    "mcp_client",
    "mcp_user_id",
    "mcp_worker",
    "trace_id",
)
"""The ``extra`` fields of a record about a request (``None`` outside one, or when it has no such value)."""

ESCAPED_LENGTH = 200
"""A client-given string is cut to this many characters (after escaping) in a log field."""


class Bound(Protocol):
    """What a bound request offers the log fields (a pending request of the request table)."""

    @property
    def record(self) -> LedgerRecord: ...

    @property
    def span(self) -> Any: ...


_current: ContextVar[weakref.ReferenceType[Bound] | None] = ContextVar("mcp_server_request", default=None)
"""A weak reference: the request holds its task, whose context holds this value, and a strong one would
make a reference cycle of every request (freed only by the cyclic garbage collector, a tenth of a call's
CPU). The request's own task holds the request while it runs, so the reference lives as long as it can
be read."""


def bind_request(entry: Bound) -> None:
    """Bind ``entry`` to the calling task's context (the request's own task: never undone, the context ends
    with the task)."""
    _current.set(weakref.ref(entry))


def _bound() -> Bound | None:
    ref = _current.get()
    return ref() if ref is not None else None


def escaped(value: str) -> str:
    """``value`` with every non-printable character escaped as ``repr`` would (no quotes added), cut."""
    if value.isprintable():
        return value[:ESCAPED_LENGTH]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)[:ESCAPED_LENGTH]


def log_fields(entry: Bound | None = None) -> dict[str, Any]:
    """The fields of ``entry`` (default: the request bound to the calling context), all ``None`` if none."""
    entry = entry if entry is not None else _bound()
    if entry is None:
        return dict.fromkeys(FIELDS)
    record = entry.record
    span = entry.span
    trace_id = span.trace_id if span is not None else ""
    return {
        "mcp_request_id": escaped(str(record.request_id)),
        "mcp_method": escaped(record.method),
        "mcp_tool": escaped(record.name) if record.method == "tools/call" and record.name else None,
        "mcp_session_id": record.session_id,
        "mcp_client": escaped(record.client) if record.client else None,
        "mcp_user_id": record.user_id,
        "mcp_worker": record.worker or None,
        "trace_id": trace_id or None,
    }


class RequestLogFilter(logging.Filter):
    """Adds :data:`FIELDS` to every record (install it on a handler: docs/howto/observability.md). A field the
    record already has (passed as ``extra``) is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in log_fields().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class RequestJSONFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the request's fields (those set), and the
    exception's traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
