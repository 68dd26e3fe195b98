"""Deprecated: the system checks are in :mod:`mcp_server.checks` (this module re-exports the names it had)."""

from __future__ import annotations

from .checks import (
    SQLITE_OPTIONS,
    check_asgi_routing,
    check_authentication,
    check_sqlite_options,
    routed_servers,
)
from .core.moved import warn_moved

__all__ = [
    "SQLITE_OPTIONS",
    "check_asgi_routing",
    "check_authentication",
    "check_sqlite_options",
    "routed_servers",
]

warn_moved("mcp_server.site_checks", "mcp_server.checks")
