"""A worker's share of keeping the ledger and the sessions: renew its leases, settle the orphans of dead
workers, prune the ledger, end idle sessions and prune ended ones.

Each worker process runs :meth:`Upkeep.run` in the background (started by its runtime); ``manage.py
mcp_prune`` runs the same steps from the command line.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from django.utils import timezone

from ..conf import mcp_settings
from ..core.records import Ledger
from ..protocol.settlement import CLOSED, closed_response, outcome_of
from ..sessions import aexpire_idle_sessions, aprune_ended_sessions, touch_every

__all__ = ["ORPHAN_REASON", "SWEEP_BATCHES", "Upkeep"]

logger = logging.getLogger("mcp_server.ledger")

ORPHAN_REASON = "the worker serving it stopped"
"""The ``<why>`` of the -32000 recorded for a request whose worker died."""

SWEEP_BATCHES = 10
"""Batches of sessions one round expires and prunes at most (the next round goes on)."""


class Upkeep:
    """Lease renewal, orphan settlement and pruning for the worker ``worker_id``."""

    def __init__(self, ledger: Ledger, worker_id: str) -> None:
        self.ledger = ledger
        self.worker_id = worker_id

    async def run(self) -> None:
        """Every third of ``LEASE_TIMEOUT``, one :meth:`round` (errors are logged, never fatal)."""
        while True:
            try:
                await self.round()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("ledger upkeep failed")
            await asyncio.sleep(max(0.2, float(mcp_settings.LEASE_TIMEOUT) / 3))

    async def round(self) -> dict[str, int]:
        """Renew this worker's leases, settle orphans, prune settled records past ``LEDGER_RETENTION``,
        then sweep the sessions (:meth:`sweep_sessions`, a bounded number of batches)."""
        now = timezone.now()
        lease = timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT))
        renewed = await self.ledger.arenew_leases(self.worker_id, now + lease)
        orphans = await self.settle_orphans(now)
        retention = timedelta(seconds=float(mcp_settings.LEDGER_RETENTION))
        pruned = await self.ledger.aprune(now - retention)
        sessions = await self.sweep_sessions(now, max_batches=SWEEP_BATCHES)
        return {"renewed": renewed, "orphans": orphans, "pruned": pruned, **sessions}

    async def settle_orphans(self, now: datetime) -> int:
        """Record -32000 for the pending requests of other workers whose lease ran out."""
        orphans = 0
        for record in await self.ledger.aexpired(now):
            if record.worker == self.worker_id:
                continue
            reply = closed_response(record.request_id, ORPHAN_REASON)
            orphans += await self.ledger.asettle(record, CLOSED, outcome_of(reply))
        return orphans

    async def sweep_sessions(
        self, now: datetime, *, retention: float | None = None, max_batches: int | None = None
    ) -> dict[str, int]:
        """End HTTP sessions idle past ``SESSION_IDLE_TIMEOUT`` and delete sessions ended more than
        ``retention`` seconds ago (default ``SESSION_RETENTION``) that have no pending request."""
        expired = 0
        idle = mcp_settings.SESSION_IDLE_TIMEOUT
        if idle:
            # ``last_seen`` is written at most every touch_every(): a session is idle only past that slack.
            idle_before = now - timedelta(seconds=float(idle)) - touch_every()
            expired = await aexpire_idle_sessions(idle_before, max_batches=max_batches)
        keep = float(mcp_settings.SESSION_RETENTION if retention is None else retention)
        pruned = await aprune_ended_sessions(
            now - timedelta(seconds=keep), self.ledger.asessions_with_pending, max_batches=max_batches
        )
        return {"sessions_expired": expired, "sessions_pruned": pruned}
