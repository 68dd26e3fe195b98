"""The request ledger: every request recorded from arrival to settlement, shared by all worker processes.

The backend is chosen by import string in ``MCP_SERVER["LEDGER_BACKEND"]``, as Django chooses session
engines: :class:`~mcp_server.ledger.database.DatabaseLedger` (default; the admin reads it) or
:class:`~mcp_server.ledger.cache.CacheLedger`.
"""

from __future__ import annotations

from functools import lru_cache

from django.utils.module_loading import import_string

from ..conf import mcp_settings
from ..core.records import DuplicateRequest, Ledger, LedgerRecord, request_key
from ..core.states import State

__all__ = ["DuplicateRequest", "Ledger", "LedgerRecord", "State", "get_ledger", "request_key"]


@lru_cache(maxsize=4)
def _build(path: str, cache_alias: str, retention: float, lease: float) -> Ledger:
    backend = import_string(path)
    return backend({"CACHE_ALIAS": cache_alias, "RETENTION": retention, "LEASE_TIMEOUT": lease})  # type: ignore[no-any-return]


def get_ledger() -> Ledger:
    """The configured ledger backend (one instance per distinct configuration)."""
    return _build(
        mcp_settings.LEDGER_BACKEND,
        mcp_settings.LEDGER_CACHE_ALIAS,
        float(mcp_settings.LEDGER_RETENTION),
        float(mcp_settings.LEASE_TIMEOUT),
    )
