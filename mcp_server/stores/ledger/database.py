"""The database ledger (default): one ``LedgerEntry`` row per request; the admin reads these rows."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, connections, router, transaction
from django.utils import timezone

from ...core.records import DuplicateRequest, LedgerRecord
from ...core.states import State
from ...core.writes import begin_write
from .base import ClaimedBatch, Ledger
from .insert_plan import insert_plan, row_values

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
        round_of=row.round_of,
        pk=row.pk,
        protocol_version=row.protocol_version,
        client=row.client,
        long_id=row.long_id,
        oauth_client_id=row.oauth_client_id,
        oauth_client_name=row.oauth_client_name,
        trace_id=row.trace_id,
        span_id=row.span_id,
    )


RENEW_CHUNK = 500
"""Leases renewed per ``UPDATE`` (their pks are its parameters)."""


class DatabaseLedger(Ledger):
    """Rows in ``mcp_server_ledgerentry``; settlement is ``UPDATE ... WHERE state = 'pending'``.

    Batches are written with raw statements (:mod:`.insert_plan`: one ``INSERT`` per batch on PostgreSQL,
    multi-row ``INSERT`` chunks on SQLite; one ``executemany`` ``UPDATE``), not one ORM call per row.
    """

    sets_only_pk = True  # (write_batch sets each inserted record's pk, and on a refusal clears it)

    @property
    def model(self) -> Any:
        from ...models import LedgerEntry

        return LedgerEntry

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        model = self.model
        alias = router.db_for_write(model)
        connection = connections[alias]
        if updates:  # first: a settled id may be reused by a pending insert of the same batch
            meta = model._meta
            outcome_field = meta.get_field("outcome")
            settled_field = meta.get_field("settled_at")
            quote = connection.ops.quote_name
            sql = (
                f"UPDATE {quote(meta.db_table)} SET {quote('state')} = %s, {quote('outcome')} = %s, "
                f"{quote('settled_at')} = %s WHERE {quote('id')} = %s AND {quote('state')} = %s"
            )
            rows = [
                (
                    record.state,
                    outcome_field.get_db_prep_save(record.outcome, connection),
                    settled_field.get_db_prep_save(record.settled_at, connection),
                    record.pk,
                    State.PENDING.value,
                )
                for record in updates
            ]
            with connection.cursor() as cursor:
                cursor.executemany(sql, rows)
        refused: list[LedgerRecord] = []
        if inserts:
            try:
                with transaction.atomic(using=alias):
                    self._insert(connection, inserts)
            except IntegrityError:  # a pending duplicate among them: find it row by row
                for record in inserts:
                    try:
                        with transaction.atomic(using=alias):
                            self._insert(connection, [record])
                    except IntegrityError:
                        record.pk = None
                        refused.append(record)
        return refused

    def write_claimed(
        self, inserts: list[LedgerRecord], keys: list[int], updates: list[LedgerRecord], flight: ClaimedBatch
    ) -> tuple[list[LedgerRecord], set[int]]:
        """:meth:`write_batch` in one transaction whose commit goes through ``flight``
        (:mod:`~mcp_server.runtime.inflight`): the pending rows of the records a handler's claim took
        meanwhile are deleted before the commit. Returns the refused inserts and the keys (``keys[i]`` for
        ``inserts[i]``) of the records taken so."""
        alias = router.db_for_write(self.model)
        written = dict(zip(keys, inserts, strict=True))
        # Left in reverse order: the commit, then ``flight`` (its lock held across the commit).
        with (
            contextlib.ExitStack() as stack,
            begin_write(connections[alias]),
            transaction.atomic(using=alias),
        ):
            refused = self.write_batch(inserts, updates)
            yielded = stack.enter_context(flight.committing(written, partial(self._discard, alias)))
        for key, record in written.items():
            if key in yielded:
                record.pk = None
        return refused, yielded

    def _discard(self, alias: str, pks: list[object]) -> None:
        self.model.objects.using(alias).filter(pk__in=pks, state=State.PENDING).delete()

    def joins(self, using: str) -> bool:
        return using == router.db_for_write(self.model)

    def record_answer(self, record: LedgerRecord, using: str, *, insert: bool) -> bool:
        answered: dict[str, Any] = {
            "state": State.ANSWERED,
            "outcome": {"result": True},
            "settled_at": timezone.now(),
        }
        if insert:  # the row is new, answered: the batch writer's own insert, with the answered columns
            answered_record = dataclasses.replace(record, **answered)
            self._insert(connections[using], [answered_record])
            record.pk = answered_record.pk
            return True
        rows = self.model.objects.using(using)
        return bool(rows.filter(pk=record.pk, state=State.PENDING).update(**answered))

    def _insert(self, connection: Any, records: list[LedgerRecord]) -> None:
        model = self.model
        plan = insert_plan(model, connection)
        if plan is None:  # a backend the plan does not write for: Django's own bulk insert
            rows = model.objects.using(connection.alias).bulk_create(
                [model(**row_values(r)) for r in records]
            )
            for record, row in zip(records, rows, strict=True):
                record.pk = row.pk
            return
        with connection.cursor() as cursor:
            plan.insert(cursor, records)

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
                protocol_version=record.protocol_version,
                round_of=record.round_of,
                client=record.client,
                long_id=record.long_id,
                oauth_client_id=record.oauth_client_id,
                oauth_client_name=record.oauth_client_name,
                trace_id=record.trace_id,
                span_id=record.span_id,
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

    async def arenew_leases(self, worker: str, until: datetime, held: Collection[Any] | None = None) -> int:
        rows = self.model.objects.filter(worker=worker, state=State.PENDING)
        if held is None:
            return int(await rows.aupdate(lease_expires=until))
        pks, renewed = sorted(held), 0
        for start in range(0, len(pks), RENEW_CHUNK):
            renewed += await rows.filter(pk__in=pks[start : start + RENEW_CHUNK]).aupdate(lease_expires=until)
        return renewed

    async def astrays(
        self, worker: str, held: Collection[Any], created_before: datetime, *, limit: int = 500
    ) -> list[LedgerRecord]:
        rows = self.model.objects.filter(worker=worker, state=State.PENDING, created__lt=created_before)
        found = [_record(row) async for row in rows.order_by("created")[: limit + len(held)]]
        return [r for r in found if r.pk not in held][:limit]

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

    async def asessions_with_pending(self, session_ids: list[str]) -> set[str]:
        rows = self.model.objects.filter(session_id__in=session_ids, state=State.PENDING)
        return {
            session_id async for session_id in rows.order_by().values_list("session_id", flat=True).distinct()
        }
