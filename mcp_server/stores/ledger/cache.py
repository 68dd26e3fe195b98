"""The cache ledger: records in a Django cache shared by every worker (Redis in production).

Layout under ``mcp:ledger:``: ``seq`` (a counter, the record's pk), ``e:<pk>`` (the record),
``k:<session>:<request>`` (the pending pk of a request id: ``add`` rejects duplicates), ``s:<pk>`` (the
settlement: ``add`` is the compare-and-set), ``w:<worker>`` (a worker's lease, renewed while it lives),
``low`` (the oldest pk still stored; pruning moves it forward), ``plow`` (the oldest pk that may still be
pending; listing moves it forward, so listing costs what is pending, not what was ever served),
``g:<pk>`` (when a drawn pk was first seen without its record: after ``LEASE_TIMEOUT`` it is a dead gap,
left by a worker that died between drawing the pk and writing the record).

Each operation runs its few cache calls in one hop to a worker thread (``thread_sensitive=False``), so the
ledger neither blocks the event loop nor queues behind the ORM's single thread. The cache client must be
thread-safe (Redis and local memory are).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.utils import timezone

from ...core.records import DuplicateRequest, LedgerRecord
from ...core.states import State
from .base import Ledger

__all__ = ["CacheLedger"]

CHUNK = 500


class CacheLedger(Ledger):
    """Ledger records kept in ``caches[OPTIONS["CACHE_ALIAS"]]`` (default ``"default"``)."""

    sets_only_pk = True  # (write_batch sets each inserted record's pk, and on a refusal clears it)

    prefix = "mcp:ledger:"

    @cached_property
    def cache(self) -> Any:
        """One cache client for the process (``caches[...]`` in async code builds one per task)."""
        return caches[self.options.get("CACHE_ALIAS", "default")]

    def _k(self, *parts: Any) -> str:
        return self.prefix + ":".join(str(p) for p in parts)

    # -- sync primitives (each called in one worker-thread hop) ---------------------------------------

    def _next_pk(self) -> int:
        # ``incr`` is atomic on Redis and Memcached (Django's ``aincr`` is a get then a set).
        try:
            return int(self.cache.incr(self._k("seq")))
        except ValueError:
            self.cache.add(self._k("seq"), 0, None)
            return int(self.cache.incr(self._k("seq")))

    def _open(self, record: LedgerRecord) -> LedgerRecord:
        record.created = record.created or timezone.now()
        pk = self._next_pk()
        if record.session_id is not None and not self.cache.add(
            self._k("k", record.session_id, record.request_key), pk, None
        ):
            raise DuplicateRequest(record.request_key)
        record.pk = pk
        self.cache.set(self._k("e", pk), dataclasses.asdict(record), None)
        return record

    def _settle(self, record: LedgerRecord, state: str, outcome: dict[str, Any] | None) -> bool:
        retention = float(self.options.get("RETENTION", 3600))
        if not self.cache.add(self._k("s", record.pk), state, retention + 60):
            return False
        stored = dataclasses.asdict(record)
        stored.update(state=state, outcome=outcome, settled_at=timezone.now())
        self.cache.set(self._k("e", record.pk), stored, retention)
        if record.session_id is not None:
            self.cache.delete(self._k("k", record.session_id, record.request_key))
        record.state, record.outcome = state, outcome
        return True

    def _get(self, pk: Any) -> LedgerRecord | None:
        found = self.cache.get_many([self._k("e", pk), self._k("s", pk)])
        stored = found.get(self._k("e", pk))
        if stored is None:
            return None
        current = LedgerRecord(**stored)
        settled = found.get(self._k("s", pk))
        if settled is not None and current.state == State.PENDING:
            current.state = settled
        return current

    def _get_pending(self, session_id: str | None, key: str) -> LedgerRecord | None:
        pk = self.cache.get(self._k("k", session_id, key))
        if pk is None:
            return None
        record = self._get(pk)
        return record if record is not None and record.state == State.PENDING else None

    def _pending(self, session_id: str | None, limit: int | None) -> list[LedgerRecord]:
        pruned_below = int(self.cache.get(self._k("low")) or 1)
        low = max(int(self.cache.get(self._k("plow")) or 1), pruned_below)
        high = int(self.cache.get(self._k("seq")) or 0)
        pending: list[LedgerRecord] = []
        watermark: int | None = None  # the first pk not known to be settled
        for start in range(low, high + 1, CHUNK):
            pks = range(start, min(start + CHUNK, high + 1))
            found = self.cache.get_many([self._k("e", pk) for pk in pks] + [self._k("s", pk) for pk in pks])
            for pk in pks:
                if found.get(self._k("s", pk)) is not None:
                    continue
                stored = found.get(self._k("e", pk))
                if stored is None and self._dead_gap(pk):
                    continue
                # Unsettled: pending, or its record is still being written by ``_open``.
                watermark = pk if watermark is None else watermark
                if stored is not None:
                    pending.append(LedgerRecord(**stored))
        first_unsettled = watermark if watermark is not None else high + 1
        if first_unsettled > low:  # records only ever become settled, so this stays a valid lower bound
            self.cache.set(self._k("plow"), first_unsettled, None)
        mine = [r for r in pending if session_id is None or r.session_id == session_id]
        return mine[:limit] if limit is not None else mine

    def _dead_gap(self, pk: int) -> bool:
        """Whether a pk with no record was drawn so long ago that its ``_open`` can no longer finish."""
        lease = float(self.options.get("LEASE_TIMEOUT", 30))
        now = timezone.now().timestamp()
        self.cache.add(self._k("g", pk), now, lease * 4)
        first_seen = self.cache.get(self._k("g", pk))
        return first_seen is not None and now - float(first_seen) > lease

    def _expired(self, now: datetime, limit: int) -> list[LedgerRecord]:
        pending = self._pending(None, None)
        alive = self.cache.get_many([self._k("w", w) for w in {r.worker for r in pending}])
        grace = timedelta(seconds=float(self.options.get("LEASE_TIMEOUT", 30)))
        return [
            r
            for r in pending
            if self._k("w", r.worker) not in alive and r.created is not None and now - r.created > grace
        ][:limit]

    def _prune(self, settled_before: datetime) -> int:
        """Move ``low`` past records that expired or were settled before ``settled_before``."""
        low = int(self.cache.get(self._k("low")) or 1)
        high = int(self.cache.get(self._k("seq")) or 0)
        pruned, pk, blocked = 0, low, False
        while pk <= high and not blocked:
            pks = range(pk, min(pk + CHUNK, high + 1))
            found = self.cache.get_many([self._k("e", n) for n in pks] + [self._k("s", n) for n in pks])
            doomed: list[str] = []
            for n in pks:
                stored = found.get(self._k("e", n))
                if stored is None and found.get(self._k("s", n)) is None and not self._dead_gap(n):
                    blocked = True  # drawn but not yet written by ``_open``
                    break
                if stored is not None:
                    settled_at = stored.get("settled_at")
                    if (
                        found.get(self._k("s", n)) is None
                        or settled_at is None
                        or settled_at >= settled_before
                    ):
                        blocked = True
                        break
                    doomed += [self._k("e", n), self._k("s", n)]
                    pruned += 1
                pk = n + 1
            if doomed:
                self.cache.delete_many(doomed)
        if pk != low:
            self.cache.set(self._k("low"), pk, None)
        return pruned

    def _reserve(self, count: int) -> int:
        """Draw ``count`` consecutive pks at once; returns the highest."""
        try:
            return int(self.cache.incr(self._k("seq"), count))
        except ValueError:
            self.cache.add(self._k("seq"), 0, None)
            return int(self.cache.incr(self._k("seq"), count))

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        for record in updates:  # first: a settled id may be reused by a pending insert of the same batch
            self._settle(record, record.state, record.outcome)
        refused: list[LedgerRecord] = []
        if not inserts:
            return refused
        retention = float(self.options.get("RETENTION", 3600))
        high = self._reserve(len(inserts))
        pending: dict[str, Any] = {}
        final: dict[str, Any] = {}
        claimed: list[str] = []
        try:
            for pk, record in zip(range(high - len(inserts) + 1, high + 1), inserts, strict=True):
                if record.state == State.PENDING:
                    key = self._k("k", record.session_id, record.request_key)
                    if record.session_id is not None:
                        if not self.cache.add(key, pk, None):
                            refused.append(record)
                            final[self._k("s", pk)] = "refused"  # a settled gap: listing and pruning pass it
                            continue
                        claimed.append(key)
                    record.pk = pk
                    pending[self._k("e", pk)] = dataclasses.asdict(record)
                else:
                    record.pk = pk
                    final[self._k("e", pk)] = dataclasses.asdict(record)
                    final[self._k("s", pk)] = record.state
            if pending:
                self.cache.set_many(pending, None)
        except BaseException:
            # The batch is written again (or one record at a time): its ids must not stay claimed by records
            # that were never stored, or they would be refused as their own duplicates.
            self._release(claimed)
            raise
        if final:
            self.cache.set_many(final, retention + 60)
        return refused

    def _release(self, keys: list[str]) -> None:
        """Best effort: when the store itself is out of reach, the claims stay (their requests, written
        again, are then refused as duplicates of themselves)."""
        with contextlib.suppress(Exception):
            self.cache.delete_many(keys)

    def check(self) -> list[str]:
        from django.core.cache.backends.locmem import LocMemCache

        if isinstance(caches[self.options.get("CACHE_ALIAS", "default")], LocMemCache):
            return [
                "the cache ledger is on a local-memory cache: each worker process has its own, and it evicts "
                "entries past MAX_ENTRIES: the admin neither sees every worker's requests nor keeps them all"
            ]
        return []

    # -- the Ledger interface ------------------------------------------------------------------------------

    async def aopen(self, record: LedgerRecord) -> LedgerRecord:
        return await sync_to_async(self._open, thread_sensitive=False)(record)

    async def asettle(self, record: LedgerRecord, state: str, outcome: dict[str, Any] | None) -> bool:
        return await sync_to_async(self._settle, thread_sensitive=False)(record, state, outcome)

    async def aget(self, record: LedgerRecord) -> LedgerRecord | None:
        return await sync_to_async(self._get, thread_sensitive=False)(record.pk)

    async def aget_pending(self, session_id: str | None, key: str) -> LedgerRecord | None:
        return await sync_to_async(self._get_pending, thread_sensitive=False)(session_id, key)

    async def apending(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> list[LedgerRecord]:
        return await sync_to_async(self._pending, thread_sensitive=False)(session_id, limit)

    async def arenew_leases(self, worker: str, until: datetime, held: Collection[Any] | None = None) -> int:
        # One lease per worker: the worker's strays are settled by its own upkeep (``astrays``).
        seconds = max(1.0, (until - timezone.now()).total_seconds())
        await sync_to_async(self.cache.set, thread_sensitive=False)(
            self._k("w", worker), until.isoformat(), seconds
        )
        return 1

    async def aexpired(self, now: datetime, *, limit: int = 500) -> list[LedgerRecord]:
        return await sync_to_async(self._expired, thread_sensitive=False)(now, limit)

    async def aprune(self, settled_before: datetime) -> int:
        return await sync_to_async(self._prune, thread_sensitive=False)(settled_before)
