"""``manage.py mcp_prune``: delete settled ledger entries past retention, settle orphans of dead workers, end
idle sessions and delete ended ones past ``SESSION_RETENTION``, fail the tasks of dead workers and delete
ended tasks past their TTL (each worker also does this in the background, a bounded number of batches at a
time; the command goes on until nothing is left)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from mcp_server.conf import mcp_settings
from mcp_server.runtime.upkeep import Upkeep
from mcp_server.stores.events import get_event_store
from mcp_server.stores.events.base import retention_cutoff
from mcp_server.stores.ledger import get_ledger
from mcp_server.stores.tasks import new_task_store


def _seconds(value: float | None, option: str) -> float | None:
    if value is not None and (not math.isfinite(value) or value < 0):
        raise CommandError(f"{option} must be a number of seconds, 0 or more")
    return value


class Command(BaseCommand):
    help = (
        "Prune settled MCP ledger entries older than LEDGER_RETENTION, settle requests of dead workers, end "
        "sessions idle past SESSION_IDLE_TIMEOUT and delete sessions ended more than SESSION_RETENTION ago "
        "(with nothing pending)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            help="Seconds a settled entry is kept (default: MCP_SERVER['LEDGER_RETENTION']).",
        )
        parser.add_argument(
            "--sessions-older-than",
            type=float,
            default=None,
            help="Seconds an ended session is kept (default: MCP_SERVER['SESSION_RETENTION']).",
        )
        parser.add_argument(
            "--skip-sessions", action="store_true", help="Leave sessions alone: prune the ledger only."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        retention = _seconds(options["older_than"], "--older-than")
        if retention is None:
            retention = float(mcp_settings.LEDGER_RETENTION)
        session_retention = _seconds(options["sessions_older_than"], "--sessions-older-than")
        counts = async_to_sync(self._run)(float(retention), session_retention, not options["skip_sessions"])
        line = f"pruned {counts['pruned']} settled entries; settled {counts['orphans']} orphaned ones"
        if "sessions_pruned" in counts:
            line += (
                f"; ended {counts['sessions_expired']} idle sessions; "
                f"pruned {counts['sessions_pruned']} ended sessions"
            )
        line += (
            f"; failed {counts['tasks_failed']} orphaned tasks; "
            f"pruned {counts['tasks_pruned']} tasks past their TTL"
        )
        self.stdout.write(line)

    async def _run(self, retention: float, session_retention: float | None, sessions: bool) -> dict[str, int]:
        now = timezone.now()
        events = get_event_store()
        upkeep = Upkeep(get_ledger(), worker_id="mcp_prune", tasks=new_task_store(), events=events)
        orphans = await upkeep.settle_orphans(now)  # (their -32000 is written to their streams too)
        pruned = await upkeep.ledger.aprune(now - timedelta(seconds=retention))
        counts = {
            "pruned": pruned,
            "orphans": orphans,
            "events_pruned": await events.aprune(retention_cutoff(now)),
        }
        lease = timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT))
        counts.update(await upkeep.keep_tasks(now, lease))
        if sessions:
            counts.update(await upkeep.sweep_sessions(now, retention=session_retention))
        return counts
