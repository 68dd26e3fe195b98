"""What bounds a task (tasks extension): how many may be live (``MAX_TASKS_PER_OWNER``, ``MAX_TASKS``, counted
in the shared task store), how long one may stay live (``TASK_MAX_DURATION``, else its TTL), and what a task
keeps of the call that created it (its tool's name and arguments, the client's capabilities: never the
HTTP request, its ``_meta`` or the call's bookkeeping)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..conf import mcp_settings
from ..core.context import Context, Peer, SessionState
from ..core.stores import bounded
from ..core.tasks import TaskStore
from ..wire.errors import REQUEST_TIMEOUT, TOO_MANY_TASKS, JSONRPCError

__all__ = [
    "TOO_MANY_TASKS",
    "admit",
    "client_address",
    "max_duration",
    "overdue_error",
    "task_context",
    "task_deadline",
]


def client_address(ctx: Context) -> str:
    """The caller's address as the server saw it (the ASGI scope's ``client``), or ``""`` (stdio)."""
    meta = getattr(ctx.request, "META", None) or {}
    return str(meta.get("REMOTE_ADDR") or "")[:100]


async def admit(store: TaskStore, owner: str, address: str) -> None:
    """Raise -32004 when one more live task would exceed ``MAX_TASKS_PER_OWNER`` (an anonymous owner counted
    by ``address``) or ``MAX_TASKS``. The count is the store's, shared by every worker: creations racing on
    several workers may each pass, so the limit may be overshot by the number in flight."""
    per_owner, total = mcp_settings.MAX_TASKS_PER_OWNER, mcp_settings.MAX_TASKS
    if not per_owner and not total:
        return
    mine, everyone = await bounded(store.acount_live(owner, address), "database")
    if per_owner and mine >= per_owner:
        who = f"address {address}" if owner == "anonymous" and address else "this caller"
        setting, held, limit = "MAX_TASKS_PER_OWNER", mine, per_owner
    elif total and everyone >= total:
        who, setting, held, limit = "this server", "MAX_TASKS", everyone, total
    else:
        return
    raise JSONRPCError(
        TOO_MANY_TASKS,
        f"Too many live tasks for {who}: {held}, at most {limit} ({setting}); wait for one to end or "
        "cancel one with tasks/cancel",
        {"limit": limit, "live": held, "setting": setting},
    )


def max_duration() -> float | None:
    """Seconds a task may stay live: ``TASK_MAX_DURATION``, else ``TASK_TTL`` (``None``: unbounded)."""
    seconds = mcp_settings.TASK_MAX_DURATION
    if seconds is None:
        seconds = mcp_settings.TASK_TTL
    return float(seconds) if seconds else None


def task_deadline(created: datetime) -> datetime | None:
    """When a task created at ``created`` fails if still live."""
    seconds = max_duration()
    return created + timedelta(seconds=seconds) if seconds is not None else None


def overdue_error(seconds: float | None) -> JSONRPCError:
    """The error of a task still live at its deadline (-32001, as a request past its deadline)."""
    after = f" after {seconds:g}s" if seconds is not None else ""
    return JSONRPCError(
        REQUEST_TIMEOUT,
        f"Task timed out: still live{after}, its maximum duration (TASK_MAX_DURATION, else TASK_TTL)",
    )


def task_context(ctx: Context, task_id: str, peer: Peer) -> Context:
    """A fresh context for the task: what the handler needs of its call, and nothing that holds the call
    (its HTTP request, its ``_meta``, its claim on the request table, its deadline scope, its peer)."""
    session = SessionState(
        id=ctx.session.id,
        protocol_version=ctx.session.protocol_version,
        client_capabilities=ctx.session.client_capabilities,
        client_info=ctx.session.client_info,
    )
    params: dict[str, Any] = {"name": ctx.params.get("name"), "arguments": ctx.params.get("arguments")}
    return Context(
        server=ctx.server,
        session=session,
        request_id=ctx.request_id,
        method=ctx.method,
        params=params,
        peer=peer,
        user=ctx.user,
        runtime=ctx.runtime,
        task_id=task_id,
    )
