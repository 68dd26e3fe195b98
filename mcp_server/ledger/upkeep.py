"""A worker's share of keeping the ledger: renew its leases, settle the orphans of dead workers, prune.

Each worker process runs :meth:`Upkeep.run` in the background (started by its runtime); ``manage.py
mcp_prune`` runs one :meth:`Upkeep.round` from the command line.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from django.utils import timezone

from ..conf import mcp_settings
from ..core.records import Ledger
from ..protocol.settlement import CLOSED, closed_response, outcome_of

__all__ = ["ORPHAN_REASON", "Upkeep"]

logger = logging.getLogger("mcp_server.ledger")

ORPHAN_REASON = "the worker serving it stopped"
"""The ``<why>`` of the -32000 recorded for a request whose worker died."""


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
        """Renew this worker's leases, settle orphans, prune settled records past ``LEDGER_RETENTION``."""
        now = timezone.now()
        lease = timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT))
        renewed = await self.ledger.arenew_leases(self.worker_id, now + lease)
        orphans = await self.settle_orphans(now)
        retention = timedelta(seconds=float(mcp_settings.LEDGER_RETENTION))
        pruned = await self.ledger.aprune(now - retention)
        return {"renewed": renewed, "orphans": orphans, "pruned": pruned}

    async def settle_orphans(self, now: datetime) -> int:
        """Record -32000 for the pending requests of other workers whose lease ran out."""
        orphans = 0
        for record in await self.ledger.aexpired(now):
            if record.worker == self.worker_id:
                continue
            reply = closed_response(record.request_id, ORPHAN_REASON)
            orphans += await self.ledger.asettle(record, CLOSED, outcome_of(reply))
        return orphans
