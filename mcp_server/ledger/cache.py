"""The cache ledger: records in a Django cache shared by every worker (Redis in production).

Layout under ``mcp:ledger:``: ``seq`` (a counter, the record's pk), ``e:<pk>`` (the record),
``k:<session>:<request>`` (the pending pk of a request id: ``add`` rejects duplicates), ``s:<pk>`` (the
settlement: ``add`` is the compare-and-set), ``w:<worker>`` (a worker's lease, renewed while it lives),
``low`` (the oldest pk that may still be pending; pruning moves it forward).
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import caches
from django.utils import timezone

from .base import DuplicateRequest, Ledger, LedgerRecord
from .states import State

__all__ = ["CacheLedger"]

CHUNK = 500


class CacheLedger(Ledger):
    """Ledger records kept in ``caches[OPTIONS["CACHE_ALIAS"]]`` (default ``"default"``)."""

    prefix = "mcp:ledger:"

    @property
    def cache(self) -> Any:
        return caches[self.options.get("CACHE_ALIAS", "default")]

    def _k(self, *parts: Any) -> str:
        return self.prefix + ":".join(str(p) for p in parts)

    async def _next_pk(self) -> int:
        try:
            return int(await self.cache.aincr(self._k("seq")))
        except ValueError:
            await self.cache.aadd(self._k("seq"), 0, None)
            return int(await self.cache.aincr(self._k("seq")))

    async def aopen(self, record: LedgerRecord) -> LedgerRecord:
        record.created = record.created or timezone.now()
        pk = await self._next_pk()
        if not await self.cache.aadd(self._k("k", record.session_id, record.request_key), pk, None):
            raise DuplicateRequest(record.request_key)
        record.pk = pk
        await self.cache.aset(self._k("e", pk), dataclasses.asdict(record), None)
        return record

    async def asettle(self, record: LedgerRecord, state: str, outcome: dict[str, Any] | None) -> bool:
        retention = float(self.options.get("RETENTION", 3600))
        if not await self.cache.aadd(self._k("s", record.pk), state, retention + 60):
            return False
        stored = await self.cache.aget(self._k("e", record.pk)) or dataclasses.asdict(record)
        stored.update(state=state, outcome=outcome, settled_at=timezone.now())
        await self.cache.aset(self._k("e", record.pk), stored, retention)
        await self.cache.adelete(self._k("k", record.session_id, record.request_key))
        record.state, record.outcome = state, outcome
        return True

    async def aget(self, record: LedgerRecord) -> LedgerRecord | None:
        found = await self.cache.aget_many([self._k("e", record.pk), self._k("s", record.pk)])
        stored = found.get(self._k("e", record.pk))
        if stored is None:
            return None
        current = LedgerRecord(**stored)
        settled = found.get(self._k("s", record.pk))
        if settled is not None and current.state == State.PENDING:
            current.state = settled
        return current

    async def aget_pending(self, session_id: str | None, key: str) -> LedgerRecord | None:
        pk = await self.cache.aget(self._k("k", session_id, key))
        if pk is None or await self.cache.aget(self._k("s", pk)) is not None:
            return None
        stored = await self.cache.aget(self._k("e", pk))
        return LedgerRecord(**stored) if stored else None

    async def _scan(self) -> tuple[list[LedgerRecord], int, int]:
        """Every record from ``low`` to ``seq``, with settlement applied."""
        low = int(await self.cache.aget(self._k("low")) or 1)
        high = int(await self.cache.aget(self._k("seq")) or 0)
        records: list[LedgerRecord] = []
        for start in range(low, high + 1, CHUNK):
            pks = range(start, min(start + CHUNK, high + 1))
            found = await self.cache.aget_many(
                [self._k("e", pk) for pk in pks] + [self._k("s", pk) for pk in pks]
            )
            for pk in pks:
                stored = found.get(self._k("e", pk))
                if stored is None:
                    continue
                record = LedgerRecord(**stored)
                settled = found.get(self._k("s", pk))
                if settled is not None and record.state == State.PENDING:
                    record.state = settled
                records.append(record)
        return records, low, high

    async def apending(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> list[LedgerRecord]:
        records, _, _ = await self._scan()
        pending = [
            r
            for r in records
            if r.state == State.PENDING and (session_id is None or r.session_id == session_id)
        ]
        return pending[:limit] if limit is not None else pending

    async def arenew_leases(self, worker: str, until: datetime) -> int:
        seconds = max(1.0, (until - timezone.now()).total_seconds())
        await self.cache.aset(self._k("w", worker), until.isoformat(), seconds)
        return 1

    async def aexpired(self, now: datetime, *, limit: int = 500) -> list[LedgerRecord]:
        pending = await self.apending()
        workers = {r.worker for r in pending}
        alive = await self.cache.aget_many([self._k("w", w) for w in workers])
        grace = timedelta(seconds=float(self.options.get("LEASE_TIMEOUT", 30)))
        return [
            r
            for r in pending
            if self._k("w", r.worker) not in alive and r.created is not None and now - r.created > grace
        ][:limit]

    async def aprune(self, settled_before: datetime) -> int:
        records, low, high = await self._scan()
        pruned = 0
        new_low = low
        for record in records:
            if record.state == State.PENDING:
                break
            if record.settled_at is None or record.settled_at >= settled_before:
                break
            await self.cache.adelete_many([self._k("e", record.pk), self._k("s", record.pk)])
            pruned += 1
            new_low = int(record.pk) + 1
        if not records:
            new_low = high + 1
        if new_low != low:
            await self.cache.aset(self._k("low"), new_low, None)
        return pruned
