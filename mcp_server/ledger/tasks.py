"""Deprecated: ``mcp_server.ledger.tasks`` moved to ``mcp_server.stores.tasks.database``.

This module only re-exports it, and warns when imported; the store is now chosen by ``TASK_STORE_BACKEND``
(:func:`mcp_server.stores.tasks.new_task_store`).
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.stores.tasks.database import ANSWER_ATTEMPTS, DatabaseTaskStore

__all__ = ["ANSWER_ATTEMPTS", "DatabaseTaskStore"]

warn_moved("mcp_server.ledger.tasks", "mcp_server.stores.tasks.database")
