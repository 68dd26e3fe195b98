"""The task store on the database (``Task`` rows), beside the request ledger: the default, and the only one
offered, of ``TASK_STORE_BACKEND``.

Tasks live in the database whatever ``LEDGER_BACKEND`` says: a task outlives the request that created it,
and its status changes several times (a ledger row changes once, from ``pending``). Every write is a
conditional ``UPDATE``: a terminal status is set only from a live one (so exactly one of a finishing worker,
a ``tasks/cancel``, an operator and a survivor's upkeep wins), and answers are merged under an optimistic
lock (``version``), so concurrent ``tasks/update`` calls on several workers lose nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from ...core.tasks import ENDED_KEPT, INPUT_REQUIRED, LIVE, TERMINAL, WORKING, TaskRecord
from .base import TaskStore

__all__ = ["DatabaseTaskStore"]

ANSWER_ATTEMPTS = 20
"""Times :meth:`DatabaseTaskStore.aanswer` retries when another writer changed the row meanwhile."""


def _record(row: Any) -> TaskRecord:
    return TaskRecord(
        task_id=row.id,
        server=row.server,
        owner=row.owner,
        tool=row.tool,
        created=row.created,
        updated=row.updated,
        status=row.status,
        status_message=row.status_message,
        ttl_ms=row.ttl_ms,
        poll_interval_ms=row.poll_interval_ms,
        user_id=row.user_id,
        worker=row.worker,
        channel=row.channel,
        lease_expires=row.lease_expires,
        client_address=row.client_address,
        deadline=row.deadline,
        input_requests=dict(row.input_requests or {}),
        input_responses=dict(row.input_responses or {}),
        result=row.result,
        error=row.error,
        version=row.version,
    )


class DatabaseTaskStore(TaskStore):
    """``mcp_server_task`` rows (see the module docstring)."""

    @property
    def model(self) -> Any:
        from ...models import Task

        return Task

    async def acreate(self, record: TaskRecord) -> None:
        expires = record.created + timedelta(milliseconds=record.ttl_ms) if record.ttl_ms else None
        await self.model.objects.acreate(
            id=record.task_id,
            server=record.server,
            owner=record.owner,
            user_id=record.user_id,
            tool=record.tool[:300],
            status=record.status,
            status_message=record.status_message[:500],
            created=record.created,
            updated=record.updated,
            ttl_ms=record.ttl_ms,
            poll_interval_ms=record.poll_interval_ms,
            expires_at=expires,
            worker=record.worker,
            channel=record.channel,
            lease_expires=record.lease_expires,
            client_address=record.client_address[:100],
            deadline=record.deadline,
        )
        await self._changed(record)

    async def aget(self, task_id: str) -> TaskRecord | None:
        row = await self.model.objects.filter(pk=task_id).afirst()
        return _record(row) if row is not None else None

    async def _write(self, task_id: str, statuses: Collection[str], **values: Any) -> bool:
        """One conditional write; every write bumps ``version`` and ``updated``, and tells the listeners."""
        from django.db.models import F

        updated = await self.model.objects.filter(pk=task_id, status__in=list(statuses)).aupdate(
            version=F("version") + 1, updated=timezone.now(), **values
        )
        if updated:
            await self._changed(await self.aget(task_id))
        return bool(updated)

    async def aask(self, task_id: str, requests: dict[str, Any], message: str = "") -> bool:
        for _attempt in range(ANSWER_ATTEMPTS):
            current = await self.aget(task_id)
            if current is None or not current.live:
                return False
            merged = {**current.input_requests, **requests}
            if await self._write_versioned(
                current, status=INPUT_REQUIRED, input_requests=merged, status_message=message[:500]
            ):
                return True
        return False

    async def _write_versioned(self, current: TaskRecord, **values: Any) -> bool:
        from django.db.models import F

        updated = await self.model.objects.filter(
            pk=current.task_id, version=current.version, status__in=list(LIVE)
        ).aupdate(version=F("version") + 1, updated=timezone.now(), **values)
        if updated:
            await self._changed(await self.aget(current.task_id))
        return bool(updated)

    async def aresume(self, task_id: str) -> bool:
        return await self._write(task_id, LIVE, status=WORKING, status_message="")

    async def aanswer(self, task_id: str, answers: dict[str, Any]) -> TaskRecord | None:
        for _attempt in range(ANSWER_ATTEMPTS):
            current = await self.aget(task_id)
            if current is None:
                return None
            wanted = {k: v for k, v in answers.items() if k in current.outstanding()}
            if not wanted or not current.live:
                return current
            merged = {**current.input_responses, **wanted}
            if await self._write_versioned(current, input_responses=merged):
                return await self.aget(task_id)
        raise RuntimeError(f"task {task_id}: too many concurrent updates")

    async def afinish(
        self,
        task_id: str,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str = "",
    ) -> bool:
        if status not in TERMINAL:
            raise ValueError(f"{status!r} is not a terminal task status")
        values: dict[str, Any] = {"status": status, "status_message": message[:500], "lease_expires": None}
        if result is not None:
            values["result"] = result
        if error is not None:
            values["error"] = error
        return await self._write(task_id, LIVE, **values)

    async def arenew(self, worker: str, until: datetime, held: Collection[str]) -> set[str]:
        if not held:
            return set()
        rows = self.model.objects.filter(worker=worker, status__in=list(LIVE), pk__in=list(held))
        await rows.aupdate(lease_expires=until)
        return {pk async for pk in rows.values_list("pk", flat=True)}

    async def afail_orphans(self, now: datetime, error: dict[str, Any]) -> int:
        rows = self.model.objects.filter(status__in=list(LIVE), lease_expires__lt=now)
        failed = 0
        async for task_id in rows.values_list("pk", flat=True)[:500]:
            failed += await self.afinish(task_id, "failed", error=error, message=error.get("message", ""))
        return failed

    async def aprune(self, now: datetime) -> int:
        ended_before = now - timedelta(seconds=ENDED_KEPT)
        rows = self.model.objects.filter(
            status__in=list(TERMINAL), expires_at__lt=now, updated__lt=ended_before
        )
        deleted, _ = await rows.adelete()
        return int(deleted)

    async def acount_live(self, owner: str, client_address: str) -> tuple[int, int]:
        mine = Q(owner=owner)
        if owner == "anonymous":
            mine &= Q(client_address=client_address[:100])
        counts = await self.model.objects.filter(status__in=list(LIVE)).aaggregate(
            owner=Count("pk", filter=mine), total=Count("pk")
        )
        return int(counts["owner"]), int(counts["total"])

    async def aversions(self, task_ids: Collection[str]) -> dict[str, int]:
        if not task_ids:
            return {}
        rows = self.model.objects.filter(pk__in=list(task_ids)).values_list("pk", "version")
        return {pk: version async for pk, version in rows}

    async def afail_overdue(self, now: datetime, error: dict[str, Any]) -> list[str]:
        rows = self.model.objects.filter(status__in=list(LIVE), deadline__lt=now)
        failed = []
        async for task_id in rows.values_list("pk", flat=True)[:500]:
            if await self.afinish(task_id, "failed", error=error, message=error.get("message", "")):
                failed.append(task_id)
        return failed
