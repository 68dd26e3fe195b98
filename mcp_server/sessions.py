"""Sessions: stored in the database so that every worker process, and a restarted one, sees them; read through
an in-process cache so that a request does not wait on the database.

The cache keeps a session for ``SESSION_CACHE_TTL`` seconds. A session's end (DELETE, idle expiry, an
operator's action) is broadcast to every worker, which drops its copy at once; if that message were lost, an
ended session is still refused everywhere within ``SESSION_CACHE_TTL`` seconds.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from .conf import mcp_settings
from .core.context import SessionState
from .core.stores import StoreUnavailable, bounded
from .models import Session
from .wire.messages import WORKERS_GROUP, EndSession, SessionChanged, to_event

__all__ = [
    "LAST_SEEN_EVERY",
    "CachedSession",
    "SessionCache",
    "acreate_session",
    "aend_session",
    "aset_log_level",
    "asubscribe",
    "new_session_id",
    "state_of",
]

LAST_SEEN_EVERY = timedelta(seconds=30)
"""``last_seen`` is written at most this often per session, not on every request."""

logger = logging.getLogger("mcp_server.sessions")

CACHE_LIMIT = 10_000
"""At most this many sessions are cached per process (least recently used dropped first)."""


def new_session_id() -> str:
    """An unguessable id of visible ASCII (256 random bits)."""
    return secrets.token_urlsafe(32)


def state_of(session: Session) -> SessionState:
    """The in-request view of a session row."""
    return SessionState(
        id=session.id,
        protocol_version=session.protocol_version,
        client_capabilities=session.client_capabilities or {},
        client_info=session.client_info or {},
        log_level=session.log_level or None,
    )


async def acreate_session(
    *, server: str, protocol_version: str, params: dict[str, Any], user: Any = None, transport: str = "http"
) -> Session:
    """Store a new session for an ``initialize`` request."""
    info = params.get("clientInfo") or {}
    now = timezone.now()
    return await Session.objects.acreate(
        id=new_session_id(),
        server=server,
        protocol_version=protocol_version,
        client_name=str(info.get("name", ""))[:200],
        client_version=str(info.get("version", ""))[:100],
        client_info=info,
        client_capabilities=params.get("capabilities") or {},
        transport=transport,
        user=user if getattr(user, "is_authenticated", False) else None,
        last_seen=now,
    )


async def _broadcast(message: EndSession | SessionChanged) -> None:
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is not None:
        await layer.group_send(WORKERS_GROUP, to_event(message))


async def aend_session(session_id: str, reason: str) -> bool:
    """End a session: later requests get 404; every worker answers its in-flight requests -32000 with
    ``reason`` and closes its streams (see :class:`~mcp_server.wire.messages.EndSession`).
    Returns whether the session was still active.
    """
    ended = await Session.objects.filter(pk=session_id, ended_at__isnull=True).aupdate(
        ended_at=timezone.now(), end_reason=reason[:200]
    )
    await _broadcast(EndSession(session_id=session_id, reason=reason))
    return bool(ended)


async def aset_log_level(state: SessionState, level: str) -> None:
    """Remember the client's ``logging/setLevel`` for the session (every worker drops its cached copy)."""
    state.log_level = level
    if state.id is not None:
        await Session.objects.filter(pk=state.id).aupdate(log_level=level)
        await _broadcast(SessionChanged(session_id=state.id))


async def asubscribe(state: SessionState, uri: str, *, subscribed: bool) -> None:
    """Add or remove ``uri`` from the session's resource subscriptions."""
    if state.id is None:
        return
    session = await Session.objects.aget(pk=state.id)
    uris = [u for u in session.subscriptions if u != uri]
    if subscribed:
        uris.append(uri)
    session.subscriptions = uris
    await session.asave(update_fields=["subscriptions"])


@dataclass
class CachedSession:
    """A live session as this process last read it."""

    state: SessionState
    server: str
    user_id: int | None
    last_seen: datetime
    touched: datetime
    fetched: float


class SessionCache:
    """This process's copies of live sessions, read from the database on a miss or after ``ttl`` seconds."""

    def __init__(self, ttl: float, limit: int = CACHE_LIMIT) -> None:
        self.ttl = ttl
        self.limit = limit
        self._entries: OrderedDict[str, CachedSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def forget(self, session_id: str) -> None:
        """Drop the copy of a session (it ended or changed)."""
        self._entries.pop(session_id, None)

    def remember(self, session: Session) -> CachedSession:
        """Cache a session just read or created."""
        cached = CachedSession(
            state=state_of(session),
            server=session.server,
            user_id=session.user_id,
            last_seen=session.last_seen,
            touched=session.last_seen,
            fetched=time.monotonic(),
        )
        self._entries[session.id] = cached
        self._entries.move_to_end(session.id)
        while len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return cached

    async def aget_active(self, session_id: str, server: str) -> CachedSession | None:
        """The live session with that id served by ``server``, or ``None`` if unknown, ended or idle too long
        (an idle one is ended here)."""
        now = timezone.now()
        idle = mcp_settings.SESSION_IDLE_TIMEOUT
        cached = self._entries.get(session_id)
        if (
            cached is not None
            and time.monotonic() - cached.fetched < self.ttl
            and not (idle and now - cached.last_seen > timedelta(seconds=float(idle)))
        ):
            if cached.server != server:
                return None
            await self._touch(session_id, cached, now)
            return cached
        lookup = Session.objects.filter(pk=session_id, server=server, ended_at__isnull=True).afirst()
        session = await bounded(lookup, "database")  # StoreUnavailable: the transport answers 503
        if session is None:
            self.forget(session_id)
            return None
        if idle and now - session.last_seen > timedelta(seconds=float(idle)):
            self.forget(session_id)
            try:
                await bounded(aend_session(session.id, "session expired"), "session store")
            except StoreUnavailable as exc:  # expired all the same; pruning ends it later
                logger.warning("could not end the expired session %s: %s", session_id, exc.message)
            return None
        cached = self.remember(session)
        await self._touch(session_id, cached, now)
        return cached

    async def _touch(self, session_id: str, cached: CachedSession, now: datetime) -> None:
        """Keep ``last_seen`` current: in memory always, in the database at most every ``LAST_SEEN_EVERY``
        (one write per session and interval: the only database write a request may wait for)."""
        cached.last_seen = now
        if now - cached.touched > LAST_SEEN_EVERY:
            cached.touched = now
            try:
                await bounded(Session.objects.filter(pk=session_id).aupdate(last_seen=now), "database")
            except StoreUnavailable as exc:  # served all the same; tried again after LAST_SEEN_EVERY
                logger.warning("could not record the activity of session %s: %s", session_id, exc.message)
            except Exception:  # the session is served all the same; the next request tries again
                logger.exception("could not record the activity of session %s", session_id)
                cached.touched = cached.last_seen - LAST_SEEN_EVERY
