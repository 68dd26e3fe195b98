"""What only the ledger can say, read from the shared stores at scrape time: the same figures whichever
worker answers the scrape, and the same as the admin's *Pending requests* page shows (one reading,
:func:`~mcp_server.admin_live.snapshot.apending_now`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from ..admin_live.snapshot import apending_now
from ..models import Session
from ..runtime import get_runtime
from ..telemetry.names import OTHER, SERIES_LIMIT

__all__ = ["LedgerFigures", "Names", "aledger_figures", "bounded_names"]

Names = dict[tuple[str, str], int]
"""Counts by method and tool."""


@dataclass(frozen=True)
class LedgerFigures:
    """The site's figures at one scrape."""

    pending: Names
    """Pending requests by method and tool (``""`` but for ``tools/call``)."""
    oldest_age: float
    """Seconds since the oldest pending request arrived (0: none is pending)."""
    open_sessions: int
    live_tasks: int


def bounded_names(counts: Names, limit: int = SERIES_LIMIT) -> Names:
    """``counts`` with at most ``limit`` pairs: the largest kept, the others added up as ``_OTHER``
    (the names are the clients' own: they must not make a scrape as large as they like)."""
    if len(counts) <= limit:
        return counts
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    kept = dict(ranked[: limit - 1])
    rest = sum(n for _, n in ranked[limit - 1 :])
    kept[(OTHER, OTHER)] = kept.get((OTHER, OTHER), 0) + rest
    return kept


async def aledger_figures(now: datetime | None = None) -> LedgerFigures:
    """Read the figures now (four queries with the database ledger and task store)."""
    now = now if now is not None else timezone.now()
    pending = await apending_now(limit=1)
    oldest = pending.oldest
    sessions = await Session.objects.filter(ended_at__isnull=True).acount()
    _mine, tasks = await get_runtime().tasks.store.acount_live("", "")
    return LedgerFigures(
        pending=bounded_names(pending.by_name),
        oldest_age=max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0,
        open_sessions=sessions,
        live_tasks=tasks,
    )
