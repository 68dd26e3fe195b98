"""What a worker process does with the messages of other workers (or its own): :meth:`WorkerMessages.handle`
acts on each through the method its type maps to, and :meth:`~WorkerMessages._broadcast` and
:meth:`~WorkerMessages._send` send them. A part of :class:`~mcp_server.runtime.Runtime`, which owns the tables
these methods use.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.stores import CHANNEL_LAYER, bounded
from ..protocol.settlement import ABORTED, aborted_response
from ..sessions import SessionCache
from ..wire.messages import (
    WORKERS_GROUP,
    AbortRequest,
    AbortResult,
    CancelRequest,
    CancelSettled,
    ClientAnswer,
    CredentialChanged,
    EndSession,
    ListenEvent,
    SessionChanged,
    StopTask,
    StreamMessage,
    StreamWake,
    TaskStatus,
    WorkerMessage,
    to_event,
)
from .credentials import CredentialWatches
from .listeners import ListenerTable
from .outbound import OutboundTable
from .requests import RequestTable
from .stream_hub import StreamHub
from .streams import SessionStreams
from .tasks import TaskRunner

__all__ = ["WorkerMessages"]

logger = logging.getLogger("mcp_server.runtime")


class WorkerMessages:
    """The worker messages' part of a runtime: one method per message type (see the module docstring)."""

    layer: Any
    requests: RequestTable
    sessions: SessionCache
    outbound: OutboundTable
    tasks: TaskRunner
    streams: SessionStreams
    listeners: ListenerTable
    resumed: StreamHub
    credentials: CredentialWatches
    _acts: dict[type[Any], Callable[[Any], Awaitable[None]]]

    async def handle(self, message: WorkerMessage) -> None:
        """Act on a message from another worker (or this one): the method its type maps to (``_on_*``)."""
        act = self._acts.get(type(message))
        if act is not None:
            await act(message)

    def _message_table(self) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
        """Which method acts on each type of worker message (:meth:`handle`)."""
        return {
            CancelRequest: self._on_cancel_request,
            CancelSettled: self._on_cancel_settled,
            EndSession: self._on_end_session,
            SessionChanged: self._on_session_changed,
            AbortRequest: self._on_abort_request,
            ClientAnswer: self._on_client_answer,
            StopTask: self._on_stop_task,
            TaskStatus: self._on_task_status,
            StreamMessage: self._on_stream_message,
            ListenEvent: self._on_listen_event,
            StreamWake: self._on_stream_wake,
            CredentialChanged: self._on_credential_changed,
        }

    async def _on_cancel_request(self, message: CancelRequest) -> None:
        if await self.requests.cancel(message.session_id, message.key):
            await self._cancel_settled(message.session_id, message.key)

    async def _on_cancel_settled(self, message: CancelSettled) -> None:
        self.requests.forget_cancel(message.session_id, message.key)

    async def _on_end_session(self, message: EndSession) -> None:
        await self._session_ended(message.session_id, message.reason)

    async def _on_session_changed(self, message: SessionChanged) -> None:
        self.sessions.forget(message.session_id)

    async def _on_abort_request(self, message: AbortRequest) -> None:
        entry = self.requests.get(message.session_id, message.key, message.pk)
        aborted = entry is not None and await self.requests.settle(
            entry, ABORTED, aborted_response(entry.request_id)
        )
        if message.reply_to:
            await self._send(message.reply_to, AbortResult(message.session_id, message.key, aborted=aborted))

    async def _on_client_answer(self, message: ClientAnswer) -> None:
        self.outbound.resolve_forwarded(message.session_id, message.message)

    async def _on_stop_task(self, message: StopTask) -> None:
        self.tasks.stop_local([message.task_id])

    async def _on_task_status(self, message: TaskStatus) -> None:
        await self.tasks.heard(message)

    async def _on_stream_message(self, message: StreamMessage) -> None:
        await self.streams.send(message.session_id, message.message)

    async def _on_listen_event(self, message: ListenEvent) -> None:
        self.listeners.deliver(message)

    async def _on_stream_wake(self, message: StreamWake) -> None:
        self.resumed.deliver(message)

    async def _on_credential_changed(self, message: CredentialChanged) -> None:
        self.credentials.poke(message.user_id)

    async def _task_status(self, message: TaskStatus) -> None:
        """A task's status changed (on any worker): ``notifications/tasks`` to the listen streams asking."""
        self.listeners.deliver_task(message.task)

    async def _session_ended(self, session_id: str, reason: str) -> None:
        self.sessions.forget(session_id)
        await self.requests.close_session(session_id, reason)
        self.streams.close(session_id, reason)

    async def _cancel_settled(self, session_id: str | None, key: str) -> None:
        await self._broadcast(CancelSettled(session_id=session_id, key=key))

    async def _stop_task_elsewhere(self, task_id: str) -> None:
        await self._broadcast(StopTask(task_id=task_id))

    async def _broadcast(self, message: WorkerMessage) -> bool:
        if self.layer is None:
            return False
        try:
            await bounded(self.layer.group_send(WORKERS_GROUP, to_event(message)), CHANNEL_LAYER)
        except Exception:
            logger.exception("could not tell the other workers: %s", message.type)
            return False
        return True

    async def _send(self, channel: str, message: WorkerMessage) -> None:
        if self.layer is not None:
            await bounded(self.layer.send(channel, to_event(message)), CHANNEL_LAYER)
