"""``manage.py mcp_prune``: delete settled ledger entries past retention, settle orphans of dead workers."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from mcp_server.conf import mcp_settings
from mcp_server.ledger import get_ledger
from mcp_server.ledger.upkeep import Upkeep


class Command(BaseCommand):
    help = "Prune settled MCP ledger entries older than LEDGER_RETENTION and settle requests of dead workers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            help="Seconds a settled entry is kept (default: MCP_SERVER['LEDGER_RETENTION']).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        retention = options["older_than"]
        if retention is None:
            retention = float(mcp_settings.LEDGER_RETENTION)
        elif not math.isfinite(retention) or retention < 0:
            raise CommandError("--older-than must be a number of seconds, 0 or more")
        counts = async_to_sync(self._run)(float(retention))
        self.stdout.write(
            f"pruned {counts['pruned']} settled entries; settled {counts['orphans']} orphaned ones"
        )

    async def _run(self, retention: float) -> dict[str, int]:
        now = timezone.now()
        orphans = await Upkeep(get_ledger(), worker_id="mcp_prune").settle_orphans(now)
        pruned = await get_ledger().aprune(now - timedelta(seconds=retention))
        return {"pruned": pruned, "orphans": orphans}
