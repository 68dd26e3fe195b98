"""What the live page shows: the pending requests now, and the last hour in one-minute buckets (how many
settled, and how many of those a rate limit refused).

One :class:`SnapshotSource` per process serves every open live page, so the database is asked at most
once a second for the pending requests and every few seconds for the hour's history, however many
operators watch. The pending list comes from the configured ledger (any backend); the history is read from
ledger rows, so it needs the database ledger (settled rows are kept for ``LEDGER_RETENTION``).
:func:`apending_now` is the one reading of the pending requests: ``/metrics`` (:mod:`mcp_server.metrics`)
reports the same figures.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Case, CharField, Count, F, Q, Value, When
from django.db.models.functions import TruncMinute
from django.utils import timezone

from ..ledger import Ledger, LedgerRecord, State, get_ledger
from ..models import LedgerEntry, Session
from ..stores.ledger.database import DatabaseLedger
from ..telemetry.links import trace_url
from .ui_tools import ui_kind

__all__ = [
    "HISTORY_MINUTES",
    "LATENCY_SAMPLE",
    "PENDING_LIMIT",
    "PendingNow",
    "SnapshotSource",
    "abuild_snapshot",
    "ahistory",
    "apending_now",
    "arecent",
    "percentile",
    "snapshots",
]

PENDING_LIMIT = 200
"""At most this many pending requests are listed (the count is always exact with the database ledger)."""

HISTORY_MINUTES = 60
"""The chart's span, in one-minute buckets (the current, partial minute is the last)."""

LATENCY_SAMPLE = 50_000
"""Latency percentiles are computed from at most this many of the hour's most recent settlements."""


def percentile(sorted_values: list[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of already sorted values (``None`` when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True)
class PendingNow:
    """The pending requests now, as the live page and ``/metrics`` both show them."""

    records: list[LedgerRecord]
    """The oldest ones (at most the limit asked for), as the ledger lists them: oldest first."""
    by_name: dict[tuple[str, str], int]
    """How many are pending, by method and tool (the tool of a ``tools/call``, else ``""``)."""
    oldest: datetime | None
    """When the oldest pending request arrived (``None``: none is pending)."""

    @property
    def total(self) -> int:
        """How many are pending."""
        return sum(self.by_name.values())


def _oldest(records: list[LedgerRecord]) -> datetime | None:
    times = [record.created for record in records if record.created is not None]
    return min(times) if times else None


def _tool(record: LedgerRecord) -> str:
    return record.name if record.method == "tools/call" else ""


async def apending_now(ledger: Ledger | None = None, *, limit: int = PENDING_LIMIT) -> PendingNow:
    """The pending requests of ``ledger`` (default: the configured one): the ``limit`` oldest, and the
    count of all by method and tool (one ``GROUP BY`` with the database ledger)."""
    ledger = ledger if ledger is not None else get_ledger()
    if isinstance(ledger, DatabaseLedger):
        records = await ledger.apending(limit=limit)
        tool = Case(When(method="tools/call", then=F("name")), default=Value(""), output_field=CharField())
        rows = LedgerEntry.objects.filter(state=State.PENDING).order_by().values("method", tool=tool)
        by_name = {(row["method"], row["tool"]): row["n"] async for row in rows.annotate(n=Count("id"))}
        return PendingNow(records, by_name, _oldest(records))  # oldest first: the first is the oldest
    records = await ledger.apending()
    by_name = dict(Counter((record.method, _tool(record)) for record in records))
    return PendingNow(records[:limit], by_name, _oldest(records))


async def _rows(records: list[LedgerRecord], now: datetime) -> list[dict[str, Any]]:
    session_ids = {r.session_id for r in records if r.session_id}
    user_ids = {r.user_id for r in records if r.user_id is not None}
    clients = {
        row["id"]: f"{row['client_name']} {row['client_version']}".strip()
        async for row in Session.objects.filter(pk__in=session_ids).values(
            "id", "client_name", "client_version"
        )
    }
    user_model = get_user_model()
    users = {
        user.pk: user.get_username() async for user in user_model._default_manager.filter(pk__in=user_ids)
    }
    rows = []
    for record in records:
        created = record.created or now
        rows.append(
            {
                "pk": record.pk,
                "id": json.dumps(record.request_id),
                "method": record.method,
                "name": record.name,
                "ui": ui_kind(record.method, record.name),
                "session": record.session_id or "",
                "client": record.client or clients.get(record.session_id or "", ""),
                "user": users.get(record.user_id, "") if record.user_id is not None else "",
                "oauth_client": record.oauth_client_name or record.oauth_client_id,
                "oauth_client_id": record.oauth_client_id,
                "worker": record.worker,
                "created": created.isoformat(),
                "age": round((now - created).total_seconds(), 1),
                "deadline": record.deadline.isoformat() if record.deadline else None,
                "remaining": round((record.deadline - now).total_seconds(), 1) if record.deadline else None,
                "trace_id": record.trace_id,
                "trace_url": trace_url(record.trace_id, record.span_id),
            }
        )
    return rows


def _by_minute(counts: list[Any], start: datetime, field: str = "n") -> list[int]:
    buckets = [0] * HISTORY_MINUTES
    for row in counts:
        if row["minute"] is None:
            continue
        index = int((row["minute"] - start).total_seconds() // 60)
        if 0 <= index < HISTORY_MINUTES:
            buckets[index] += int(row[field])
    return buckets


async def ahistory(now: datetime, pending_now: int) -> list[dict[str, Any]]:
    """The last hour by minute: pending at the minute's end, settled in it, and its latency percentiles.

    Pending at time *t* is derived from counts: ``pending_now + settled after t - created after t``, since
    every request created in the last hour is either still pending or was settled within it.
    """
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=HISTORY_MINUTES - 1)
    rows = LedgerEntry.objects.order_by()
    created = _by_minute(
        [
            row
            async for row in rows.filter(created__gte=start)
            .annotate(minute=TruncMinute("created"))
            .values("minute")
            .annotate(n=Count("id"))
        ],
        start,
    )
    settled_rows = rows.filter(settled_at__gte=start).exclude(state=State.PENDING)
    limited_filter = Q(state=State.RATE_LIMITED)
    settled_counts = [
        row
        async for row in settled_rows.annotate(minute=TruncMinute("settled_at"))
        .values("minute")
        .annotate(n=Count("id"), limited=Count("id", filter=limited_filter))
    ]
    settled = _by_minute(settled_counts, start)
    limited = _by_minute(settled_counts, start, "limited")
    latencies: list[list[float]] = [[] for _ in range(HISTORY_MINUTES)]
    sample = settled_rows.order_by("-settled_at").values_list("created", "settled_at")[:LATENCY_SAMPLE]
    async for began, ended in sample:
        if ended is None:
            continue
        index = int((ended - start).total_seconds() // 60)
        if 0 <= index < HISTORY_MINUTES:
            latencies[index].append((ended - began).total_seconds() * 1000)
    minutes: list[dict[str, Any]] = []
    created_after = settled_after = 0
    for index in reversed(range(HISTORY_MINUTES)):
        values = sorted(latencies[index])
        minutes.append(
            {
                "t": (start + timedelta(minutes=index)).isoformat(),
                "pending": max(0, pending_now + settled_after - created_after),
                "throughput": settled[index],
                "rate_limited": limited[index],
                "p50": percentile(values, 50),
                "p95": percentile(values, 95),
                "p99": percentile(values, 99),
            }
        )
        created_after += created[index]
        settled_after += settled[index]
    minutes.reverse()
    return minutes


async def arecent(now: datetime, seconds: float = 60.0) -> dict[str, Any]:
    """Requests settled in the last ``seconds``: how many, how many of them a rate limit refused, and their
    latency percentiles (milliseconds)."""
    rows = LedgerEntry.objects.filter(settled_at__gte=now - timedelta(seconds=seconds)).exclude(
        state=State.PENDING
    )
    sample = rows.order_by("-settled_at").values_list("created", "settled_at")[:LATENCY_SAMPLE]
    values = sorted([(ended - began).total_seconds() * 1000 async for began, ended in sample if ended])
    settled = len(values) if len(values) < LATENCY_SAMPLE else await rows.acount()
    return {
        "seconds": seconds,
        "settled": settled,
        "rate_limited": await rows.filter(state=State.RATE_LIMITED).acount(),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


async def abuild_snapshot(history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One message for the live page; pass ``history`` to reuse a recent one instead of querying it."""
    ledger = get_ledger()
    now = timezone.now()
    pending = await apending_now(ledger)
    records, total = pending.records, pending.total
    with_history = isinstance(ledger, DatabaseLedger)
    if history is None:
        history = await ahistory(now, total) if with_history else []
    elif history:
        history[-1] = {**history[-1], "pending": total}
    return {
        "type": "snapshot",
        "now": now.isoformat(),
        "pending_total": total,
        "pending_limit": PENDING_LIMIT,
        "pending": await _rows(records, now),
        "history": history,
        "history_available": with_history,
        "recent": await arecent(now) if with_history else None,
    }


class SnapshotSource:
    """The latest snapshot, shared by every live page of this process and rebuilt when it is stale."""

    def __init__(self, fresh_for: float = 1.0, history_fresh_for: float = 5.0) -> None:
        self.fresh_for = fresh_for
        self.history_fresh_for = history_fresh_for
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._snapshot: dict[str, Any] | None = None
        self._built = 0.0
        self._history_built = 0.0

    def reset(self) -> None:
        """Forget the cached snapshot (tests)."""
        self._snapshot = None

    async def get(self) -> dict[str, Any]:
        """A snapshot at most ``fresh_for`` seconds old."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop, self._snapshot = asyncio.Lock(), loop, None
        async with self._lock:
            clock = time.monotonic()
            if self._snapshot is None or clock - self._built >= self.fresh_for:
                reuse = None
                if self._snapshot is not None and clock - self._history_built < self.history_fresh_for:
                    reuse = list(self._snapshot["history"])
                self._snapshot = await abuild_snapshot(reuse)
                self._built = clock
                if reuse is None:
                    self._history_built = clock
            return self._snapshot


snapshots = SnapshotSource()
"""This process's shared source."""
