"""The task stores (the ``io.modelcontextprotocol/tasks`` extension): where tasks live, shared by all workers.

The store is chosen by the import path of its class in ``MCP_SERVER["TASK_STORE_BACKEND"]``, as Django
chooses a session engine: :class:`~mcp_server.stores.tasks.database.DatabaseTaskStore` (default, and the
only one offered: see :data:`~.base.NO_CACHE_STORE`); their base is :class:`~.base.TaskStore`.
"""

from __future__ import annotations

from ...conf import mcp_settings
from ..loading import load_backend
from .base import TaskStore

__all__ = ["TaskStore", "new_task_store", "task_store_class"]


def task_store_class() -> type[TaskStore]:
    """The class ``TASK_STORE_BACKEND`` names (``ImportError`` or ``ImproperlyConfigured`` when it is not a
    task store)."""
    found: type[TaskStore] = load_backend("TASK_STORE_BACKEND", mcp_settings.TASK_STORE_BACKEND, TaskStore)
    return found


def new_task_store() -> TaskStore:
    """A new instance of the configured task store. Each caller (a runtime, an operator action, the prune
    command) gets its own, as it got its own ``DatabaseTaskStore()`` before: a store's change listeners
    (:meth:`~mcp_server.core.tasks.TaskStore.on_change`) are its own."""
    return task_store_class()()
