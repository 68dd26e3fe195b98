"""This worker's running tasks (the tasks extension, ``io.modelcontextprotocol/tasks``): :class:`TaskRunner`,
the process's table of them. What a task is, and how a call becomes one, is told in
:mod:`mcp_server.protocol.tasks`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..conf import mcp_settings
from ..core.context import Context
from ..core.rounds import InputRequest, InputRequired, InputRounds
from ..core.stores import CHANNEL_LAYER, bounded
from ..core.tasks import (
    CANCELLED,
    COMPLETED,
    FAILED,
    TaskRecord,
    TaskStore,
    new_task_id,
    owner_of,
)
from ..protocol.task_bounds import (
    admit,
    client_address,
    max_duration,
    overdue_error,
    task_context,
    task_deadline,
)
from ..protocol.v2026_07_28 import finish_result
from ..wire.errors import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT, JSONRPCError
from ..wire.messages import TaskStatus, task_group, to_event

if TYPE_CHECKING:
    from ..registry.tools import Tool

__all__ = ["TaskRunner"]

logger = logging.getLogger("mcp_server.tasks")

SHUTDOWN_MESSAGE = "the worker running the task shut down"


class _TaskPeer:
    """A task has no response stream: its notifications go nowhere, it sends no request."""

    async def notify(self, message: dict[str, Any]) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        raise JSONRPCError(INTERNAL_ERROR, f"a task cannot send {method} to the client")


class TaskRunner:
    """This worker's running tasks (see :mod:`mcp_server.protocol.tasks`)."""

    def __init__(
        self,
        store: TaskStore,
        *,
        worker_id: str,
        channel: Callable[[], str] = lambda: "",
        layer: Any = None,
        stop_elsewhere: Callable[[str], Awaitable[Any]] | None = None,
    ) -> None:
        self.store = store
        self.layer = layer
        """The channel layer status changes are published on (``None``: this process only)."""
        self.status_listeners: list[Callable[[TaskStatus], Awaitable[None]]] = []
        """Called with each :class:`TaskStatus` this worker hears of, from any worker, for the tasks it
        watches (:meth:`watch`): the hook of ``notifications/tasks`` on ``subscriptions/listen``."""
        store.on_change(self._publish)
        store.on_change(self._written)
        self.worker_id = worker_id
        self._channel = channel
        self._stop_elsewhere = stop_elsewhere
        self.running: dict[str, asyncio.Task[None]] = {}
        self._wakeups: dict[str, asyncio.Event] = {}
        self._parked: dict[str, int] = {}
        """The tasks parked here, with the version of the row each last read."""
        self._watching: dict[str, int] = {}
        self.stopping = False

    async def watch(self, task_id: str) -> bool:
        """Hear of the task's status changes, written by any worker, in :attr:`status_listeners` (until as
        many :meth:`unwatch` as there were ``watch``); ``False`` without a channel layer."""
        if self.layer is None or not self._channel():
            return False
        self._watching[task_id] = self._watching.get(task_id, 0) + 1
        if self._watching[task_id] == 1:
            try:
                await bounded(self.layer.group_add(task_group(task_id), self._channel()), CHANNEL_LAYER)
            except BaseException:
                self._watching.pop(task_id, None)
                raise
        return True

    async def unwatch(self, task_id: str) -> None:
        """Stop hearing of the task's status changes (once every ``watch`` of it is undone)."""
        count = self._watching.get(task_id, 0) - 1
        if count > 0:
            self._watching[task_id] = count
            return
        self._watching.pop(task_id, None)
        if count == 0 and self.layer is not None and self._channel():
            await bounded(self.layer.group_discard(task_group(task_id), self._channel()), CHANNEL_LAYER)

    async def heard(self, message: TaskStatus) -> None:
        """A status change arrived on this worker's channel: wake the task if it waits for answers here,
        and tell the listeners."""
        self.wake(message.task_id)
        for listener in list(self.status_listeners):
            await listener(message)

    async def _publish(self, record: TaskRecord) -> None:
        """Each status change this worker writes goes to the workers watching the task (never fatal)."""
        if self.layer is None:
            return
        try:
            event = to_event(TaskStatus(task_id=record.task_id, task=record.detailed()))
            await bounded(self.layer.group_send(task_group(record.task_id), event), CHANNEL_LAYER)
        except Exception:
            logger.warning("could not publish the status of task %s", record.task_id[:12], exc_info=True)

    def _written(self, record: TaskRecord) -> None:
        """A write to a task in this process (an answer, a cancel): wake the task if it is parked here."""
        self.wake(record.task_id)

    def held(self) -> set[str]:
        """The ids of the tasks running here (their leases are renewed by the upkeep)."""
        return set(self.running)

    async def admit(self, ctx: Context) -> None:
        """Raise -32004 when the caller may not start one more task (``MAX_TASKS_PER_OWNER``,
        ``MAX_TASKS``)."""
        await admit(self.store, owner_of(ctx.user), client_address(ctx))

    async def start(self, ctx: Context, tool: Tool, answers: dict[str, Any]) -> dict[str, Any]:
        """Create the task durably, start it here, and return the ``CreateTaskResult`` (-32000 while this
        worker shuts down: it would not run the task to its end; -32004 over the limits of live tasks)."""
        if self.stopping:
            raise JSONRPCError(CONNECTION_CLOSED, f"Connection closed: {SHUTDOWN_MESSAGE}")
        owner, address = owner_of(ctx.user), client_address(ctx)
        await admit(self.store, owner, address)
        now = timezone.now()
        ttl = mcp_settings.TASK_TTL
        poll = mcp_settings.TASK_POLL_INTERVAL
        user = ctx.user if getattr(ctx.user, "is_authenticated", False) else None
        record = TaskRecord(
            task_id=new_task_id(),
            server=ctx.server.key,
            owner=owner,
            tool=tool.name,
            created=now,
            updated=now,
            ttl_ms=int(ttl * 1000) if ttl else None,
            poll_interval_ms=max(1, int(poll * 1000)) if poll else None,
            user_id=getattr(user, "pk", None),
            worker=self.worker_id,
            channel=self._channel(),
            lease_expires=now + timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT)),
            client_address=address if owner == "anonymous" else "",
            deadline=task_deadline(now),
        )
        await bounded(self.store.acreate(record), "database")
        task_ctx = task_context(ctx, record.task_id, _TaskPeer())
        self.running[record.task_id] = asyncio.create_task(
            self._run(record.task_id, task_ctx, tool, dict(answers)), name=f"mcp task {tool.name}"
        )
        return {"resultType": "task", **record.summary()}

    async def _run(self, task_id: str, ctx: Context, tool: Tool, answers: dict[str, Any]) -> None:
        seconds = max_duration()
        error: JSONRPCError | None = None
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                await self._execute(task_id, ctx, tool, answers)
        except asyncio.CancelledError:
            # The error ends the asyncio task, which keeps it; its traceback keeps this frame, and the
            # scope would keep the asyncio task: a cycle left to the collector. Drop the scope first.
            del scope
            if self.stopping:
                closed = JSONRPCError(CONNECTION_CLOSED, f"Connection closed: {SHUTDOWN_MESSAGE}")
                await self._finish(task_id, FAILED, error=closed.to_error(), message=SHUTDOWN_MESSAGE)
            self._forget(task_id)
            raise
        except Exception as exc:  # past its deadline, or the store failed under the task
            if scope.expired():
                error = overdue_error(seconds)
            else:
                logger.exception("task %s (%s) failed", task_id[:12], tool.name)
                detail = f": {exc!r}" if mcp_settings.ERROR_DETAIL else ""  # the client may be anyone (W007)
                error = JSONRPCError(INTERNAL_ERROR, f"Internal error while running {tool.name}{detail}")
        try:
            if error is not None:  # written outside the except clause (see :meth:`_execute`)
                await self._finish(task_id, FAILED, error=error.to_error(), message=error.message)
        finally:
            self._forget(task_id)

    def _forget(self, task_id: str) -> None:
        self.running.pop(task_id, None)
        self._wakeups.pop(task_id, None)

    async def _finish(self, task_id: str, status: str, **values: Any) -> bool:
        try:
            return await bounded(self.store.afinish(task_id, status, **values), "database")
        except Exception:
            logger.exception("could not record the end of task %s", task_id[:12])
            return False

    async def _execute(self, task_id: str, ctx: Context, tool: Tool, answers: dict[str, Any]) -> None:
        """Run the handler until it ends; each round of input parks the task until answered (:meth:`_ask`).

        Nothing is awaited inside an ``except`` clause: a store call there hands the exception being handled
        to asgiref's thread (``exc_info``), whose reference cycles would keep the exception, its traceback,
        the handler's frames and their arguments alive until a full collection."""
        arguments = ctx.params.get("arguments")
        while True:
            rounds = ctx.rounds = InputRounds(ctx.session.client_capabilities, {}, answers)
            asked: dict[str, InputRequest] | None = None
            ending: tuple[str, dict[str, Any]] | None = None
            try:
                async with asyncio.timeout(tool.timeout):
                    result = await tool.call(arguments, ctx)
            except InputRequired as signal:
                asked = dict(signal.requests)
            except TimeoutError:
                error = JSONRPCError(REQUEST_TIMEOUT, f"Task timed out after {tool.timeout:g}s")
                ending = FAILED, {"error": error.to_error(), "message": error.message}
            except JSONRPCError as exc:
                ending = FAILED, {"error": exc.to_error(), "message": exc.message}
            else:
                ending = COMPLETED, {"result": finish_result(ctx, result)}
            if ending is not None:
                await self._finish(task_id, ending[0], **ending[1])
                return
            got = await self._ask(task_id, asked or {})
            if got is None:
                return
            answers = {**rounds.answers_so_far(), **got}
            if not await bounded(self.store.aresume(task_id), "database"):
                return

    async def _ask(self, task_id: str, requests: dict[str, InputRequest]) -> dict[str, Any] | None:
        """Park the task ``input_required`` until every ask of ``requests`` is answered: the answers, or
        ``None`` when the task ended meanwhile (cancelled)."""
        asked = {key: request.to_wire() for key, request in requests.items()}
        if not await bounded(self.store.aask(task_id, asked), "database"):
            return None
        wakeup = self._wakeups.setdefault(task_id, asyncio.Event())
        try:  # answered on another worker: its write is published to the task's group, which wakes us
            watched = await self.watch(task_id)
        except Exception:
            logger.warning(
                "task %s: cannot watch it; it wakes at lease renewals", task_id[:12], exc_info=True
            )
            watched = False
        try:
            while True:  # cleared before the read, which follows the watch: no answer slips between them
                wakeup.clear()
                record = await bounded(self.store.aget(task_id), "database")
                if record is None or not record.live:
                    return None
                if all(key in record.input_responses for key in asked):
                    return {key: record.input_responses[key] for key in asked}
                self._parked[task_id] = record.version
                del record  # parked, it holds its asks only
                await wakeup.wait()  # bounded by the task's deadline (:meth:`_run`)
        finally:
            self._parked.pop(task_id, None)
            if watched:
                with contextlib.suppress(Exception):
                    await self.unwatch(task_id)

    def wake(self, task_id: str) -> None:
        """The task changed: if it waits for answers here, it reads the store again now."""
        wakeup = self._wakeups.get(task_id)
        if wakeup is not None:
            wakeup.set()

    async def recheck(self) -> int:
        """Wake the parked tasks whose row changed since they last read it (the upkeep, at each lease
        renewal: the fallback for a status message lost on the channel layer); one read for all of them.
        Returns how many were woken."""
        parked = dict(self._parked)
        if not parked:
            return 0
        versions = await bounded(self.store.aversions(list(parked)), "database")
        changed = [task_id for task_id, seen in parked.items() if versions.get(task_id) != seen]
        for task_id in changed:
            self.wake(task_id)
        return len(changed)

    def stop_local(self, task_ids: Collection[str]) -> None:
        """Stop the handlers of these tasks if they run here (they were settled elsewhere)."""
        for task_id in task_ids:
            running = self.running.get(task_id)
            if running is not None:
                running.cancel()

    async def cancel(self, task_id: str, message: str = "Cancelled by the client") -> bool:
        """Settle the task ``cancelled`` (if still live) and stop its handler wherever it runs."""
        won = await bounded(self.store.afinish(task_id, CANCELLED, message=message), "database")
        if won:
            if task_id in self.running:
                self.stop_local([task_id])
            elif self._stop_elsewhere is not None:
                await self._stop_elsewhere(task_id)
        return won

    async def shutdown(self) -> int:
        """Fail every task running here (the worker stops) and wait for their handlers."""
        self.stopping = True
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        return len(tasks)
