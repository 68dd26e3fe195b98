"""Ledgers that count their writes, for the write-behind writer's tests: records, settling, what is stored."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from django.db import OperationalError
from django.utils import timezone

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.core.states import State
from mcp_server.stores.ledger.base import ClaimedBatch, Ledger
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger

__all__ = [
    "Instrumented",
    "InstrumentedCache",
    "InstrumentedDatabase",
    "pending_pks",
    "record",
    "settle",
    "stored_state",
]

Batch = tuple[list[str], list[str]]


class Instrumented(Ledger):
    """``write_batch`` as the backend's, plus: a record of each batch, injected failures, an optional gate."""

    error: type[Exception] = OperationalError

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.batches: list[Batch] = []
        self.fail = 0
        self.written = 0
        self.wrote = threading.Condition()
        self.gate: threading.Event | None = None
        self.started = threading.Event()
        self.attempts: list[float] = []
        self.committing = threading.local()  # .active: this thread is inside write_claimed
        self.handed: list[tuple[list[int], list[int]]] = []
        """The ids of the objects each batch was handed (inserts, updates)."""
        self.fail_after = 0
        """Batches to fail once written, before their commit (``fail`` fails them before anything)."""

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        self.attempts.append(time.monotonic())
        if self.fail:
            self.fail -= 1
            raise self.error("injected: the store is out of reach")
        self.started.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        self.batches.append(([str(r.state) for r in inserts], [str(r.state) for r in updates]))
        self.handed.append(([id(r) for r in inserts], [id(r) for r in updates]))
        refused = super().write_batch(inserts, updates)
        if self.fail_after:
            self.fail_after -= 1
            raise self.error("injected: the store went away before the commit")
        if not getattr(
            self.committing, "active", False
        ):  # inside write_claimed: counted once its transaction has committed
            self._count_written()
        return refused

    def _count_written(self) -> None:
        with self.wrote:
            self.written += 1
            self.wrote.notify_all()

    async def until_written(self, batches: int) -> None:
        """Wait until ``batches`` batches have been written (by whatever flushed them)."""

        def wait() -> bool:
            with self.wrote:
                return self.wrote.wait_for(lambda: self.written >= batches, 5)

        assert await asyncio.to_thread(wait)


class InstrumentedDatabase(Instrumented, DatabaseLedger):
    error = OperationalError

    def write_claimed(
        self, inserts: list[LedgerRecord], keys: list[int], updates: list[LedgerRecord], flight: ClaimedBatch
    ) -> tuple[list[LedgerRecord], set[int]]:
        self.committing.active = True
        try:
            result = super().write_claimed(inserts, keys, updates, flight)
        finally:
            self.committing.active = False
        self._count_written()
        return result


class InstrumentedCache(Instrumented, CacheLedger):
    error = ConnectionError


def record(session: str | None, request_id: int | str) -> LedgerRecord:
    now = timezone.now()
    return LedgerRecord(
        session_id=session, request_key=request_key(request_id), method="tools/call", worker="w", created=now
    )


def settle(rec: LedgerRecord, state: str = State.ANSWERED) -> LedgerRecord:
    rec.state = state
    rec.outcome = {"result": True} if state == State.ANSWERED else None
    rec.settled_at = timezone.now()
    return rec


async def stored_state(ledger: Ledger, rec: LedgerRecord) -> str | None:
    assert rec.pk is not None, "never written"
    found = await ledger.aget(rec)
    return None if found is None else str(found.state)


async def pending_pks(ledger: Ledger) -> list[Any]:
    return [r.pk for r in await ledger.apending()]
