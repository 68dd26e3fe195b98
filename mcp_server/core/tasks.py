"""Tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28): the record of one task, the store
interface every worker shares, and the signal a handler raises to go on as a task.

A ``tools/call`` that declares the extension may be answered with a task (``resultType: "task"``) instead
of its result: the tool goes on running on the worker that received the call, and the client polls
``tasks/get`` (any worker answers it from the store), answers input with ``tasks/update`` and cancels with
``tasks/cancel``. A task is ``working``, ``input_required`` (waiting for the client's answers), or
terminal: ``completed``, ``failed``, ``cancelled``; a terminal task never changes again (the store's
:meth:`TaskStore.afinish` is a compare-and-set from a live status).
"""

from __future__ import annotations

import logging
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..wire.v2026_07_28 import TASKS_EXTENSION

__all__ = [
    "ENDED_KEPT",
    "LIVE",
    "TASKS_EXTENSION",
    "TERMINAL",
    "Detach",
    "TaskChange",
    "TaskRecord",
    "TaskStore",
    "new_task_id",
    "owner_of",
]

logger = logging.getLogger("mcp_server.tasks")


WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
LIVE = (WORKING, INPUT_REQUIRED)
"""The statuses a task may leave."""
TERMINAL = (COMPLETED, FAILED, CANCELLED)
"""The statuses a task never leaves."""
ENDED_KEPT = 5.0
"""Seconds an ended task is kept at least, whatever its TTL: a task that fails at its TTL is still there for
the client's next polls to learn how it ended (rather than "Task not found")."""


def new_task_id() -> str:
    """An unguessable task id (192 random bits, URL- and header-safe): knowing it is what lets a caller
    poll the task, together with being its owner (:func:`owner_of`)."""
    return secrets.token_urlsafe(24)


def owner_of(user: Any) -> str:
    """Who a task belongs to: ``user:<pk>`` for an authenticated user (session, token, OAuth), else
    ``anonymous`` (then the unguessable id alone guards it, as the extension's bearer-like ids do)."""
    if (
        user is not None
        and getattr(user, "is_authenticated", False)
        and getattr(user, "pk", None) is not None
    ):
        return f"user:{user.pk}"
    return "anonymous"


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class TaskRecord:
    """One task as the store keeps it."""

    task_id: str
    server: str
    owner: str
    tool: str
    created: datetime
    updated: datetime
    status: str = WORKING
    status_message: str = ""
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    user_id: int | None = None
    worker: str = ""
    channel: str = ""
    lease_expires: datetime | None = None
    client_address: str = ""
    """The anonymous caller's address (the ASGI scope's ``client``): what ``MAX_TASKS_PER_OWNER`` counts by
    for ``owner == "anonymous"`` (empty for an authenticated owner, or without an address)."""
    deadline: datetime | None = None
    """When the task fails if it is still live (``TASK_MAX_DURATION``, else its TTL; ``None``: never)."""
    input_requests: dict[str, Any] = field(default_factory=dict)
    """Every input request the task asked (its keys are never reused)."""
    input_responses: dict[str, Any] = field(default_factory=dict)
    """The answers ``tasks/update`` brought, by key."""
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    version: int = 0
    """Bumped by every write: the optimistic lock of :meth:`TaskStore.aanswer`."""

    @property
    def live(self) -> bool:
        return self.status in LIVE

    def outstanding(self) -> dict[str, Any]:
        """The input requests not answered yet."""
        return {k: v for k, v in self.input_requests.items() if k not in self.input_responses}

    def summary(self) -> dict[str, Any]:
        """The Task fields (what a ``CreateTaskResult`` carries beside ``resultType``)."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.updated),
            "ttlMs": self.ttl_ms,
        }
        if self.status_message:
            out["statusMessage"] = self.status_message
        if self.poll_interval_ms:
            out["pollIntervalMs"] = self.poll_interval_ms
        return out

    def detailed(self) -> dict[str, Any]:
        """The DetailedTask ``tasks/get`` answers: the outstanding input requests, the result or the error
        by status (never a ``requestState``)."""
        out = self.summary()
        if self.status == INPUT_REQUIRED:
            out["inputRequests"] = self.outstanding()
        elif self.status == COMPLETED and self.result is not None:
            out["result"] = self.result
        elif self.status == FAILED and self.error is not None:
            out["error"] = self.error
        return out


TaskChange = Callable[[TaskRecord], Any]
"""Called with a task's new state after each status change a store writes (:meth:`TaskStore.on_change`)."""


class Detach(BaseException):
    """Raised by ``ctx.detach()`` while a task-capable tool runs inside its ``tools/call``: the call is
    answered with a task, and the handler runs again, as the task, from the start (with the input answers
    gathered so far). A ``BaseException`` so that a handler's ``except Exception`` does not swallow it."""


class TaskStore(ABC):
    """Where tasks live, shared by every worker process: the class ``TASK_STORE_BACKEND`` names (the
    database's, :class:`~mcp_server.stores.tasks.database.DatabaseTaskStore`, is the only one offered)."""

    def __init__(self) -> None:
        self._listeners: list[TaskChange] = []

    def on_change(self, listener: TaskChange) -> None:
        """Call ``listener(record)`` after each status change this process writes (create, input asked or
        answered, terminal): the hook for ``notifications/tasks`` on ``subscriptions/listen`` streams."""
        self._listeners.append(listener)

    def remove_listener(self, listener: TaskChange) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def _changed(self, record: TaskRecord | None) -> None:
        if record is None:
            return
        for listener in list(self._listeners):
            try:
                outcome = listener(record)
                if hasattr(outcome, "__await__"):
                    await outcome
            except Exception:  # a listener's failure never undoes or fails the write it hears of
                logger.exception("a task listener failed on %s", record.task_id[:12])

    @abstractmethod
    async def acreate(self, record: TaskRecord) -> None:
        """Store a new task (durably: a ``tasks/get`` on any worker finds it once this returns)."""

    @abstractmethod
    async def aget(self, task_id: str) -> TaskRecord | None:
        """The task, or ``None`` (never created, or pruned after its TTL)."""

    @abstractmethod
    async def aask(self, task_id: str, requests: dict[str, Any], message: str = "") -> bool:
        """A live task needs input: ``input_required``, ``requests`` added; ``False`` if it is terminal."""

    @abstractmethod
    async def aresume(self, task_id: str) -> bool:
        """A live task got its answers: ``working`` again; ``False`` if it is terminal."""

    @abstractmethod
    async def aanswer(self, task_id: str, answers: dict[str, Any]) -> TaskRecord | None:
        """Record answers to outstanding input requests (other keys are ignored); the task after it."""

    @abstractmethod
    async def afinish(
        self,
        task_id: str,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str = "",
    ) -> bool:
        """Compare-and-set from a live status to a terminal one; ``True`` for the one caller that wins."""

    @abstractmethod
    async def arenew(self, worker: str, until: datetime, held: Collection[str]) -> set[str]:
        """Extend the lease of ``worker``'s live tasks among ``held``; returns those still live."""

    @abstractmethod
    async def afail_orphans(self, now: datetime, error: dict[str, Any]) -> int:
        """Fail the live tasks whose lease ran out: their worker died, or (this worker's own) their handler
        never started (the call creating them was cancelled between the row and the start)."""

    @abstractmethod
    async def aprune(self, now: datetime) -> int:
        """Delete terminal tasks past their TTL."""

    @abstractmethod
    async def acount_live(self, owner: str, client_address: str) -> tuple[int, int]:
        """The live tasks of ``owner`` (of an anonymous owner: those from ``client_address``), and the live
        tasks of the whole store (every worker, every server)."""

    @abstractmethod
    async def aversions(self, task_ids: Collection[str]) -> dict[str, int]:
        """The ``version`` of each of these tasks still stored (one read for all)."""

    @abstractmethod
    async def afail_overdue(self, now: datetime, error: dict[str, Any]) -> list[str]:
        """Fail the live tasks whose deadline passed (wherever they run); the ids of those this call
        failed."""
