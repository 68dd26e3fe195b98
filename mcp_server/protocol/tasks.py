"""The tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28): a ``tools/call`` answered with a
task (``tasks/get``, ``tasks/update``, ``tasks/cancel``, answered from the shared store by any worker, are in
:mod:`.task_methods`).

A task runs on the worker that received its call, in a background ``asyncio`` task held by the process's
task runner (:class:`TaskHost`, the runtime's :class:`~mcp_server.runtime.tasks.TaskRunner`; the request
itself is settled with the ``CreateTaskResult``). Input asked inside a task (``ctx.elicit`` and the like)
parks it ``input_required``: the asks are written to the store, ``tasks/get`` shows those still
unanswered, ``tasks/update`` (on any worker) records answers, and once every ask of the round is answered
the handler runs again from the start with them (as with input rounds of a call). The runner renews the
lease of its tasks through the ledger upkeep; when its worker dies, a survivor fails them once the lease
ran out.

A parked task sleeps on an event: set by a write to the task in this process (an answer, a cancel), by a
status change heard on the channel layer (a write on another worker), and, as a fallback for a lost
message, by the upkeep at each lease renewal (``TaskRunner.recheck``); it never polls the store. Every
task fails once its deadline passes (``TASK_MAX_DURATION``, else its TTL), working or parked
(:mod:`.task_bounds`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.context import Context
from ..core.moved import moved_names
from ..core.tasks import (
    TASKS_EXTENSION,
    Detach,
    TaskStore,
)
from ..wire.v2026_07_28 import MissingClientCapability

if TYPE_CHECKING:
    from ..registry.tools import Tool

__all__ = ["TaskHost", "call_tool", "missing_extension", "runner_of", "tasks_declared"]


def tasks_declared(ctx: Context) -> bool:
    """Whether this request's ``clientCapabilities`` declare the tasks extension."""
    extensions = ctx.session.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def missing_extension(what: str) -> MissingClientCapability:
    return MissingClientCapability(
        {"extensions": {TASKS_EXTENSION: {}}},
        f"{what} needs the {TASKS_EXTENSION} extension in this request's clientCapabilities",
    )


def runner_of(ctx: Context) -> TaskHost | None:
    """The task runner of the process serving ``ctx`` (``None`` outside a runtime)."""
    runner = getattr(ctx.runtime, "tasks", None)
    return runner if isinstance(runner, TaskHost) else None


async def call_tool(ctx: Context, tool: Tool) -> dict[str, Any]:
    """``tools/call``: the tool's result, or (a task-capable tool, the extension declared) a task."""
    arguments = ctx.params.get("arguments")
    if tool.task is None or ctx.task_id is not None or not ctx.sessionless:
        return await tool.call(arguments, ctx)
    runner = runner_of(ctx)
    if not tasks_declared(ctx) or runner is None:
        if tool.task == "required":
            raise missing_extension(f"Tool {tool.name}")
        return await tool.call(arguments, ctx)
    if tool.task_start == "immediate":
        return await runner.start(ctx, tool, {})
    await runner.admit(ctx)  # over the limit, the handler does not run either
    ctx.detaching = True
    try:
        return await tool.call(arguments, ctx)
    except Detach:
        pass  # started below, outside the except clause (see TaskRunner._execute)
    finally:
        ctx.detaching = False
    answers = ctx.rounds.answers_so_far() if ctx.rounds is not None else {}
    return await runner.start(ctx, tool, answers)


@runtime_checkable
class TaskHost(Protocol):
    """What protocol code needs of the process's task runner
    (:class:`mcp_server.runtime.tasks.TaskRunner`)."""

    @property
    def store(self) -> TaskStore:
        """The shared task store."""
        ...

    async def admit(self, ctx: Context) -> None:
        """Refuse a task over the caps (per owner, per site) before its handler runs."""
        ...

    async def start(self, ctx: Context, tool: Tool, answers: dict[str, Any]) -> dict[str, Any]:
        """Start the tool's handler as a task here; returns the ``CreateTaskResult``."""
        ...

    async def watch(self, task_id: str) -> bool:
        """Hear of the task's status changes, written by any worker."""
        ...

    async def unwatch(self, task_id: str) -> None:
        """Stop hearing of them."""
        ...

    def wake(self, task_id: str) -> None:
        """A parked task held here may go on (an answer, a cancel)."""
        ...

    async def cancel(self, task_id: str, message: str = "Cancelled by the client") -> bool:
        """Cancel the task, wherever it runs."""
        ...


__getattr__ = moved_names(__name__, {"TaskRunner": "mcp_server.runtime.tasks"})
"""``TaskRunner`` moved to :mod:`mcp_server.runtime.tasks` (the per-process tables); it is still given here,
with a warning."""
