"""Sessions: stored in the database so that every worker process, and a restarted one, sees them; read through
an in-process cache so that a request does not wait on the database.

The cache keeps a session for ``SESSION_CACHE_TTL`` seconds. A session's end (DELETE, idle expiry, an
operator's action) is broadcast to every worker, which drops its copy at once; if that message were lost, an
ended session is still refused everywhere within ``SESSION_CACHE_TTL`` seconds.

State stays bounded (I12): what a client stores is capped (``MAX_CLIENT_METADATA_BYTES``), idle sessions are
ended and ended ones deleted in batches by every worker's upkeep and ``mcp_prune``
(:func:`aexpire_idle_sessions`, :func:`aprune_ended_sessions`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db.models import Q
from django.utils import timezone

from .conf import mcp_settings
from .conf import now as clock_now
from .core.context import SessionState
from .core.records import storable, storable_json
from .core.stores import StoreUnavailable, bounded
from .models import Session
from .session_rows import insert_session
from .wire.errors import INVALID_PARAMS, JSONRPCError
from .wire.messages import WORKERS_GROUP, EndSession, SessionChanged, to_event

__all__ = [
    "EXPIRED_REASON",
    "LAST_SEEN_EVERY",
    "SWEEP_BATCH",
    "CachedSession",
    "SessionCache",
    "acount_open_sessions",
    "acreate_session",
    "aend_session",
    "aexpire_idle_sessions",
    "aprune_ended_sessions",
    "aset_log_level",
    "asubscribe",
    "check_client_metadata",
    "json_size",
    "new_session_id",
    "refuse_large_metadata",
    "state_of",
    "touch_every",
]

LAST_SEEN_EVERY = timedelta(seconds=30)
"""``last_seen`` is written at most this often per session, not on every request (see :func:`touch_every`)."""


def touch_every() -> timedelta:
    """How often a session in use has its ``last_seen`` written: ``LAST_SEEN_EVERY``, or a third of a
    shorter ``SESSION_IDLE_TIMEOUT``. The stored value lags by at most this much, which is the slack the
    idle sweep allows (a session in use is never swept, however short the timeout)."""
    idle = mcp_settings.SESSION_IDLE_TIMEOUT
    if not idle:
        return LAST_SEEN_EVERY
    return min(LAST_SEEN_EVERY, timedelta(seconds=float(idle) / 3))


logger = logging.getLogger("mcp_server.sessions")

CACHE_LIMIT = 10_000
"""At most this many sessions are cached per process (least recently used dropped first)."""

EXPIRED_REASON = "session expired"
"""The ``<why>`` of a session ended for idleness (its in-flight requests answer -32000 with it)."""

SWEEP_BATCH = 500
"""Sessions expired or pruned per statement: one sweep never holds a long lock."""


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


def json_size(value: Any) -> int:
    """The bytes ``value`` takes as compact JSON (UTF-8): the measure of what a client stores."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def refuse_large_metadata(client_info: Any, capabilities: Any, *, what: str, names: str, verb: str) -> None:
    """Refuse (-32602, with ``size`` and ``limit`` as data) client metadata (``clientInfo`` and the
    capabilities) that takes more than ``MAX_CLIENT_METADATA_BYTES`` as JSON. ``what``, ``names`` and
    ``verb`` word the message: ``Invalid params{what}: {names} take N bytes as JSON; this server {verb} at
    most L``."""
    limit = int(mcp_settings.MAX_CLIENT_METADATA_BYTES)
    size = json_size([client_info or {}, capabilities or {}])
    if size > limit:
        raise JSONRPCError(
            INVALID_PARAMS,
            f"Invalid params{what}: {names} take {size} bytes as JSON; "
            f"this server {verb} at most {limit} (MAX_CLIENT_METADATA_BYTES)",
            {"size": size, "limit": limit},
        )


def check_client_metadata(params: dict[str, Any]) -> None:
    """Refuse (-32602) an ``initialize`` whose ``clientInfo`` and ``capabilities`` together take more than
    ``MAX_CLIENT_METADATA_BYTES`` as JSON: they are stored with the session, so their size is bounded."""
    refuse_large_metadata(
        params.get("clientInfo"),
        params.get("capabilities"),
        what=" for initialize",
        names="clientInfo and capabilities",
        verb="stores",
    )


async def acount_open_sessions(*, user: Any, address: str) -> int:
    """Open sessions of ``user`` (authenticated), else of anonymous callers from ``address``; sessions idle
    past ``SESSION_IDLE_TIMEOUT`` (which no request can use any more) are not counted."""
    rows = Session.objects.filter(ended_at__isnull=True)
    idle = mcp_settings.SESSION_IDLE_TIMEOUT
    if idle:
        rows = rows.filter(last_seen__gte=timezone.now() - timedelta(seconds=float(idle)) - touch_every())
    if getattr(user, "is_authenticated", False):
        rows = rows.filter(user_id=user.pk)
    else:
        rows = rows.filter(user__isnull=True, client_address=address[:100])
    return int(await rows.acount())


async def acreate_session(
    *,
    server: str,
    protocol_version: str,
    params: dict[str, Any],
    user: Any = None,
    transport: str = "http",
    client_address: str = "",
) -> Session:
    """Store a new session for an ``initialize`` request.

    Raises ``JSONRPCError`` (-32602) when ``clientInfo`` and ``capabilities`` exceed
    ``MAX_CLIENT_METADATA_BYTES`` (see :func:`check_client_metadata`).
    """
    check_client_metadata(params)
    info = params.get("clientInfo") or {}
    now = timezone.now()
    session = Session(
        id=new_session_id(),
        server=server,
        protocol_version=protocol_version,
        client_name=storable(str(info.get("name", "")), 200),
        client_version=storable(str(info.get("version", "")), 100),
        client_info=storable_json(info),
        client_capabilities=storable_json(params.get("capabilities") or {}),
        transport=transport,
        user=user if getattr(user, "is_authenticated", False) else None,
        last_seen=now,
        client_address=client_address[:100],
    )
    await sync_to_async(insert_session)(session)
    return session


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
    """Add or remove ``uri`` from the session's resource subscriptions (-32602 past
    ``MAX_CLIENT_METADATA_BYTES``)."""
    if state.id is None:
        return
    session = await Session.objects.aget(pk=state.id)
    uris = [u for u in session.subscriptions if u != uri]
    if subscribed:
        uris.append(uri)
        limit = int(mcp_settings.MAX_CLIENT_METADATA_BYTES)
        if json_size(uris) > limit:
            raise JSONRPCError(
                INVALID_PARAMS,
                f"Too many resource subscriptions: together they would exceed {limit} bytes "
                "(MAX_CLIENT_METADATA_BYTES); unsubscribe from some first",
                {"limit": limit},
            )
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
        now = clock_now()
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
                await bounded(aend_session(session.id, EXPIRED_REASON), "session store")
            except StoreUnavailable as exc:  # expired all the same; pruning ends it later
                logger.warning("could not end the expired session %s: %s", session_id, exc.message)
            return None
        cached = self.remember(session)
        await self._touch(session_id, cached, now)
        return cached

    async def _touch(self, session_id: str, cached: CachedSession, now: datetime) -> None:
        """Keep ``last_seen`` current: in memory always, in the database at most every :func:`touch_every`
        (one write per session and interval: the only database write a request may wait for)."""
        cached.last_seen = now
        if now - cached.touched > touch_every():
            cached.touched = now
            try:
                await bounded(Session.objects.filter(pk=session_id).aupdate(last_seen=now), "database")
            except StoreUnavailable as exc:  # served all the same; tried again after LAST_SEEN_EVERY
                logger.warning("could not record the activity of session %s: %s", session_id, exc.message)
            except Exception:  # the session is served all the same; the next request tries again
                logger.exception("could not record the activity of session %s", session_id)
                cached.touched = cached.last_seen - LAST_SEEN_EVERY


# -- bounded state: idle expiry and pruning in batches (every worker's upkeep, and ``mcp_prune``) ----------


async def aexpire_idle_sessions(idle_before: datetime, *, max_batches: int | None = None) -> int:
    """End the open HTTP sessions last seen before ``idle_before``, as a request would find them expired:
    ``"session expired"``, broadcast so that their in-flight requests answer -32000 and their streams close.

    At most ``SWEEP_BATCH`` per statement and ``max_batches`` statements (``None``: until none is left).
    stdio sessions are left alone: they end with their process, however quiet their client is.
    """
    ended_count = 0
    batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        idle = Session.objects.filter(
            ended_at__isnull=True, transport=Session.Transport.HTTP, last_seen__lt=idle_before
        )
        ids = [pk async for pk in idle.order_by("last_seen").values_list("pk", flat=True)[:SWEEP_BATCH]]
        if not ids:
            break
        now = timezone.now()
        await idle.filter(pk__in=ids).aupdate(ended_at=now, end_reason=EXPIRED_REASON)
        # Only those this call ended (not one a request touched, or another worker ended, meanwhile).
        ended = Session.objects.filter(pk__in=ids, ended_at=now, end_reason=EXPIRED_REASON)
        for session_id in [pk async for pk in ended.values_list("pk", flat=True)]:
            ended_count += 1
            try:
                await _broadcast(EndSession(session_id=session_id, reason=EXPIRED_REASON))
            except Exception:  # its requests end at their deadline; workers' copies within SESSION_CACHE_TTL
                logger.exception("could not announce the expiry of session %s", session_id)
        if len(ids) < SWEEP_BATCH:
            break
        await asyncio.sleep(0)
    return ended_count


Busy = Callable[[list[str]], Awaitable[Collection[str]]]
"""Given session ids, those that still have pending requests (the ledger knows)."""


async def aprune_ended_sessions(ended_before: datetime, busy: Busy, *, max_batches: int | None = None) -> int:
    """Delete the sessions that ended before ``ended_before`` and have no pending request (``busy``), with
    their settled ledger rows; returns how many sessions. A session with a pending request is kept until
    that request is settled (by its worker, or as an orphan once the worker's lease runs out).

    At most ``SWEEP_BATCH`` per statement and ``max_batches`` batches (``None``: until none is left).
    """
    pruned = 0
    batches = 0
    after: tuple[datetime | None, str] | None = None
    while max_batches is None or batches < max_batches:
        batches += 1
        ended = Session.objects.filter(ended_at__lt=ended_before)
        if after is not None:
            ended = ended.filter(Q(ended_at__gt=after[0]) | Q(ended_at=after[0], pk__gt=after[1]))
        page: list[tuple[datetime | None, str]] = [
            row async for row in ended.order_by("ended_at", "pk").values_list("ended_at", "pk")[:SWEEP_BATCH]
        ]
        if not page:
            break
        after = page[-1]
        ids = [pk for _ended_at, pk in page]
        keep = set(await busy(ids))
        doomed = [pk for pk in ids if pk not in keep]
        if doomed:
            # Only the key is read (the collector needs no JSON column); the ledger rows go in one statement.
            _total, by_model = await Session.objects.filter(pk__in=doomed).only("pk").adelete()
            pruned += by_model.get(Session._meta.label, 0)
        if len(page) < SWEEP_BATCH:
            break
        await asyncio.sleep(0)
    return pruned
