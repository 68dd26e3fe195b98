"""``subscriptions/listen`` (2026-07-28): a request whose answer is a long-lived stream of the notifications
it asked for.

The handler (:func:`listen`) takes the stream into this process's table of them (:class:`ListenStreams`,
the runtime's :class:`~mcp_server.runtime.listeners.ListenerTable`), sends
``notifications/subscriptions/acknowledged`` with the honoured filter, then every change the filter covers,
each tagged with the listen request's id (``_meta["io.modelcontextprotocol/subscriptionId"]``). Changes
reach every worker as :class:`~mcp_server.wire.messages.ListenEvent` on
:data:`~mcp_server.wire.messages.LISTEN_GROUP` (a worker is a member while it holds a listen stream), and
each worker filters them per open stream. The request is like any other for the ledger: closing the
stream cancels it; a graceful end (shutdown, the end of a stdio input, a credential that no longer
authenticates) answers it with the ``complete`` result tagged with the subscription id
(:meth:`~mcp_server.runtime.listeners.ListenerTable.finish`).

Resource subscriptions follow the permissions of ``resources/read``: a URI is honoured when it names a
resource (or an instance of a template) the caller may read, or lies over one (a prefix); each update is
delivered only for a URI the caller may read (:class:`ReadAccess`, checked at delivery).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..core.context import Context
from ..core.moved import moved_names
from ..registry.access import ausable, usable_entries
from ..registry.server import server_of
from ..wire.errors import INTERNAL_ERROR, JSONRPCError
from ..wire.jsonrpc import RequestId, encodable, notification
from ..wire.messages import ListenEvent
from ..wire.v2026_07_28 import SUBSCRIPTION_ID_KEY, TASKS_EXTENSION, MissingClientCapability
from .lifecycle import sessionless_capabilities
from .settlement import PendingRequest
from .task_methods import visible_tasks
from .tasks import runner_of

if TYPE_CHECKING:
    from ..registry.resources import Resource
    from ..registry.server import MCPServer

__all__ = [
    "ACKNOWLEDGED",
    "LIST_CHANGED",
    "ListenStreams",
    "Listener",
    "ReadAccess",
    "complete_result",
    "covers",
    "honored_filter",
    "listen",
    "listeners_of",
    "readable_subscriptions",
]

ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED = "notifications/resources/updated"
TASK_STATUS = "notifications/tasks"

LIST_CHANGED = {
    "notifications/tools/list_changed": ("toolsListChanged", "tools"),
    "notifications/prompts/list_changed": ("promptsListChanged", "prompts"),
    "notifications/resources/list_changed": ("resourcesListChanged", "resources"),
}
"""A list-changed notification -> (its filter member, the server capability that declares it)."""


def honored_filter(
    server: MCPServer, requested: object, client_capabilities: dict[str, Any]
) -> dict[str, Any]:
    """The part of a listen request's ``notifications`` filter this server delivers: the list kinds whose
    capability declares ``listChanged``, resource subscriptions when ``resources.subscribe`` is declared,
    ``taskIds`` only when the server declares the tasks extension. ``taskIds`` from a client that did not
    declare the tasks extension is -32021."""
    wanted = requested if isinstance(requested, dict) else {}
    declared = sessionless_capabilities(server)
    honored: dict[str, Any] = {}
    for key, feature in LIST_CHANGED.values():
        if wanted.get(key) is True and (declared.get(feature) or {}).get("listChanged"):
            honored[key] = True
    uris = wanted.get("resourceSubscriptions")
    if isinstance(uris, list) and uris and (declared.get("resources") or {}).get("subscribe"):
        honored["resourceSubscriptions"] = [str(uri) for uri in uris if _echoable(uri)]
    task_ids = wanted.get("taskIds")
    if task_ids is not None:
        if TASKS_EXTENSION not in (client_capabilities.get("extensions") or {}):
            raise MissingClientCapability(
                {"extensions": {TASKS_EXTENSION: {}}},
                f"Missing required client capability: extensions[{TASKS_EXTENSION!r}] (taskIds)",
            )
        if isinstance(task_ids, list) and TASKS_EXTENSION in (declared.get("extensions") or {}):
            honored["taskIds"] = [str(task_id) for task_id in task_ids if _echoable(task_id)]
    return honored


def _echoable(value: Any) -> bool:
    """Whether the acknowledgement can carry ``value`` back: a URI or task id with a lone UTF-16 surrogate
    (valid in the request's JSON, not in UTF-8) is left out of it, as anything not honored is."""
    return not isinstance(value, str) or encodable(value)


def covers(subscribed: Iterable[str], uri: str) -> bool:
    """Whether ``uri`` is one of the subscribed URIs or a sub-resource of one (``<subscribed>/...``)."""
    return any(uri == sub or uri.startswith(sub.rstrip("/") + "/") for sub in subscribed)


def _lies_under(prefix: str, entry: Resource) -> bool:
    """Whether a URI of ``entry`` (its fixed URI, or an instance of its template) may lie under ``prefix``."""
    if covers([prefix], entry.uri):
        return True
    return entry.is_template and prefix.startswith(entry.uri.split("{", 1)[0])


async def readable_subscriptions(ctx: Context, uris: Iterable[str]) -> list[str]:
    """Of a listen request's ``resourceSubscriptions``, those ``ctx``'s caller may hear of (the checks of
    ``resources/read``: token scopes, the resource's ``permission``): a URI of a resource or template the
    caller may read, or a prefix over at least one of those."""
    wanted = list(uris)
    if not wanted:
        return []
    server = server_of(ctx)
    readable = await usable_entries(list(server.resources.values()), ctx)
    ids = {id(entry) for entry in readable}
    kept = []
    for uri in wanted:
        found = server.find_resource(uri)
        if (found is not None and id(found[0]) in ids) or any(_lies_under(uri, e) for e in readable):
            kept.append(uri)
    return kept


class ReadAccess:
    """Whether a listen stream's caller may read a resource URI: the URI is resolved to its resource (or
    template), and that entry's verdict is kept for the life of the stream (one per entry)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._verdicts: dict[int, tuple[Resource, bool]] = {}

    async def allows(self, uri: str) -> bool:
        """Whether ``uri`` is one the caller may read (an unknown URI is not)."""
        found = server_of(self.ctx).find_resource(uri)
        if found is None:
            return False
        entry = found[0]
        known = self._verdicts.get(id(entry))
        if known is None or known[0] is not entry:
            known = self._verdicts[id(entry)] = (entry, await ausable(entry, self.ctx))
        return known[1]

    async def deliverable(self, message: dict[str, Any]) -> bool:
        """Whether a queued notification may go out: a resource update only for a readable URI."""
        if message.get("method") != RESOURCE_UPDATED:
            return True
        return await self.allows(str((message.get("params") or {}).get("uri", "")))


def complete_result(subscription_id: RequestId) -> dict[str, Any]:
    """The result that ends a listen stream gracefully."""
    return {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: subscription_id}}


@dataclass(eq=False)
class Listener:
    """One open listen stream in this process."""

    server: str
    subscription_id: RequestId
    honored: dict[str, Any]
    entry: PendingRequest | None = None
    queue: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    task: asyncio.Task[Any] | None = field(default_factory=asyncio.current_task)

    def wants(self, event: ListenEvent) -> bool:
        """Whether the stream asked for this change (and it is of its server)."""
        if event.server != self.server:
            return False
        if event.method in LIST_CHANGED:
            return bool(self.honored.get(LIST_CHANGED[event.method][0]))
        params = event.params or {}
        if event.method == RESOURCE_UPDATED:
            return covers(self.honored.get("resourceSubscriptions") or (), str(params.get("uri", "")))
        if event.method == TASK_STATUS:
            return str(params.get("taskId")) in (self.honored.get("taskIds") or ())
        return False

    def tagged(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A notification of this stream: ``params._meta`` carries the subscription id."""
        body = dict(params or {})
        body["_meta"] = {**(body.get("_meta") or {}), SUBSCRIPTION_ID_KEY: self.subscription_id}
        return notification(method, body)

    def end(self, *, drop: bool = False) -> None:
        """End the stream gracefully; ``drop``: what is queued and not yet sent is not sent."""
        if drop and asyncio.get_running_loop() is self.loop:
            while not self.queue.empty():
                self.queue.get_nowait()
        self.put(None)

    def put(self, item: dict[str, Any] | None) -> None:
        """Queue a notification (``None``: end gracefully), from this stream's loop or another thread."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.queue.put_nowait(item)
        else:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


@runtime_checkable
class ListenStreams(Protocol):
    """What the listen handler needs of the process's open listen streams
    (:class:`mcp_server.runtime.listeners.ListenerTable`)."""

    async def add(self, listener: Listener) -> None:
        """Open a stream: the changes it asked for are queued for it from now on, from any worker."""
        ...

    async def discard(self, listener: Listener) -> None:
        """Close a stream."""
        ...


def listeners_of(ctx: Context) -> ListenStreams | None:
    """The listen streams of the process serving ``ctx`` (``None`` outside a runtime)."""
    table = getattr(ctx.runtime, "listeners", None)
    return table if isinstance(table, ListenStreams) else None


async def listen(ctx: Context) -> dict[str, Any]:
    """``subscriptions/listen``: acknowledge, then stream what was asked until the stream ends."""
    table, runner = listeners_of(ctx), runner_of(ctx)
    if table is None or runner is None:
        raise JSONRPCError(INTERNAL_ERROR, "subscriptions/listen needs the worker's runtime")
    honored = honored_filter(server_of(ctx), ctx.params.get("notifications"), ctx.session.client_capabilities)
    if "taskIds" in honored:  # only the caller's own tasks (a DetailedTask carries the task's result)
        honored["taskIds"] = await visible_tasks(ctx, honored["taskIds"])
        if not honored["taskIds"]:
            del honored["taskIds"]
    if "resourceSubscriptions" in honored:  # only what the caller may read
        honored["resourceSubscriptions"] = await readable_subscriptions(ctx, honored["resourceSubscriptions"])
        if not honored["resourceSubscriptions"]:
            del honored["resourceSubscriptions"]
    access = ReadAccess(ctx)
    listener = Listener(
        server=ctx.server.key,
        subscription_id=ctx.request_id,
        honored=honored,
        entry=getattr(ctx.peer, "entry", None),
    )
    await table.add(listener)
    watched: list[str] = []
    try:
        for task_id in honored.get("taskIds") or ():  # its status changes, written by any worker
            await runner.watch(task_id)
            watched.append(task_id)
        await ctx.peer.notify(listener.tagged(ACKNOWLEDGED, {"notifications": honored}))
        while (message := await listener.queue.get()) is not None:
            if await access.deliverable(message):
                await ctx.peer.notify(message)
    finally:
        await table.discard(listener)
        for task_id in watched:
            with contextlib.suppress(Exception):  # a channel layer gone: its membership expires with it
                await runner.unwatch(task_id)
    return complete_result(ctx.request_id)


__getattr__ = moved_names(__name__, {"ListenerTable": "mcp_server.runtime.listeners"})
"""``ListenerTable`` moved to :mod:`mcp_server.runtime.listeners` (the per-process tables); it is still given
here, with a warning."""
