"""The base class of the ledger's stores, as ``django.contrib.sessions.backends.base`` is of Django's session
stores: :class:`Ledger`, one record per request, from arrival until it is settled.

The worker that holds a request decides its settlement in memory and records it here, in batches
(:meth:`Ledger.write_batch`, called by :class:`~mcp_server.runtime.writer.LedgerWriter`): a request settled
before its batch is written becomes one final record, a longer one a pending record and then its settlement.
``asettle`` is the compare-and-set from ``pending`` that decides only where no live worker holds the request
(the orphans of a dead worker): of any number of concurrent callers, in any process, exactly one wins.

The record itself (:class:`~mcp_server.core.records.LedgerRecord`) and :class:`DuplicateRequest` stay in
:mod:`mcp_server.core.records`, where the lower layers (``protocol/``) read them; they are re-exported here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from asgiref.sync import async_to_sync, sync_to_async

from ...core.records import DuplicateRequest, LedgerRecord
from ...core.states import State

__all__ = ["ClaimedBatch", "DuplicateRequest", "Ledger", "LedgerRecord"]


class ClaimedBatch(Protocol):
    """What a store's ``write_claimed`` needs of the claims on the batch it writes
    (:class:`~mcp_server.runtime.inflight.InFlight`)."""

    def committing(
        self, written: dict[int, LedgerRecord], discard: Callable[[list[object]], None]
    ) -> AbstractContextManager[set[int]]:
        """Entered inside the batch's transaction, left after its commit: the keys of ``written`` a claim
        took, whose rows ``discard`` deletes before the commit."""


class Ledger(ABC):
    """Storage for request records, shared by every worker process. Chosen by ``LEDGER_BACKEND``."""

    sets_only_pk: bool = False
    """Whether :meth:`write_batch` (and ``write_claimed``) change nothing of the records they are handed but
    their ``pk``. The writer then hands them settled records as they are (nothing else changes a settled
    record), not copies: a batch's copies, made on the event loop, held it ~1.5 µs a record. A subclass that
    overrides them to change more sets it back to ``False``."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}

    @abstractmethod
    async def aopen(self, record: LedgerRecord) -> LedgerRecord:
        """Store a pending record (sets ``pk``); raise :class:`DuplicateRequest` for a pending duplicate."""

    def write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        """Record the settlement of ``updates`` (stored earlier as pending), then store ``inserts`` (pending
        or already settled; sets their ``pk``). Returns the pending inserts refused as duplicates.

        Called from one writer thread per process; the default stores them one by one.
        """
        for record in updates:  # first: a settled id may be reused by a pending insert of the same batch
            async_to_sync(self.asettle)(record, record.state, record.outcome)
        refused: list[LedgerRecord] = []
        for record in inserts:
            state, outcome = record.state, record.outcome
            record.state, record.outcome = State.PENDING, None
            try:
                async_to_sync(self.aopen)(record)
            except DuplicateRequest:
                refused.append(record)
                continue
            if state != State.PENDING:
                async_to_sync(self.asettle)(record, state, outcome)
        return refused

    def joins(self, using: str) -> bool:
        """Whether :meth:`record_answer` can write in a transaction on database ``using`` (default: no)."""
        return False

    def record_answer(self, record: LedgerRecord, using: str, *, insert: bool) -> bool:
        """In the caller's thread and transaction on ``using`` (see :meth:`joins`): store ``record`` as
        answered, so that it commits or rolls back with the caller's writes: ``insert`` it so (its pending row
        was never written), or move its stored row from pending. ``False``: that row was settled already."""
        raise NotImplementedError(f"{type(self).__name__} cannot join a transaction")

    async def awrite_batch(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord]
    ) -> list[LedgerRecord]:
        """:meth:`write_batch` in a worker thread of its own (never the ORM's shared thread)."""
        return await sync_to_async(self.write_batch, thread_sensitive=False)(inserts, updates)

    @abstractmethod
    async def asettle(self, record: LedgerRecord, state: str, outcome: dict[str, Any] | None) -> bool:
        """Compare-and-set ``record`` from pending to ``state``; ``True`` for the one caller that wins."""

    @abstractmethod
    async def aget(self, record: LedgerRecord) -> LedgerRecord | None:
        """The stored state of ``record`` (by ``pk``), or ``None`` once pruned."""

    @abstractmethod
    async def aget_pending(self, session_id: str | None, key: str) -> LedgerRecord | None:
        """The pending record of that request, if any."""

    @abstractmethod
    async def apending(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> list[LedgerRecord]:
        """Pending records, oldest first (of one session, or all)."""

    @abstractmethod
    async def arenew_leases(self, worker: str, until: datetime, held: Collection[Any] | None = None) -> int:
        """Extend the lease of the pending records ``worker`` holds: those whose pk is in ``held``, or all of
        them (``None``). A backend with one lease per worker (the cache) renews that one either way."""

    async def astrays(
        self, worker: str, held: Collection[Any], created_before: datetime, *, limit: int = 500
    ) -> list[LedgerRecord]:
        """Pending records of ``worker`` created before ``created_before`` whose pk is not in ``held``: the
        worker settled them, but the record of it was lost (the default scans :meth:`apending`)."""
        strays = [
            r
            for r in await self.apending()
            if r.worker == worker
            and r.pk not in held
            and r.created is not None
            and r.created < created_before
        ]
        return strays[:limit]

    @abstractmethod
    async def aexpired(self, now: datetime, *, limit: int = 500) -> list[LedgerRecord]:
        """Pending records whose lease ran out (their worker died)."""

    @abstractmethod
    async def aprune(self, settled_before: datetime) -> int:
        """Delete records settled before ``settled_before``; returns how many."""

    async def asessions_with_pending(self, session_ids: list[str]) -> set[str]:
        """Which of ``session_ids`` still have a pending request (a session is pruned only without one).

        The default lists every pending record; backends with an index answer it directly.
        """
        wanted = set(session_ids)
        return {
            r.session_id for r in await self.apending() if r.session_id is not None and r.session_id in wanted
        }

    # Sync twins, for management commands and the admin.

    def pending(self, session_id: str | None = None, *, limit: int | None = None) -> list[LedgerRecord]:
        """Sync twin of :meth:`apending`."""
        return async_to_sync(self.apending)(session_id, limit=limit)

    def prune(self, settled_before: datetime) -> int:
        """Sync twin of :meth:`aprune`."""
        return async_to_sync(self.aprune)(settled_before)

    def settle(self, record: LedgerRecord, state: str, outcome: dict[str, Any] | None) -> bool:
        """Sync twin of :meth:`asettle`."""
        return async_to_sync(self.asettle)(record, state, outcome)

    def check(self) -> list[str]:
        """Reasons this backend, as configured, cannot keep the ledger's promises (for a system check)."""
        return []
