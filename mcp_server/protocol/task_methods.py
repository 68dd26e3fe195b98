"""The methods of the tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28): ``tasks/get``,
``tasks/update`` and ``tasks/cancel``, answered from the shared store by any worker, for the caller's own
tasks on this server."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..core.context import Context
from ..core.rounds import InputRequest
from ..core.stores import bounded
from ..core.tasks import TaskRecord, owner_of
from ..wire.errors import INVALID_PARAMS, JSONRPCError
from .tasks import TaskHost, missing_extension, runner_of, tasks_declared

__all__ = ["tasks_cancel", "tasks_get", "tasks_update", "visible_tasks"]

KNOWN_INPUTS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})


async def visible_tasks(ctx: Context, task_ids: Collection[str]) -> list[str]:
    """Of ``task_ids``, those of the caller's own tasks on this server (as :func:`_find` sees them)."""
    runner = runner_of(ctx)
    if runner is None:
        return []
    visible = []
    for task_id in task_ids:
        record = await bounded(runner.store.aget(task_id), "database")
        if record is not None and record.server == ctx.server.key and record.owner == owner_of(ctx.user):
            visible.append(task_id)
    return visible


async def _find(ctx: Context) -> tuple[TaskHost, TaskRecord]:
    """The caller's task named by ``taskId``: -32021 without the extension (checked first), -32602 for an
    id that is unknown, expired, of another server or of another owner (the same answer for all)."""
    if not tasks_declared(ctx):
        raise missing_extension(ctx.method)
    task_id = ctx.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
    runner = runner_of(ctx)
    record = await bounded(runner.store.aget(task_id), "database") if runner is not None else None
    if (
        runner is None
        or record is None
        or record.server != ctx.server.key
        or record.owner != owner_of(ctx.user)
    ):
        raise JSONRPCError(INVALID_PARAMS, f"Task not found: {task_id}", {"taskId": task_id})
    return runner, record


async def tasks_get(ctx: Context) -> dict[str, Any]:
    """``tasks/get``: the DetailedTask."""
    _runner, record = await _find(ctx)
    return record.detailed()


async def tasks_update(ctx: Context) -> dict[str, Any]:
    """``tasks/update``: record the answers to outstanding input requests (others are ignored)."""
    runner, record = await _find(ctx)
    responses = ctx.params.get("inputResponses")
    if not isinstance(responses, dict):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
    outstanding = record.outstanding() if record.live else {}
    answers: dict[str, Any] = {}
    for key, answer in responses.items():
        asked = outstanding.get(key)
        if not isinstance(asked, dict):
            continue
        request = InputRequest(str(asked.get("method")), dict(asked.get("params") or {}))
        answers[key] = request.check_answer(key, answer) if request.method in KNOWN_INPUTS else answer
    if answers:
        await bounded(runner.store.aanswer(record.task_id, answers), "database")
        runner.wake(record.task_id)
    return {}


async def tasks_cancel(ctx: Context) -> dict[str, Any]:
    """``tasks/cancel``: an empty acknowledgement, also for a task already terminal."""
    runner, record = await _find(ctx)
    if record.live:
        await runner.cancel(record.task_id)
    return {}
