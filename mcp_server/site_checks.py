"""Deprecated: the system checks are in :mod:`mcp_server.checks` (this module re-exports the names it had)."""

from __future__ import annotations

import warnings

from .checks import (
    SQLITE_OPTIONS,
    check_asgi_routing,
    check_authentication,
    check_sqlite_options,
    routed_servers,
)

__all__ = [
    "SQLITE_OPTIONS",
    "check_asgi_routing",
    "check_authentication",
    "check_sqlite_options",
    "routed_servers",
]

warnings.warn(
    "mcp_server.site_checks is deprecated; import from mcp_server.checks.", DeprecationWarning, stacklevel=2
)
