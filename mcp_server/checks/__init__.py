"""System checks (ids ``mcp_server.E0xx`` / ``W0xx``, docs/reference/checks.md), one module per topic.

Importing the package registers them all (``MCPServerConfig.ready`` does). Every check that reads
``MCP_SERVER`` goes through the one guard :func:`~mcp_server.checks.base.mcp_check`: when ``MCP_SERVER`` is
not a dict only ``mcp_server.E000`` is reported.

- :mod:`.settings`: the ``MCP_SERVER`` dict, requests, sessions, stores' timeouts, cache hints
- :mod:`.tasks`: the task settings
- :mod:`.stores`: the ledger, event store and task store backends
- :mod:`.redis`: socket timeouts of a Redis channel layer or cache
- :mod:`.auth`: authentication classes, anonymous access, OAuth metadata
- :mod:`.site`: the ASGI application routes an MCP endpoint
- :mod:`.database`: SQLite's transaction mode and lock timeout
- :mod:`.limits`: the rate limits
- :mod:`.telemetry`: who may read ``/metrics``, the admin's link to a trace
- :mod:`.apps`: MCP Apps views (``APP_ORIGIN``, ``APP_CSP``, their templates)
"""

from __future__ import annotations

from .apps import check_app_settings, check_app_templates
from .auth import check_authentication
from .database import SQLITE_OPTIONS, check_sqlite_options
from .limits import check_rate_limits
from .redis import check_redis_cache_timeouts, check_redis_channel_layer
from .settings import (
    check_bounds,
    check_cache_hints,
    check_request_state_max_age,
    check_settings,
    check_store_timeout,
    check_telemetry,
)
from .site import check_asgi_routing, routed_servers
from .stores import check_event_store, check_ledger_backend, check_task_store
from .tasks import check_task_bounds, check_task_settings
from .telemetry import check_metrics_access, check_trace_url

__all__ = [
    "SQLITE_OPTIONS",
    "check_app_settings",
    "check_app_templates",
    "check_asgi_routing",
    "check_authentication",
    "check_bounds",
    "check_cache_hints",
    "check_event_store",
    "check_ledger_backend",
    "check_metrics_access",
    "check_rate_limits",
    "check_redis_cache_timeouts",
    "check_redis_channel_layer",
    "check_request_state_max_age",
    "check_settings",
    "check_sqlite_options",
    "check_store_timeout",
    "check_task_bounds",
    "check_task_settings",
    "check_task_store",
    "check_telemetry",
    "check_trace_url",
    "routed_servers",
]
