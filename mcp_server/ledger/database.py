"""The database ledger (default): one ``LedgerEntry`` row per request; the admin reads these rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError
from django.utils import timezone

from .base import DuplicateRequest, Ledger, LedgerRecord
from .states import State

__all__ = ["DatabaseLedger"]


def _record(row: Any) -> LedgerRecord:
    return LedgerRecord(
        session_id=row.session_id,
        request_key=row.request_key,
        method=row.method,
        name=row.name,
        user_id=row.user_id,
        worker=row.worker,
        channel=row.channel,
        created=row.created,
        deadline=row.deadline,
        lease_expires=row.lease_expires,
        state=row.state,
        settled_at=row.settled_at,
        outcome=row.outcome,
        pk=row.pk,
    )


class DatabaseLedger(Ledger):
    """Rows in ``mcp_server_ledgerentry``; settlement is ``UPDATE ... WHERE state = 'pending'``."""

    @property
    def model(self) -> Any:
        from ..models import LedgerEntry

        return LedgerEntry

    async def aopen(self, record: LedgerRecord) -> LedgerRecord:
        record.created = record.created or timezone.now()
        try:
            row = await self.model.objects.acreate(
                session_id=record.session_id,
                request_key=record.request_key,
                method=record.method,
                name=record.name[:300],
                user_id=record.user_id,
                worker=record.worker,
                channel=record.channel,
                created=record.created,
                deadline=record.deadline,
                lease_expires=record.lease_expires,
            )
        except IntegrityError as exc:
            raise DuplicateRequest(record.request_key) from exc
        record.pk = row.pk
        return record

    async def asettle(self, record: LedgerRecord, state: str, outcome: dict[str, Any] | None) -> bool:
        updated = await self.model.objects.filter(pk=record.pk, state=State.PENDING).aupdate(
            state=state, outcome=outcome, settled_at=timezone.now()
        )
        if updated:
            record.state = state
            record.outcome = outcome
        return bool(updated)

    async def aget(self, record: LedgerRecord) -> LedgerRecord | None:
        row = await self.model.objects.filter(pk=record.pk).afirst()
        return _record(row) if row is not None else None

    async def aget_pending(self, session_id: str | None, key: str) -> LedgerRecord | None:
        row = await self.model.objects.filter(
            session_id=session_id, request_key=key, state=State.PENDING
        ).afirst()
        return _record(row) if row is not None else None

    async def apending(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> list[LedgerRecord]:
        rows = self.model.objects.filter(state=State.PENDING).order_by("created")
        if session_id is not None:
            rows = rows.filter(session_id=session_id)
        if limit is not None:
            rows = rows[:limit]
        return [_record(row) async for row in rows]

    async def arenew_leases(self, worker: str, until: datetime) -> int:
        return int(
            await self.model.objects.filter(worker=worker, state=State.PENDING).aupdate(lease_expires=until)
        )

    async def aexpired(self, now: datetime, *, limit: int = 500) -> list[LedgerRecord]:
        rows = self.model.objects.filter(state=State.PENDING, lease_expires__lt=now).order_by("created")[
            :limit
        ]
        return [_record(row) async for row in rows]

    async def aprune(self, settled_before: datetime) -> int:
        deleted, _ = (
            await self.model.objects.filter(settled_at__lt=settled_before)
            .exclude(state=State.PENDING)
            .adelete()
        )
        return int(deleted)
