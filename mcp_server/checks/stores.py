"""Checks of the stores: ``mcp_server.E011``/``W006`` (``LEDGER_BACKEND``), ``E020``/``E021``
(``EVENT_STORE_BACKEND`` and the stream settings), ``E022`` (``TASK_STORE_BACKEND``)."""

from __future__ import annotations

from django.core.checks import CheckMessage, Error, Warning
from django.core.exceptions import ImproperlyConfigured

from ..conf import DEFAULTS, MCPSettings
from ..stores.events.base import EventStore
from ..stores.loading import load_backend
from ..stores.tasks.base import NO_CACHE_STORE, TaskStore
from .base import mcp_check, seconds

__all__ = ["check_event_store", "check_ledger_backend", "check_task_store"]


@mcp_check
def check_ledger_backend(conf: MCPSettings) -> list[CheckMessage]:
    """E011: ``LEDGER_BACKEND`` cannot be built; W006: as configured, it cannot keep its promises."""
    from ..stores.ledger import get_ledger

    try:
        ledger = get_ledger()
    except Exception as exc:
        path = conf.LEDGER_BACKEND
        return [Error(f"MCP_SERVER['LEDGER_BACKEND'] {path!r} cannot be used: {exc}", id="mcp_server.E011")]
    return [
        Warning(
            f"The ledger backend cannot keep its promises: {reason}.",
            hint="Use the database ledger, or the cache ledger on a shared cache such as Redis.",
            id="mcp_server.W006",
        )
        for reason in ledger.check()
    ]


@mcp_check
def check_event_store(conf: MCPSettings) -> list[CheckMessage]:
    """E020: ``EVENT_STORE_BACKEND`` does not import or is not an event store; E021: a stream setting is
    out of range."""
    messages: list[CheckMessage] = []
    try:  # what get_event_store will do with it
        load_backend("EVENT_STORE_BACKEND", conf.EVENT_STORE_BACKEND, EventStore)
    except (ImportError, ImproperlyConfigured) as exc:
        messages.append(
            Error(
                f"MCP_SERVER['EVENT_STORE_BACKEND'] {conf.EVENT_STORE_BACKEND!r} cannot be used: {exc}",
                hint="Use mcp_server.stores.events.database.DatabaseEventStore or "
                "mcp_server.stores.events.cache.CacheEventStore.",
                id="mcp_server.E020",
            )
        )
    problems = []
    if seconds(conf.EVENT_RETENTION) is None:
        problems.append("EVENT_RETENTION must be a positive number of seconds")
    limit = conf.MAX_STREAM_EVENTS
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        problems.append("MAX_STREAM_EVENTS must be an integer >= 1")
    retry = conf.SSE_RETRY_MS
    if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int) or retry < 0):
        problems.append("SSE_RETRY_MS must be None or an integer >= 0 (milliseconds)")
    if conf.SSE_POLL_AFTER is not None and seconds(conf.SSE_POLL_AFTER) is None:
        problems.append("SSE_POLL_AFTER must be None or a positive number of seconds")
    messages += [Error(f"MCP_SERVER: {p}.", id="mcp_server.E021") for p in problems]
    return messages


@mcp_check
def check_task_store(conf: MCPSettings) -> list[CheckMessage]:
    """E022: ``TASK_STORE_BACKEND`` does not import or is not a task store (a cache one is not offered)."""
    try:
        load_backend("TASK_STORE_BACKEND", conf.TASK_STORE_BACKEND, TaskStore)
    except (ImportError, ImproperlyConfigured) as exc:
        return [
            Error(
                f"MCP_SERVER['TASK_STORE_BACKEND'] {conf.TASK_STORE_BACKEND!r} cannot be used: {exc}",
                hint=f"Use {DEFAULTS['TASK_STORE_BACKEND']} (the default); {NO_CACHE_STORE}.",
                id="mcp_server.E022",
            )
        ]
    return []
