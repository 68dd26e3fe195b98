"""A worker's share of keeping the ledger and the sessions: renew its leases, settle the orphans of dead
workers and its own strays, prune the ledger, end idle sessions and prune ended ones.

Each worker process runs :meth:`Upkeep.run` in the background (started by its runtime); ``manage.py
mcp_prune`` runs the same steps from the command line.

A worker renews the leases of the records it still holds only: the requests in its table and those whose
settlement its writer has yet to write (:class:`Holding`). A row of its own that it no longer holds is a
stray (its settlement was lost: a write the store refused for good, a write whose outcome the worker could
not know); its lease runs out, and the worker settles it -32000 itself, as a survivor settles a dead
worker's orphans. So nothing stays pending for a request that was settled (I11), and its id can be reused.

Each round also calls the site's upkeep hooks (``MCP_SERVER["UPKEEP_HOOKS"]``; by default those the installed
apps add with :func:`add_default_hook`, such as the authorization server's pruning of unused client
registrations), so that a higher layer's housekeeping runs here without this module knowing it.

After a gap of more than a lease between two rounds that reached the store (it was down, or stalled), every
live worker's leases may have run out meanwhile: a round waits one more lease before it settles orphans, so
that the workers still alive renew theirs first (:meth:`Upkeep.round`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone
from django.utils.module_loading import import_string

from ..conf import mcp_settings
from ..core.records import LedgerRecord
from ..core.tasks import TaskStore
from ..protocol.settlement import CLOSED, closed_response, outcome_of
from ..protocol.task_bounds import max_duration, overdue_error
from ..sessions import aexpire_idle_sessions, aprune_ended_sessions, touch_every
from ..stores.events.base import EventStore, StoredEvent, keys_answered, retention_cutoff
from ..stores.ledger.base import Ledger
from ..wire.jsonrpc import encode_reply

__all__ = [
    "ORPHAN_GAP",
    "ORPHAN_REASON",
    "STRAY_REASON",
    "SWEEP_BATCHES",
    "Holding",
    "Upkeep",
    "add_default_hook",
    "upkeep_hooks",
]

logger = logging.getLogger("mcp_server.ledger")

ORPHAN_REASON = "the worker serving it stopped"
"""The ``<why>`` of the -32000 recorded for a request whose worker died."""

ORPHAN_GAP = 1_000_000
"""How far past the last stored event of its stream a dead worker's request's -32000 is numbered: the dead
worker may have sent events it had not stored yet, and a client resuming after one of those must still get
it."""

SWEEP_BATCHES = 10
"""Batches of sessions one round expires and prunes at most (the next round goes on)."""

STRAY_REASON = "its settlement could not be recorded"
"""The ``<why>`` of the -32000 recorded for a worker's own stray (see the module docstring)."""

OVERDUE_SLACK = timedelta(seconds=1)
"""How long past its deadline a live task waits for the upkeep: the worker running it fails it on time
itself; the upkeep catches the task whose worker could not (a handler stuck outside the event loop)."""


_DEFAULT_HOOKS: list[str] = []


def add_default_hook(path: str) -> None:
    """Add the import path of an upkeep hook to the defaults (from an app config's ``ready``).

    A hook is a callable without arguments, plain or ``async`` (a plain one runs in a thread, so it may use
    the ORM), returning ``None`` or counts (``dict[str, int]``) that are added to the round's. It runs in
    every worker's every round (a third of ``LEASE_TIMEOUT``): one that needs to run less often keeps its
    own pace (a key in the shared cache, say).
    """
    if path not in _DEFAULT_HOOKS:
        _DEFAULT_HOOKS.append(path)


def upkeep_hooks() -> list[str]:
    """``MCP_SERVER["UPKEEP_HOOKS"]``, or when it is ``None``, the ones the installed apps added."""
    configured = mcp_settings.UPKEEP_HOOKS
    return list(_DEFAULT_HOOKS if configured is None else configured)


async def _run_hook(path: str) -> dict[str, int]:
    hook = import_string(path)
    result = await hook() if inspect.iscoroutinefunction(hook) else await sync_to_async(hook)()
    return {str(k): int(v) for k, v in dict(result or {}).items()}


@dataclass(frozen=True)
class Holding:
    """What a worker holds in the ledger right now."""

    pks: set[Any] = field(default_factory=set)
    """Records still pending here: in the request table, or with a settlement not yet written."""
    oldest_unwritten: datetime | None = None
    """When the oldest request whose first write is not done arrived: no row after it can be a stray yet."""
    sessions: set[str] = field(default_factory=set)
    """Sessions with a request held here or a record not written yet: not to be pruned."""


class Upkeep:
    """Lease renewal, orphan and stray settlement, and pruning for the worker ``worker_id``.

    ``holding`` tells what the worker holds (its runtime's); without it (``mcp_prune``) every pending record
    of ``worker_id`` is renewed and none is taken for a stray.
    """

    def __init__(
        self,
        ledger: Ledger,
        worker_id: str,
        holding: Callable[[], Holding] | None = None,
        *,
        tasks: TaskStore | None = None,
        running_tasks: Callable[[], Collection[str]] | None = None,
        stop_tasks: Callable[[Collection[str]], None] | None = None,
        recheck_tasks: Callable[[], Awaitable[int]] | None = None,
        events: EventStore | None = None,
        wake: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.events = events
        """The event store: an orphan's -32000 is written to its stream, and old events are pruned."""
        self.wake = wake
        self.worker_id = worker_id
        self.holding = holding
        self.tasks = tasks
        """The task store (tasks extension): leases of the tasks running here, orphans, pruning."""
        self.running_tasks = running_tasks
        self.stop_tasks = stop_tasks
        self.recheck_tasks = recheck_tasks
        """Wakes the tasks parked here whose row changed (the fallback for a lost status message)."""
        self._last_round: float | None = None
        self._orphans_after = 0.0

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
        """Renew this worker's leases, settle orphans and strays, prune settled records past
        ``LEDGER_RETENTION``, then sweep the sessions (:meth:`sweep_sessions`, a bounded number of
        batches).

        Orphans wait for one lease after this worker's first round, and after a gap of more than a lease
        since its last one (see the module docstring).
        """
        now = timezone.now()
        lease = timedelta(seconds=float(mcp_settings.LEASE_TIMEOUT))
        held = self.holding() if self.holding is not None else None
        renewed = await self.ledger.arenew_leases(
            self.worker_id, now + lease, None if held is None else held.pks
        )
        reached = time.monotonic()
        if self._last_round is None or reached - self._last_round > lease.total_seconds():
            self._orphans_after = reached + lease.total_seconds()
        orphans = await self.settle_orphans(now) if reached >= self._orphans_after else 0
        tasks = await self.keep_tasks(now, lease, orphans=reached >= self._orphans_after)
        strays = await self.settle_strays(now - lease, held) if held is not None else 0
        retention = timedelta(seconds=float(mcp_settings.LEDGER_RETENTION))
        pruned = await self.ledger.aprune(now - retention)
        events = await self.events.aprune(retention_cutoff(now)) if self.events is not None else 0
        sessions = await self.sweep_sessions(now, max_batches=SWEEP_BATCHES)
        hooks = await self.run_hooks()
        self._last_round = time.monotonic()
        return {
            **hooks,
            "renewed": renewed,
            "orphans": orphans,
            "strays": strays,
            "pruned": pruned,
            "events_pruned": events,
            **tasks,
            **sessions,
        }

    async def run_hooks(self) -> dict[str, int]:
        """Call the upkeep hooks (:func:`upkeep_hooks`) in turn; one that fails is logged, the others run."""
        counts: dict[str, int] = {}
        for path in upkeep_hooks():
            try:
                counts.update(await _run_hook(path))
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("upkeep hook %s failed", path)
        return counts

    async def keep_tasks(self, now: datetime, lease: timedelta, *, orphans: bool = True) -> dict[str, int]:
        """Renew the leases of the tasks running here (and stop those settled elsewhere meanwhile), fail
        the live tasks whose lease ran out (``orphans``: a dead worker's, or a row whose handler never
        started) and those past their deadline (a worker's own timer normally fails them first), and delete
        terminal tasks past their TTL."""
        if self.tasks is None:
            return {}
        running = set(self.running_tasks() if self.running_tasks is not None else ())
        live = await self.tasks.arenew(self.worker_id, now + lease, running)
        woken = await self.recheck_tasks() if self.recheck_tasks is not None else 0
        overdue = await self.tasks.afail_overdue(
            now - OVERDUE_SLACK, overdue_error(max_duration()).to_error()
        )
        gone = (running - live) | (running & set(overdue))
        if gone and self.stop_tasks is not None:  # ended elsewhere and the word of it was lost, or overdue
            self.stop_tasks(gone)
        failed = 0
        if orphans:
            error = closed_response(0, ORPHAN_REASON)["error"]
            failed = await self.tasks.afail_orphans(now, error)  # after the renewal: never what runs here
        return {
            "tasks_renewed": len(live),
            "tasks_failed": failed,
            "tasks_overdue": len(overdue),
            "tasks_woken": woken,
            "tasks_pruned": await self.tasks.aprune(now),
        }

    async def settle_orphans(self, now: datetime) -> int:
        """Record -32000 for the pending requests of other workers whose lease ran out."""
        orphans = 0
        for record in await self.ledger.aexpired(now):
            if record.worker == self.worker_id:
                continue
            reply = closed_response(record.request_id, ORPHAN_REASON)
            if await self.ledger.asettle(record, CLOSED, outcome_of(reply)):
                orphans += 1
                await self.publish_orphan(record, reply)
        return orphans

    async def publish_orphan(self, record: LedgerRecord, reply: dict[str, Any]) -> None:
        """Write a dead worker's request's -32000 to the streams that carried it (a client resuming one gets
        it), ending a stream whose requests are then all answered."""
        if self.events is None or record.session_id is None:
            return
        try:
            for stream_id in await self.events.astreams_of(record.session_id, record.request_key):
                rows = await self.events.aevents_after(record.session_id, stream_id, -1)
                carried, answered, ended = keys_answered(rows)
                if ended or record.request_key in answered:
                    continue
                seq = max(e.seq for e in rows) + ORPHAN_GAP
                data = encode_reply(reply).data.decode()
                written = [StoredEvent(record.session_id, stream_id, seq, data, record.request_key)]
                if carried <= answered | {record.request_key}:
                    written.append(StoredEvent(record.session_id, stream_id, seq + 1, last=True))
                await self.events.awrite(written)
                if self.wake is not None:
                    await self.wake(stream_id)
        except Exception:
            logger.exception("could not write the -32000 of %r to its stream", record.request_key[:100])

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
            now - timedelta(seconds=keep), self._busy, max_batches=max_batches
        )
        return {"sessions_expired": expired, "sessions_pruned": pruned}

    async def _busy(self, session_ids: list[str]) -> set[str]:
        """Of ``session_ids``, those with a pending row, or a request or record this worker still holds."""
        busy = set(await self.ledger.asessions_with_pending(session_ids))
        if self.holding is not None:
            busy |= self.holding().sessions.intersection(session_ids)
        return busy

    async def settle_strays(self, created_before: datetime, held: Holding) -> int:
        """Record -32000 for this worker's pending rows, older than ``created_before``, that it no longer
        holds."""
        if held.oldest_unwritten is not None:
            created_before = min(created_before, held.oldest_unwritten)
        candidates = await self.ledger.astrays(self.worker_id, held.pks, created_before)
        if not candidates or self.holding is None:
            return 0
        still_held = self.holding().pks  # what the wait on the store let this worker take or settle since
        strays = 0
        for record in candidates:
            if record.pk in still_held:
                continue
            reply = closed_response(record.request_id, STRAY_REASON)
            if await self.ledger.asettle(record, CLOSED, outcome_of(reply)):
                strays += 1
                logger.warning(
                    "settled a stray of this worker: %s %s", record.method, record.request_key[:100]
                )
        return strays
