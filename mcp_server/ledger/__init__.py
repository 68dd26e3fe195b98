"""The request ledger's names from before :mod:`mcp_server.stores`: ``get_ledger`` and the ledger's types,
re-exported from where they live now (:mod:`mcp_server.stores.ledger`, :mod:`mcp_server.core.records`).

The stores moved to :mod:`mcp_server.stores` (``mcp_server.ledger.database``, ``cache``, ``events`` and
``tasks`` still import, with a ``DeprecationWarning``).
"""

from __future__ import annotations

from ..core.records import DuplicateRequest, LedgerRecord, request_key
from ..core.states import State
from ..stores.ledger import Ledger, get_ledger

__all__ = ["DuplicateRequest", "Ledger", "LedgerRecord", "State", "get_ledger", "request_key"]
