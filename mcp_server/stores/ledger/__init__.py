"""The request ledger's stores: every request recorded from arrival to settlement, shared by all workers.

The store is chosen by the import path of its class in ``MCP_SERVER["LEDGER_BACKEND"]``, as Django chooses a
session engine: :class:`~mcp_server.stores.ledger.database.DatabaseLedger` (default; the admin reads it) or
:class:`~mcp_server.stores.ledger.cache.CacheLedger`; their base is :class:`~.base.Ledger`.
"""

from __future__ import annotations

from functools import lru_cache

from ...conf import mcp_settings
from ..loading import load_backend
from .base import Ledger

__all__ = ["Ledger", "get_ledger"]


@lru_cache(maxsize=4)
def _build(path: str, cache_alias: str, retention: float, lease: float) -> Ledger:
    backend = load_backend("LEDGER_BACKEND", path, Ledger)
    ledger: Ledger = backend({"CACHE_ALIAS": cache_alias, "RETENTION": retention, "LEASE_TIMEOUT": lease})
    return ledger


def get_ledger() -> Ledger:
    """The configured ledger store (one instance per distinct configuration)."""
    return _build(
        mcp_settings.LEDGER_BACKEND,
        mcp_settings.LEDGER_CACHE_ALIAS,
        float(mcp_settings.LEDGER_RETENTION),
        float(mcp_settings.LEASE_TIMEOUT),
    )
