"""The base of the task stores, as ``django.contrib.sessions.backends.base`` is of Django's session stores:
:class:`~mcp_server.core.tasks.TaskStore`, the record it keeps and the listener it calls.

They are defined in :mod:`mcp_server.core.tasks` and re-exported here: ``protocol/`` (a lower layer than the
stores) runs tasks against the interface, so it stays where that layer can import it.

There is no cache task store (:data:`NO_CACHE_STORE` says why; the ``mcp_server.E022`` check says it too).
"""

from __future__ import annotations

from ...core.tasks import TaskChange, TaskRecord, TaskStore

__all__ = ["NO_CACHE_STORE", "TaskChange", "TaskRecord", "TaskStore"]

NO_CACHE_STORE = (
    "a cache task store is not offered: a task changes status several times, each a compare-and-set from a "
    "live status (exactly one of a finishing worker, tasks/cancel, an operator and a survivor's upkeep "
    "wins), its answers merge under an optimistic lock, and the live tasks are counted (MAX_TASKS) and "
    "swept by lease and deadline across all workers; Django's cache API has no conditional update of a "
    "stored value and no query over its keys, and a cache may evict a task that must outlive its request"
)
"""Why ``TASK_STORE_BACKEND`` has no cache store, as its system check says."""
