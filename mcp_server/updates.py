"""Server-initiated notifications: a resource changed, or a list of tools, resources or prompts changed.

Handshake-era sessions get them on their standalone GET stream (whichever worker holds it, through the
channel layer). A session without an open GET stream does not get them; the protocol has no queue for that.
At 2026-07-28 they go only to the ``subscriptions/listen`` streams that asked for them (published once on
the channel layer; each worker holding a listen stream filters it per stream).

Call :func:`notify_resource_updated` (or ``await anotify_resource_updated``) after changing what a
resource returns; only sessions that subscribed to that URI with ``resources/subscribe`` are told.
Registering or removing a tool, resource or prompt at run time tells every live session of that
server by itself (see :func:`watch_registry`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync

from .models import Session
from .registry.server import MCPServer, mcp
from .runtime import get_runtime
from .transports.signals import apublish_to_listeners, asend_to_session
from .wire.jsonrpc import notification
from .wire.messages import ListenEvent

__all__ = [
    "LIST_CHANGED_FEATURES",
    "anotify_list_changed",
    "anotify_resource_updated",
    "notify_list_changed",
    "notify_resource_updated",
    "watch_registry",
]

logger = logging.getLogger("mcp_server.updates")

LIST_CHANGED_FEATURES = frozenset({"tools", "resources", "prompts"})


def _live_sessions(server: MCPServer) -> Any:
    return Session.objects.filter(server=server.key, ended_at__isnull=True)


async def _publish(event: ListenEvent) -> None:
    """Tell the listen streams of every worker (without a channel layer, those of this process)."""
    try:
        if not await apublish_to_listeners(event):
            get_runtime().listeners.deliver(event)
    except Exception:  # the sessions are told all the same
        logger.exception("could not tell the listen streams: %s", event.method)


async def anotify_resource_updated(uri: str, server: MCPServer = mcp) -> int:
    """Send ``notifications/resources/updated`` for ``uri`` to its subscribers (handshake-era sessions
    subscribed with ``resources/subscribe``; listen streams whose ``resourceSubscriptions`` cover it);
    returns how many sessions were told."""
    message = notification("notifications/resources/updated", {"uri": uri})
    await _publish(ListenEvent(server.key, "notifications/resources/updated", {"uri": uri}))
    sent = 0
    async for session_id, subscriptions in _live_sessions(server).values_list("id", "subscriptions"):
        if isinstance(subscriptions, list) and uri in subscriptions:
            await asend_to_session(session_id, message)
            sent += 1
    return sent


def notify_resource_updated(uri: str, server: MCPServer = mcp) -> int:
    """Synchronous :func:`anotify_resource_updated`, for views, signals and management commands."""
    return int(async_to_sync(anotify_resource_updated)(uri, server))


async def anotify_list_changed(feature: str, server: MCPServer = mcp) -> int:
    """Send ``notifications/<feature>/list_changed`` to every live session and to the listen streams that
    asked for it; returns how many sessions were told."""
    if feature not in LIST_CHANGED_FEATURES:
        raise ValueError(f"unknown feature {feature!r}; expected one of {sorted(LIST_CHANGED_FEATURES)}")
    message = notification(f"notifications/{feature}/list_changed")
    await _publish(ListenEvent(server.key, message["method"]))
    sent = 0
    async for session_id in _live_sessions(server).values_list("id", flat=True):
        await asend_to_session(session_id, message)
        sent += 1
    return sent


def notify_list_changed(feature: str, server: MCPServer = mcp) -> int:
    """Synchronous :func:`anotify_list_changed`."""
    return int(async_to_sync(anotify_list_changed)(feature, server))


def watch_registry(server: MCPServer) -> None:
    """Send ``list_changed`` whenever ``server`` gains or loses a tool, resource or prompt at run time.

    From inside an event loop the notification is sent in a background task; from plain synchronous
    code it is sent before the call returns. Changes made before the app registry is ready (imports of
    ``mcp.py`` modules) are ignored: no session can exist yet. Watching a server twice is a no-op.
    """
    if server.watched:
        return
    server.watched = True
    pending = server.notifying  # strong references while the notifications go out

    def listener(feature: str) -> None:
        from django.apps import apps

        if not apps.ready or feature not in LIST_CHANGED_FEATURES:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            try:
                notify_list_changed(feature, server)
            except Exception:
                logger.exception("could not send %s list_changed", feature)
            return
        task = loop.create_task(anotify_list_changed(feature, server))
        pending.add(task)
        task.add_done_callback(pending.discard)

    server.on_change(listener)
