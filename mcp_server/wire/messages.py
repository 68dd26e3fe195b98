"""Every message that crosses worker processes over the Channels channel layer: typed builders, one parser.

A worker process listens on one channel of its own (see :class:`~mcp_server.runtime.Runtime`) and is a member
of :data:`WORKERS_GROUP`, plus the group of every session whose standalone stream it holds, and
:data:`LISTEN_GROUP` while it holds a ``subscriptions/listen`` stream. Nothing else in
the package spells a channel-layer ``type``: build a message here, send it with ``to_event()``, and read one
with :func:`parse_event`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

__all__ = [
    "LISTEN_GROUP",
    "WORKERS_GROUP",
    "AbortRequest",
    "AbortResult",
    "CancelRequest",
    "CancelSettled",
    "ClientAnswer",
    "CredentialChanged",
    "EndSession",
    "ListenEvent",
    "SessionChanged",
    "StopTask",
    "StreamMessage",
    "StreamWake",
    "TaskStatus",
    "WorkerMessage",
    "parse_event",
    "session_group",
    "stream_group",
    "task_group",
    "to_event",
]

WORKERS_GROUP = "mcp-workers"
"""The channel-layer group every worker process of the site joins."""


LISTEN_GROUP = "mcp-listeners"
"""The group of the workers that hold at least one ``subscriptions/listen`` stream (2026-07-28)."""


def stream_group(stream_id: str) -> str:
    """The group of the workers that hold a resumed stream (``GET`` with ``Last-Event-ID``) of this id."""
    return f"mcp-stream-{stream_id}"


def session_group(session_id: str) -> str:
    """The group of the workers that hold a standalone stream (GET, or stdio) of this session."""
    return f"mcp-session-{session_id}"


@dataclass(frozen=True)
class CancelRequest:
    """The client cancelled a request; the worker holding it stops it and sends nothing for it."""

    type: ClassVar[str] = "mcp.cancel"
    session_id: str | None
    key: str


@dataclass(frozen=True)
class CancelSettled:
    """The worker holding a cancelled request settled it: the others forget the cancel they remembered."""

    type: ClassVar[str] = "mcp.cancel.settled"
    session_id: str | None
    key: str


@dataclass(frozen=True)
class EndSession:
    """A session ended (DELETE, idle expiry, an operator): its requests answer -32000, its streams close."""

    type: ClassVar[str] = "mcp.session.ended"
    session_id: str
    reason: str


@dataclass(frozen=True)
class SessionChanged:
    """A session's stored state changed (log level, subscriptions): cached copies are dropped."""

    type: ClassVar[str] = "mcp.session.changed"
    session_id: str


@dataclass(frozen=True)
class AbortRequest:
    """An operator aborted a request; the worker holding it answers -32003 and replies to ``reply_to``."""

    type: ClassVar[str] = "mcp.abort"
    session_id: str | None
    key: str
    reply_to: str = ""
    pk: Any = None
    """The ledger key: names a sessionless (2026-07-28) request, whose id other clients may use too."""


@dataclass(frozen=True)
class AbortResult:
    """Whether the worker that received an :class:`AbortRequest` settled the request."""

    type: ClassVar[str] = "mcp.abort.result"
    session_id: str | None
    key: str
    aborted: bool


@dataclass(frozen=True)
class StopTask:
    """A task was settled elsewhere (``tasks/cancel``, an operator): the worker running it stops it."""

    type: ClassVar[str] = "mcp.task.stop"
    task_id: str


def task_group(task_id: str) -> str:
    """The group of the workers that want a task's status changes (``subscriptions/listen`` with
    ``taskIds``): :class:`TaskStatus` messages go there."""
    return f"mcp-task-{task_id}"


@dataclass(frozen=True)
class TaskStatus:
    """A task's status changed (tasks extension): its DetailedTask, for ``notifications/tasks``."""

    type: ClassVar[str] = "mcp.task.status"
    task_id: str
    task: dict[str, Any]


@dataclass(frozen=True)
class ClientAnswer:
    """The client's answer to a server-to-client request, posted to a worker other than the one waiting."""

    type: ClassVar[str] = "mcp.answer"
    session_id: str
    message: dict[str, Any]


@dataclass(frozen=True)
class StreamMessage:
    """A server-initiated message for a session's standalone stream, whichever worker holds it."""

    type: ClassVar[str] = "mcp.stream"
    session_id: str
    message: dict[str, Any]


@dataclass(frozen=True)
class ListenEvent:
    """A change ``subscriptions/listen`` streams may have asked for (a list changed, a resource was updated),
    for every worker that holds one; each filters it per open stream."""

    type: ClassVar[str] = "mcp.listen"
    server: str
    """The key of the MCP server whose tools, prompts or resources changed."""
    method: str
    """The notification: ``notifications/tools/list_changed``, ``notifications/resources/updated``, ..."""
    params: dict[str, Any] | None = None
    """Its params without ``_meta`` (``{"uri": ...}`` for a resource update)."""


@dataclass(frozen=True)
class CredentialChanged:
    """A user was deactivated, changed or deleted, or a token revoked, changed or deleted: the workers check
    the credential of that user's (or token's) open streams again at once, and end those it no longer
    authenticates."""

    type: ClassVar[str] = "mcp.credential.changed"
    user_id: Any
    token_id: Any = None
    """The pk of the :class:`~mcp_server.auth.models.AccessToken` (``None``: every stream of the user)."""


@dataclass(frozen=True)
class StreamWake:
    """New events of a stream are in the event store: the workers that hold its resumed stream read them."""

    type: ClassVar[str] = "mcp.stream_wake"
    stream_id: str


WorkerMessage: TypeAlias = (
    CancelRequest
    | CancelSettled
    | EndSession
    | SessionChanged
    | AbortRequest
    | AbortResult
    | ClientAnswer
    | StreamMessage
    | ListenEvent
    | StopTask
    | TaskStatus
    | StreamWake
    | CredentialChanged
)

_KINDS: dict[str, type[WorkerMessage]] = {
    kind.type: kind
    for kind in (
        CancelRequest,
        CancelSettled,
        EndSession,
        SessionChanged,
        AbortRequest,
        AbortResult,
        ClientAnswer,
        StreamMessage,
        ListenEvent,
        StopTask,
        TaskStatus,
        StreamWake,
        CredentialChanged,
    )
}


def to_event(message: WorkerMessage) -> dict[str, Any]:
    """The channel-layer event carrying ``message``."""
    return {"type": message.type, **message.__dict__}


def parse_event(event: dict[str, Any]) -> WorkerMessage | None:
    """The message an event carries, or ``None`` for an event of another kind or shape."""
    kind = _KINDS.get(str(event.get("type")))
    if kind is None:
        return None
    fields = {k: v for k, v in event.items() if k != "type"}
    try:
        return kind(**fields)
    except TypeError:
        return None
