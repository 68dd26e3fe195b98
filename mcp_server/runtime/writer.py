"""Writing the ledger behind the request path: one background writer per process, in batches.

The request path never waits on the ledger. :meth:`LedgerWriter.opened` and :meth:`LedgerWriter.settled` only
queue; every ``LEDGER_FLUSH_INTERVAL`` seconds the queued records are written in one batch, from one thread of
the writer's own (one database connection, never Django's shared ORM thread). A request settled before its
batch is written becomes one final record; a longer one a pending record, then its settlement.

What a worker crash loses from the record: the requests that arrived less than ``LEDGER_FLUSH_INTERVAL``
before it (their connections died with the worker) and the settlements of that last interval (their rows
stay pending until a survivor settles them -32000 as orphans).

Faults (I11): a store that cannot answer (unreachable, broken connection, timeout) keeps the batch queued and
is retried with backoff, for as long as it takes: the record converges once the store answers again. A batch
the store refuses (a value it cannot hold) is written again record by record, so that the others go through;
a refused record is made storable (:func:`~mcp_server.core.records.make_storable`: text PostgreSQL cannot
hold, values too long for their columns) and tried again at once; one still refused :data:`MAX_ATTEMPTS`
times is dropped with an error in the log (a settled request then has
no row, a pending row is settled -32000 by the upkeep once its lease runs out).

``LEDGER_FLUSH_INTERVAL = 0`` writes through instead: each open and settle waits for its own write
(:mod:`~mcp_server.runtime.write_through`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from django.db import close_old_connections, transaction

from ..conf import now as clock_now
from ..core.records import DuplicateRequest, LedgerRecord, make_storable
from ..core.states import State
from ..core.stores import is_unavailable
from ..stores.ledger.base import Ledger
from .inflight import InFlight
from .write_through import WriteThrough

__all__ = ["MAX_ATTEMPTS", "LedgerWriter"]

logger = logging.getLogger("mcp_server.ledger")

Refused = Callable[[LedgerRecord], Awaitable[None]]


MAX_ATTEMPTS = 5
"""Times the store may refuse a record (not fail to answer: refuse it) before the writer drops it."""


class LedgerWriter(WriteThrough):
    """Queues ledger writes and flushes them in batches (or writes through when ``interval`` is 0)."""

    what = "ledger"
    items = "records"
    logger = logger

    def __init__(
        self,
        ledger: Ledger,
        *,
        interval: float,
        on_refused: Refused | None = None,
        timeout: float | None = None,
    ) -> None:
        super().__init__(interval, timeout)
        self.ledger = ledger
        self.on_refused = on_refused
        self._writing: dict[int, LedgerRecord] = {}
        self._flushing: dict[int, LedgerRecord] = {}
        self._attempts: dict[int, int] = {}
        self._adopted: dict[int, tuple[LedgerRecord, bool | None]] = {}
        """Records a handler's transaction stores as answered (``claim_answer``): record, and whether the
        transaction inserts it (its pending row was still queued) rather than updating its row (``None``:
        its pending row was in the batch being written: decided in the handler's thread, see
        :class:`~mcp_server.runtime.inflight.InFlight`)."""
        self._flight = InFlight()
        self._parked: dict[int, tuple[LedgerRecord, bool]] = {}
        """Settled records claimed while their batch was in flight, until that batch is done."""
        self._committed: set[int] = set()
        self._lock = asyncio.Lock()
        self.dropped = 0
        """Records dropped because the store refused them :data:`MAX_ATTEMPTS` times."""

    def __len__(self) -> int:
        """Records waiting to be written."""
        return len(self._inserts) + len(self._updates)

    def held(self) -> set[Any]:
        """Pks of the stored records whose settlement this writer still has to write (queued, in flight, or
        behind a write-through that outlived its wait): the upkeep renews their leases."""
        records = [*self._updates.values(), *self._flushing.values(), *self._in_doubt.values()]
        return {r.pk for r in records if r.pk is not None}

    def unwritten_sessions(self) -> set[str]:
        """Sessions with a record this writer has yet to write (first write or settlement): the sweep keeps
        them, so that a session is never pruned before the last row of it lands."""
        records = [
            *self._inserts.values(),
            *self._writing.values(),
            *self._updates.values(),
            *self._flushing.values(),
            *self._in_doubt.values(),
            *(record for record, _insert in self._adopted.values()),
            *(record for record, _committed in self._parked.values()),
        ]
        return {r.session_id for r in records if r.session_id is not None}

    def oldest_unwritten(self) -> datetime | None:
        """When the oldest request whose first write is not done yet arrived (``None``: none is left)."""
        records = [*self._inserts.values(), *self._writing.values(), *self._in_doubt.values()]
        records += [record for record, insert in self._adopted.values() if insert]
        times = [r.created for r in records if r.created is not None]
        return min(times) if times else None

    async def opened(self, record: LedgerRecord) -> None:
        """A request arrived. Write-through raises :class:`DuplicateRequest` for a pending duplicate and
        :class:`StoreUnavailable` when the store does not answer within ``timeout``."""
        if self.write_through:
            refused = await self._write_through([record], [])
            if refused:
                raise DuplicateRequest(record.request_key)
            return
        self._inserts[id(record)] = record
        self._wake()

    async def adopt(self, record: LedgerRecord, using: str) -> bool:
        """On the event loop, before a handler's transaction on ``using`` stores ``record`` as answered
        (:meth:`answer_within`): whether it can, which it can when the ledger writes in that database. A
        record still queued is taken out of the queue (the transaction inserts it); one being written right
        now is never waited for (the handler's transaction may hold the lock that batch needs): the handler's
        thread finds out whether it landed (:class:`~mcp_server.runtime.inflight.InFlight`)."""
        key = id(record)
        if not self.ledger.joins(using):
            return False
        if key in self._writing:
            self._adopted[key] = (record, None)
            return True
        if key in self._in_doubt:  # a write-through that outlived its wait: it is followed up behind
            return False
        if key in self._inserts:
            self._adopted[key] = (self._inserts.pop(key), True)
            return True
        if record.pk is None:  # its pending row was refused, or is in doubt: it is recorded behind
            return False
        self._adopted[key] = (record, False)
        return True

    def answer_within(self, record: LedgerRecord, using: str) -> bool:
        """In the handler's thread and transaction: store ``record`` as answered (see :meth:`adopt`).
        ``False``: its row was settled meanwhile by another worker (the caller rolls back)."""
        key = id(record)
        _record, insert = self._adopted[key]
        transaction.on_commit(functools.partial(self._committed.add, key), using=using)
        if insert is None:  # its batch was in flight: it landed, or the batch leaves it to this transaction
            replica = dataclasses.replace(record, pk=None)
            pk = self._flight.claim(key, replica)
            if pk is None:
                return self.ledger.record_answer(replica, using, insert=True)
            return self.ledger.record_answer(dataclasses.replace(record, pk=pk), using, insert=False)
        return self.ledger.record_answer(record, using, insert=insert)

    async def settled(self, record: LedgerRecord) -> None:
        """A request was settled (``record.state``, ``outcome`` and ``settled_at`` are set)."""
        key = id(record)
        adopted = self._adopted.pop(key, None)
        if adopted is not None:
            committed = key in self._committed
            self._committed.discard(key)
            if adopted[1] is None:  # claimed while its batch was in flight
                if key in self._writing:
                    self._parked[key] = (record, committed)  # settled once that batch is done
                    return
                if self._answered_within(record, committed):
                    return
            elif adopted[1] and not committed:  # its insert rolled back with the handler's transaction
                record.pk = None
        if key in self._in_doubt:
            return  # its write outlived its wait: the settlement follows once that write lands
        if self.write_through:
            await self._settle_through(record)
            return
        if key in self._inserts:
            return  # not written yet: it will be written once, final
        if record.pk is None and key not in self._writing:
            self._inserts[key] = record  # its pending row was refused: record the final state alone
        else:
            self._updates[key] = record
        self._wake()

    def _answered_within(self, record: LedgerRecord, committed: bool) -> bool:
        """A record claimed while its batch was in flight, settled, that batch done: whether its handler's
        transaction committed the row that records it (nothing left to write)."""
        key = id(record)
        replica = self._flight.release(key)
        if replica is None:  # its batch had landed: the handler's transaction updated that row
            return False
        self._inserts.pop(key, None)  # the batch left the row to the handler (or failed and queued it again)
        record.pk = replica.pk if committed else None
        return committed

    async def _settle_parked(self) -> None:
        parked = [record for key, (record, _c) in self._parked.items() if key not in self._writing]
        for record in parked:
            _record, committed = self._parked.pop(id(record))
            self._adopted[id(record)] = (record, None)
            if committed:
                self._committed.add(id(record))
            await self.settled(record)

    async def flush(self) -> None:
        """Write everything queued so far (the store's errors propagate; the records stay queued)."""
        async with self._lock:
            inserts = list(self._inserts.values())
            self._inserts.clear()
            updates = [r for r in self._updates.values() if r.pk is not None]
            self._updates = {k: r for k, r in self._updates.items() if r.pk is None}
            if not inserts and not updates:
                return
            self._writing = {id(r): r for r in inserts}
            self._flushing = {id(r): r for r in updates}
            try:
                await self._write_batch(inserts, updates)
            finally:
                in_flight = {key for key, (_r, insert) in self._adopted.items() if insert is None}
                self._flight.forget({id(r) for r in inserts}, keep=in_flight)  # (ids are reused)
                self._writing, self._flushing = {}, {}
                await self._settle_parked()
        if self._inserts or self._updates:
            self._wake()

    # -- batches ---------------------------------------------------------------------------------------------

    def _handed(self, records: list[LedgerRecord]) -> list[LedgerRecord]:
        """What the writer's thread is handed for ``records``: a copy of each, which the event loop may go on
        changing while the batch is written, except a settled record when the ledger changes nothing of a
        record but its ``pk`` (:attr:`~mcp_server.stores.ledger.base.Ledger.sets_only_pk`): nothing changes
        a settled record, and a batch's copies, all made at once on the event loop, held it ~1.5 µs a record
        (a third of a millisecond for a batch at c1)."""
        if not self.ledger.sets_only_pk:
            return [r.snapshot() for r in records]
        return [r if r.state != State.PENDING else r.snapshot() for r in records]

    async def _write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> None:
        snapshots = self._handed(inserts)
        try:
            keys = [id(r) for r in inserts]
            refused = await self._write(snapshots, self._handed(updates), keys)
        except Exception as exc:
            _forget_pks(inserts, snapshots)
            if is_unavailable(exc):
                self._requeue(inserts, updates, exc)
                raise
            if len(inserts) + len(updates) == 1:  # refused alone: counted, tried again later or dropped
                make_storable((inserts or updates)[0])
                self._requeue(inserts, updates, exc)
                return
            logger.warning("the ledger refused a batch (%s); writing it record by record", exc)
            await self._write_one_by_one(inserts, updates)
            return
        except BaseException:
            _forget_pks(inserts, snapshots)
            self._requeue(inserts, updates, None)
            raise
        if refused or self._attempts:
            for record in updates:
                self._attempts.pop(id(record), None)
            await self._inserted(inserts, snapshots, refused)
            return
        # The usual batch: every row landed, none was tried before. Only the pks to take: ``flush`` empties
        # ``_writing`` next, with no await in between (a batch at c1 held the event loop ~80 µs here).
        for record, snapshot in zip(inserts, snapshots, strict=True):
            record.pk = snapshot.pk

    async def _write_one_by_one(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> None:
        """Write each record alone: the ones the store refuses are counted (and dropped at the last try)."""
        pending = [(r, True) for r in inserts] + [(r, False) for r in updates]
        for index, (record, is_insert) in enumerate(pending):
            try:
                try:
                    await self._write_alone(record, is_insert)
                except Exception as exc:
                    if is_unavailable(exc):
                        raise
                    make_storable(record)  # refused a value: at once again, with what the store can hold
                    await self._write_alone(record, is_insert)
                self._attempts.pop(id(record), None)
            except Exception as exc:
                if not is_unavailable(exc):
                    self._requeue([record] if is_insert else [], [] if is_insert else [record], exc)
                    continue
                rest = pending[index:]
                self._requeue([r for r, i in rest if i], [r for r, i in rest if not i], exc)
                raise

    async def _write_alone(self, record: LedgerRecord, is_insert: bool) -> None:
        if is_insert:
            snapshot = record.snapshot()
            refused = await self._write([snapshot], [], [id(record)])
            await self._inserted([record], [snapshot], refused)
        else:
            await self._write([], [record.snapshot()])

    def _requeue(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord], exc: Exception | None
    ) -> None:
        """Queue the records of a failed write again; one the store refused is counted, and dropped after
        :data:`MAX_ATTEMPTS` refusals (a store that does not answer is waited for without counting)."""
        counted = exc is not None and not is_unavailable(exc)
        for records, queue in ((inserts, self._inserts), (updates, self._updates)):
            for record in records:
                if counted and self._refused_too_often(record, exc):
                    continue
                queue.setdefault(id(record), record)

    def _refused_too_often(self, record: LedgerRecord, exc: Exception | None) -> bool:
        attempts = self._attempts.get(id(record), 0) + 1
        if attempts < MAX_ATTEMPTS:
            self._attempts[id(record)] = attempts
            return False
        self._attempts.pop(id(record), None)
        self._updates.pop(id(record), None)  # a settlement waiting for this row's insert goes with it
        self.dropped += 1
        logger.error(
            "ledger record dropped after %d refusals: %r %r of session %r (%s), state %s: %s",
            attempts,
            record.method,
            record.request_key[:100],
            record.session_id,
            record.pk,
            record.state,
            exc,
        )
        return True

    async def _inserted(
        self, inserts: list[LedgerRecord], snapshots: list[LedgerRecord], refused: list[LedgerRecord]
    ) -> None:
        refused_ids = {id(s) for s in refused}
        for record, snapshot in zip(inserts, snapshots, strict=True):
            record.pk = snapshot.pk
            self._writing.pop(id(record), None)  # written: a settlement from now on is an update, or final
            self._attempts.pop(id(record), None)
            if id(snapshot) in refused_ids:
                later = self._updates.pop(id(record), None)
                if later is not None:  # settled while its pending row was being refused
                    self._inserts[id(record)] = later
                if self.on_refused is not None and record.state == State.PENDING:
                    await self.on_refused(record)

    async def _write(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord], keys: list[int] | None = None
    ) -> list[LedgerRecord]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._write_sync, inserts, updates, keys)

    def _write_sync(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord], keys: list[int] | None = None
    ) -> list[LedgerRecord]:
        close_old_connections()  # this thread's connection: drop it if it broke or outlived CONN_MAX_AGE
        now = clock_now()
        for record in inserts:  # a row written late (a store that was down) starts with a full lease
            if record.state == State.PENDING and record.created and record.lease_expires:
                record.lease_expires = max(
                    record.lease_expires, now + (record.lease_expires - record.created)
                )
        write_claimed = getattr(self.ledger, "write_claimed", None)
        if keys is not None and write_claimed is not None:  # the batch a claim may take records from
            refused: list[LedgerRecord] = write_claimed(inserts, keys, updates, self._flight)[0]
            return refused
        return self.ledger.write_batch(inserts, updates)


def _forget_pks(inserts: list[LedgerRecord], handed: list[LedgerRecord]) -> None:
    """After a failed write: a record handed to it as it is loses the ``pk`` the write may have set (no row
    holds it: the batch is written again, or record by record)."""
    for record, copy in zip(inserts, handed, strict=True):
        if copy is record:
            record.pk = None
