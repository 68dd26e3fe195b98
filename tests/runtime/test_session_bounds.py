"""I12, state is bounded: idle sessions expire and ended ones are pruned (in batches, never while a request
of theirs is pending), what a client stores in its session is capped, and one client cannot hold more
than ``MAX_SESSIONS_PER_CLIENT`` open sessions.

The sweeps run here as ``mcp_prune`` runs them (``async_to_sync`` in the test's thread, so that the test's
database connection sees their statements). Real servers (a worker's background upkeep, the 429, the
-32602 over HTTP, the official client) are in ``tests/end_to_end/test_bounded_sessions.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.ledger import get_ledger
from mcp_server.models import LedgerEntry, Session
from mcp_server.runtime.upkeep import Holding, Upkeep
from mcp_server.sessions import (
    EXPIRED_REASON,
    LAST_SEEN_EVERY,
    SWEEP_BATCH,
    acount_open_sessions,
    acreate_session,
    aexpire_idle_sessions,
    asubscribe,
    check_client_metadata,
    state_of,
    touch_every,
)
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.wire.errors import INVALID_PARAMS, JSONRPCError
from mcp_server.wire.messages import WORKERS_GROUP, EndSession, parse_event
from tests.support.raw import CLIENT_INFO

IDLE = 3600.0
HOUR = timedelta(hours=1)


@pytest.fixture
def bounds(settings: Any) -> Any:
    settings.MCP_SERVER = {
        **settings.MCP_SERVER,
        "SESSION_IDLE_TIMEOUT": IDLE,
        "SESSION_RETENTION": 3600.0,
        "MAX_CLIENT_METADATA_BYTES": 1024,
    }
    return settings


def make(
    session_id: str, *, seen: timedelta = timedelta(0), ended: timedelta | None = None, **extra: Any
) -> Session:
    now = timezone.now()
    return Session.objects.create(
        id=session_id,
        protocol_version="2025-11-25",
        last_seen=now - seen,
        ended_at=None if ended is None else now - ended,
        **extra,
    )


def entry(session_id: str, request_id: int, state: str = "answered") -> LedgerEntry:
    return LedgerEntry.objects.create(
        session_id=session_id,
        request_key=request_key(request_id),
        method="tools/call",
        worker="elsewhere",
        created=timezone.now(),
        state=state,
        settled_at=None if state == "pending" else timezone.now(),
    )


def sweep(
    retention: float | None = None, max_batches: int | None = None, ledger: Any = None
) -> dict[str, int]:
    upkeep = Upkeep(ledger if ledger is not None else get_ledger(), "test-sweeper")
    return async_to_sync(upkeep.sweep_sessions)(timezone.now(), retention=retention, max_batches=max_batches)


def listening(run: Callable[[], Awaitable[Any]]) -> tuple[Any, list[EndSession]]:
    """Run ``run`` with a channel of the workers' group listening; returns its result and the session ends
    broadcast meanwhile."""

    async def scenario() -> tuple[Any, list[EndSession]]:
        layer = get_channel_layer()
        assert layer is not None
        channel = await layer.new_channel()
        await layer.group_add(WORKERS_GROUP, channel)
        try:
            result = await run()
            ends: list[EndSession] = []
            while True:
                try:
                    event = await asyncio.wait_for(layer.receive(channel), 0.2)
                except TimeoutError:
                    return result, ends
                message = parse_event(event)
                if isinstance(message, EndSession):
                    ends.append(message)
        finally:
            await layer.group_discard(WORKERS_GROUP, channel)

    return async_to_sync(scenario)()


# -- idle expiry --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_idle_http_sessions_are_ended_and_announced(bounds: Any) -> None:
    make("idle", seen=timedelta(seconds=IDLE) + LAST_SEEN_EVERY + timedelta(seconds=5))
    make("recent", seen=timedelta(seconds=10))
    # ``last_seen`` is written at most every LAST_SEEN_EVERY: a session idle for less than that slack past the
    # timeout may have been used since, and is kept.
    make("within-slack", seen=timedelta(seconds=IDLE) + LAST_SEEN_EVERY / 2)
    make("stdio", seen=10 * HOUR, transport=Session.Transport.STDIO)  # ends with its process, not by idleness
    make("ended", seen=10 * HOUR, ended=timedelta(minutes=10))
    counts, ends = listening(lambda: Upkeep(get_ledger(), "w").sweep_sessions(timezone.now()))
    assert counts == {"sessions_expired": 1, "sessions_pruned": 0}
    assert ends == [EndSession(session_id="idle", reason=EXPIRED_REASON)]  # its requests answer -32000
    rows = {s.pk: (s.ended_at is not None, s.end_reason) for s in Session.objects.all()}
    assert rows == {
        "idle": (True, EXPIRED_REASON),
        "recent": (False, ""),
        "within-slack": (False, ""),
        "stdio": (False, ""),
        "ended": (True, ""),
    }


@pytest.mark.parametrize(("idle", "every"), [(3600.0, 30.0), (90.0, 30.0), (6.0, 2.0), (None, 30.0)])
def test_a_short_idle_timeout_has_last_seen_written_more_often(
    bounds: Any, idle: float | None, every: float
) -> None:
    bounds.MCP_SERVER = {**bounds.MCP_SERVER, "SESSION_IDLE_TIMEOUT": idle}
    assert touch_every() == timedelta(seconds=every)


@pytest.mark.django_db
def test_a_short_idle_timeout_is_swept_with_a_short_slack(bounds: Any) -> None:
    """A 6 s timeout: ``last_seen`` lags by at most 2 s, so 8 s of silence is idle, 7 s is not yet."""
    bounds.MCP_SERVER = {**bounds.MCP_SERVER, "SESSION_IDLE_TIMEOUT": 6.0}
    make("silent", seen=timedelta(seconds=8.5))
    make("maybe-in-use", seen=timedelta(seconds=7))
    assert sweep()["sessions_expired"] == 1
    assert set(Session.objects.filter(ended_at__isnull=True).values_list("pk", flat=True)) == {"maybe-in-use"}


@pytest.mark.django_db
def test_without_an_idle_timeout_nothing_expires(bounds: Any) -> None:
    bounds.MCP_SERVER = {**bounds.MCP_SERVER, "SESSION_IDLE_TIMEOUT": None}
    make("ancient", seen=1000 * HOUR)
    assert sweep() == {"sessions_expired": 0, "sessions_pruned": 0}
    assert Session.objects.get(pk="ancient").ended_at is None


@pytest.mark.django_db
def test_expiry_goes_in_batches(bounds: Any) -> None:
    now = timezone.now()
    count = 2 * SWEEP_BATCH + 7
    Session.objects.bulk_create(
        Session(id=f"idle-{n:04d}", protocol_version="2025-11-25", last_seen=now - 3 * HOUR)
        for n in range(count)
    )
    idle_before = now - 2 * HOUR
    assert async_to_sync(aexpire_idle_sessions)(idle_before, max_batches=1) == SWEEP_BATCH
    assert Session.objects.filter(ended_at__isnull=True).count() == count - SWEEP_BATCH
    with CaptureQueriesContext(connection) as queries:
        assert async_to_sync(aexpire_idle_sessions)(idle_before) == count - SWEEP_BATCH
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 2  # one statement per batch of at most SWEEP_BATCH sessions
    assert not Session.objects.filter(ended_at__isnull=True).exists()


# -- pruning ----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_ended_sessions_are_pruned_after_the_retention_with_their_settled_rows(bounds: Any) -> None:
    make("old", ended=2 * HOUR)
    entry("old", 1)
    entry("old", 2, "cancelled")
    make("young", ended=timedelta(minutes=10))
    entry("young", 1)
    make("open", seen=timedelta(seconds=5))
    assert sweep() == {"sessions_expired": 0, "sessions_pruned": 1}
    assert set(Session.objects.values_list("pk", flat=True)) == {"young", "open"}
    assert set(LedgerEntry.objects.values_list("session_id", flat=True)) == {"young"}
    assert sweep(retention=0) == {"sessions_expired": 0, "sessions_pruned": 1}  # mcp_prune's option
    assert set(Session.objects.values_list("pk", flat=True)) == {"open"}


@pytest.mark.django_db
def test_a_session_with_a_pending_request_is_kept_until_the_request_is_settled(bounds: Any) -> None:
    """Deleting it would delete its pending ledger row, a request nobody would ever record as answered."""
    make("busy", ended=2 * HOUR)
    pending = entry("busy", 1, "pending")
    entry("busy", 2)
    assert sweep() == {"sessions_expired": 0, "sessions_pruned": 0}
    assert Session.objects.filter(pk="busy").exists()
    assert LedgerEntry.objects.get(pk=pending.pk).state == "pending"
    LedgerEntry.objects.filter(pk=pending.pk).update(state="closed", settled_at=timezone.now())
    assert sweep() == {"sessions_expired": 0, "sessions_pruned": 1}
    assert not LedgerEntry.objects.filter(session_id="busy").exists()


@pytest.mark.django_db
def test_a_session_whose_last_record_is_not_written_yet_is_kept(bounds: Any) -> None:
    """The ledger is written behind the requests: a session ended (its request answered -32000 in memory)
    whose record the worker has not written yet is not pruned, or that row would land after the session
    and its rows were deleted."""
    make("writing", ended=2 * HOUR)
    make("done", ended=2 * HOUR)
    held = {"writing"}
    upkeep = Upkeep(get_ledger(), "test-sweeper", holding=lambda: Holding(sessions=set(held)))
    swept = async_to_sync(upkeep.sweep_sessions)(timezone.now())
    assert swept == {"sessions_expired": 0, "sessions_pruned": 1}
    assert set(Session.objects.values_list("pk", flat=True)) == {"writing"}
    held.clear()  # its record landed
    assert async_to_sync(upkeep.sweep_sessions)(timezone.now())["sessions_pruned"] == 1
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_pruning_walks_past_the_sessions_it_must_keep(bounds: Any) -> None:
    """A full batch of kept sessions does not stall the sweep: it goes on to the next ones."""
    now = timezone.now()
    busy = [
        Session(id=f"busy-{n:04d}", protocol_version="2025-11-25", last_seen=now, ended_at=now - 5 * HOUR)
        for n in range(SWEEP_BATCH + 3)
    ]
    Session.objects.bulk_create(busy)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(session_id=s.pk, request_key="i:1", method="tools/call", worker="w", created=now)
        for s in busy
    )
    make("done", ended=2 * HOUR)
    assert sweep(max_batches=1) == {"sessions_expired": 0, "sessions_pruned": 0}  # its one batch: all busy
    assert sweep() == {"sessions_expired": 0, "sessions_pruned": 1}
    assert not Session.objects.filter(pk="done").exists()
    assert Session.objects.count() == SWEEP_BATCH + 3


@pytest.mark.django_db
def test_pruning_reads_no_client_metadata(bounds: Any) -> None:
    """The rows go by key: a session's stored JSON, whatever its size, is never loaded to delete it."""
    make("heavy", ended=2 * HOUR, client_capabilities={"experimental": {"blob": "x" * 100_000}})
    entry("heavy", 1)
    with CaptureQueriesContext(connection) as queries:
        assert sweep()["sessions_pruned"] == 1
    reads = [q["sql"] for q in queries.captured_queries if "client_capabilities" in q["sql"]]
    assert reads == []


@pytest.mark.django_db
def test_the_cache_ledger_keeps_a_session_with_a_pending_record_too(bounds: Any) -> None:
    ledger = CacheLedger({"CACHE_ALIAS": "default", "RETENTION": 3600})
    make("cached", ended=2 * HOUR)
    record = LedgerRecord(session_id="cached", request_key="i:1", method="tools/call", worker="w")
    async_to_sync(ledger.aopen)(record)
    try:
        assert sweep(ledger=ledger)["sessions_pruned"] == 0
        assert async_to_sync(ledger.asettle)(record, "closed", None)
        assert sweep(ledger=ledger)["sessions_pruned"] == 1
    finally:
        async_to_sync(ledger.asettle)(record, "closed", None)


# -- client metadata ---------------------------------------------------------------------------------------


def params_of(size: int) -> dict[str, Any]:
    """``initialize`` params whose clientInfo and capabilities take exactly ``size`` bytes as JSON."""
    base = [CLIENT_INFO, {"experimental": {"pad": {"p": ""}}}]
    pad = size - len(json.dumps(base, separators=(",", ":")))
    return {"clientInfo": CLIENT_INFO, "capabilities": {"experimental": {"pad": {"p": "p" * pad}}}}


def test_client_metadata_up_to_the_limit_is_accepted(bounds: Any) -> None:
    check_client_metadata(params_of(1024))


def test_client_metadata_over_the_limit_is_refused_minus_32602(bounds: Any) -> None:
    with pytest.raises(JSONRPCError) as refused:
        check_client_metadata(params_of(1025))
    assert refused.value.code == INVALID_PARAMS
    assert "1025 bytes" in refused.value.message
    assert "MAX_CLIENT_METADATA_BYTES" in refused.value.message
    assert refused.value.data == {"size": 1025, "limit": 1024}


def test_non_ascii_metadata_is_measured_in_bytes(bounds: Any) -> None:
    with pytest.raises(JSONRPCError):
        check_client_metadata({"clientInfo": {"name": "é" * 600}, "capabilities": {}})  # 1,200 bytes


@pytest.mark.django_db
def test_nothing_is_stored_for_refused_metadata(bounds: Any) -> None:
    with pytest.raises(JSONRPCError):
        async_to_sync(acreate_session)(
            server="default", protocol_version="2025-11-25", params=params_of(5000)
        )
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_subscriptions_share_the_bound(bounds: Any) -> None:
    session = make("subscriber")
    state = state_of(session)
    uris = [f"test://resource/{n:04d}" for n in range(60)]  # 23 bytes each in the stored JSON list
    subscribe = async_to_sync(asubscribe)
    accepted = 0
    for uri in uris[:44]:  # 44 x 23 = 1,012 bytes: within the bound
        subscribe(state, uri, subscribed=True)
        accepted += 1
    with pytest.raises(JSONRPCError) as refused:
        subscribe(state, uris[44], subscribed=True)
    assert refused.value.code == INVALID_PARAMS
    assert "MAX_CLIENT_METADATA_BYTES" in refused.value.message
    stored = Session.objects.get(pk="subscriber").subscriptions
    assert stored == uris[:accepted]
    assert len(json.dumps(stored, separators=(",", ":"))) <= 1024
    subscribe(state, stored[0], subscribed=False)  # unsubscribing is always allowed
    subscribe(state, "test://one-more", subscribed=True)  # and makes room
    assert len(Session.objects.get(pk="subscriber").subscriptions) == accepted


# -- sessions per client ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_open_sessions_are_counted_per_user_or_per_address(bounds: Any, django_user_model: Any) -> None:
    alice = django_user_model.objects.create_user(username="alice")
    make("a1", user=alice, client_address="10.0.0.1")
    make("a2", user=alice, client_address="10.0.0.2")
    make("a-ended", user=alice, ended=timedelta(seconds=1))
    make("anon-1", client_address="10.0.0.1")
    make("anon-2", client_address="10.0.0.1")
    make("anon-idle", client_address="10.0.0.1", seen=timedelta(seconds=IDLE) + 2 * LAST_SEEN_EVERY)
    make("other", client_address="10.0.0.9")
    count = async_to_sync(acount_open_sessions)
    assert count(user=alice, address="10.0.0.9") == 2  # a user is a user wherever they call from
    assert count(user=AnonymousUser(), address="10.0.0.1") == 2  # not alice's, not ended, not expired
    assert count(user=None, address="10.0.0.9") == 1
    assert count(user=None, address="10.0.0.3") == 0
