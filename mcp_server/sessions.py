"""Sessions kept in the database so that every worker process, and a restarted one, sees them."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.utils import timezone

from .conf import mcp_settings
from .models import Session
from .protocol.context import SessionState
from .protocol.inflight import inflight

__all__ = [
    "acreate_session",
    "aend_session",
    "aget_active_session",
    "aset_log_level",
    "asubscribe",
    "new_session_id",
    "state_of",
]

TOUCH_EVERY = timedelta(seconds=30)
"""``last_seen`` is written at most this often per session, not on every request."""


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


async def aget_active_session(session_id: str, server: str) -> Session | None:
    """The live session with that id, or ``None`` if unknown, ended or idle past the timeout."""
    session = await Session.objects.filter(pk=session_id, server=server, ended_at__isnull=True).afirst()
    if session is None:
        return None
    now = timezone.now()
    idle = mcp_settings.SESSION_IDLE_TIMEOUT
    if idle and now - session.last_seen > timedelta(seconds=float(idle)):
        await aend_session(session.id, "session expired")
        return None
    if now - session.last_seen > TOUCH_EVERY:
        await Session.objects.filter(pk=session.id).aupdate(last_seen=now)
    return session


async def aend_session(session_id: str, reason: str) -> bool:
    """End a session: later requests get 404, in-flight ones are answered -32000 with ``reason``."""
    ended = await Session.objects.filter(pk=session_id, ended_at__isnull=True).aupdate(
        ended_at=timezone.now(), end_reason=reason[:200]
    )
    await inflight.close_session(session_id, reason)
    from .transports.signals import asession_ended

    await asession_ended(session_id, reason)
    return bool(ended)


async def aset_log_level(state: SessionState, level: str) -> None:
    """Remember the client's ``logging/setLevel`` for the session."""
    state.log_level = level
    if state.id is not None:
        await Session.objects.filter(pk=state.id).aupdate(log_level=level)


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
