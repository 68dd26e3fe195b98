"""Writing the ledger behind the request path: one background writer per process, in batches.

The request path never waits on the ledger. :meth:`LedgerWriter.opened` and :meth:`LedgerWriter.settled` only
queue; every ``LEDGER_FLUSH_INTERVAL`` seconds the queued records are written in one batch, from one thread of
the writer's own (one database connection, never Django's shared ORM thread). A request settled before its
batch is written becomes one final record; a longer one a pending record, then its settlement.

What a worker crash loses from the record: the requests that arrived less than ``LEDGER_FLUSH_INTERVAL``
before it (their connections died with the worker) and the settlements of that last interval (their rows
stay pending until a survivor settles them -32000 as orphans). A store that fails keeps the batch queued and
is retried with backoff: the record converges once the store answers again. A store that refuses a value
(:data:`REFUSED_VALUE`: text PostgreSQL cannot hold, a value too long for its column) does not hold the batch
back: its records are written one by one, and one the store refuses even once made storable
(:func:`~mcp_server.core.records.make_storable`) is dropped with an error in the log.
``LEDGER_FLUSH_INTERVAL = 0`` writes through: each open and settle waits for its own write, and a pending
duplicate is refused before the request runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from django.db import DataError, close_old_connections

from ..core.records import DuplicateRequest, Ledger, LedgerRecord, make_storable
from ..core.states import State

__all__ = ["REFUSED_VALUE", "LedgerWriter"]

logger = logging.getLogger("mcp_server.ledger")

Refused = Callable[[LedgerRecord], Awaitable[None]]

MAX_BACKOFF = 5.0

REFUSED_VALUE = (DataError, ValueError, TypeError)
"""Errors by which a store refuses a value rather than fails (``UnicodeEncodeError`` is a ``ValueError``):
writing the same record again cannot succeed, so it must not hold back the others."""


class LedgerWriter:
    """Queues ledger writes and flushes them in batches (or writes through when ``interval`` is 0)."""

    def __init__(self, ledger: Ledger, *, interval: float, on_refused: Refused | None = None) -> None:
        self.ledger = ledger
        self.interval = max(0.0, float(interval))
        self.on_refused = on_refused
        self._inserts: dict[int, LedgerRecord] = {}
        self._updates: dict[int, LedgerRecord] = {}
        self._writing: set[int] = set()
        self._lock = asyncio.Lock()
        self._work = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-ledger-writer")
        self.failures = 0
        """Consecutive failed flushes (0 when the store answers)."""

    @property
    def write_through(self) -> bool:
        """Whether each write waits for the store (``LEDGER_FLUSH_INTERVAL`` is 0)."""
        return self.interval == 0

    def __len__(self) -> int:
        """Records waiting to be written."""
        return len(self._inserts) + len(self._updates)

    async def opened(self, record: LedgerRecord) -> None:
        """A request arrived. Write-through raises :class:`DuplicateRequest` for a pending duplicate."""
        if self.write_through:
            refused = await self._write_through([record], [])
            if refused:
                raise DuplicateRequest(record.request_key)
            return
        self._inserts[id(record)] = record
        self._wake()

    async def settled(self, record: LedgerRecord) -> None:
        """A request was settled (``record.state``, ``outcome`` and ``settled_at`` are set)."""
        key = id(record)
        if self.write_through:
            if record.pk is None:
                await self._write_through([record], [])
            else:
                await self._write_through([], [record])
            return
        if key in self._inserts:
            return  # not written yet: it will be written once, final
        if record.pk is None and key not in self._writing:
            self._inserts[key] = record  # its pending row was refused: record the final state alone
        else:
            self._updates[key] = record
        self._wake()

    async def flush(self) -> None:
        """Write everything queued so far (the store's errors propagate; the records stay queued)."""
        async with self._lock:
            inserts, updates = self._take()
            if not inserts and not updates:
                return
            try:
                await self._write_batch(inserts, updates)
            except REFUSED_VALUE:
                await self._write_each()
        if self._inserts or self._updates:
            self._wake()

    def _take(self) -> tuple[list[LedgerRecord], list[LedgerRecord]]:
        """The queued inserts, and the queued updates whose rows are written (the others stay queued)."""
        inserts = list(self._inserts.values())
        self._inserts.clear()
        updates = [r for r in self._updates.values() if r.pk is not None]
        self._updates = {k: r for k, r in self._updates.items() if r.pk is None}
        return inserts, updates

    async def _write_batch(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> None:
        """Write one batch; on an error its records are queued again and the error propagates."""
        snapshots = [dataclasses.replace(r) for r in inserts]
        self._writing = {id(r) for r in inserts}
        try:
            refused = await self._write(snapshots, [dataclasses.replace(r) for r in updates])
        except BaseException:
            for record in inserts:
                self._inserts.setdefault(id(record), record)
            for record in updates:
                self._updates.setdefault(id(record), record)
            raise
        finally:
            self._writing = set()
        refused_ids = {id(s) for s in refused}
        for record, snapshot in zip(inserts, snapshots, strict=True):
            record.pk = snapshot.pk
            if id(snapshot) in refused_ids:
                later = self._updates.pop(id(record), None)
                if later is not None:  # settled while its pending row was being refused
                    self._inserts[id(record)] = later
                if self.on_refused is not None and record.state == State.PENDING:
                    await self.on_refused(record)

    async def _write_each(self) -> None:
        """After the store refused a value: write what is queued one record at a time, so that a record it
        refuses cannot hold back the others. A failure of the store itself propagates (what is not written
        stays queued)."""
        for record in [r for r in self._updates.values() if r.pk is not None]:
            del self._updates[id(record)]
            await self._write_alone([], [record])
        for record in list(self._inserts.values()):
            del self._inserts[id(record)]
            await self._write_alone([record], [])

    async def _write_alone(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> None:
        """Write one record; one the store refuses is made storable and tried once more, then dropped."""
        record = (inserts or updates)[0]
        try:
            await self._write_batch(inserts, updates)
            return
        except REFUSED_VALUE:
            self._forget(record)
        make_storable(record)
        try:
            await self._write_batch(inserts, updates)
        except REFUSED_VALUE as exc:
            self._forget(record)
            _log_dropped(record, exc)

    def _forget(self, record: LedgerRecord) -> None:
        """Take a record a failed write queued again back off the queues."""
        self._inserts.pop(id(record), None)
        self._updates.pop(id(record), None)

    async def _write_through(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord]
    ) -> list[LedgerRecord]:
        """Write one record now (``LEDGER_FLUSH_INTERVAL`` 0); one the store refuses even once made storable
        is dropped (logged), the request goes on."""
        try:
            return await self._write(inserts, updates)
        except REFUSED_VALUE:
            record = (inserts or updates)[0]
            make_storable(record)
        try:
            return await self._write(inserts, updates)
        except REFUSED_VALUE as exc:
            _log_dropped(record, exc)
            return []

    async def _write(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._write_sync, inserts, updates)

    def _write_sync(self, inserts: list[LedgerRecord], updates: list[LedgerRecord]) -> list[LedgerRecord]:
        close_old_connections()  # this thread's connection: drop it if it broke or outlived CONN_MAX_AGE
        return self.ledger.write_batch(inserts, updates)

    # -- the background loop ------------------------------------------------------------------------------

    def _wake(self) -> None:
        self._work.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="mcp ledger writer")

    async def _run(self) -> None:
        while True:
            await self._work.wait()
            await asyncio.sleep(self.interval)
            self._work.clear()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                delay = min(MAX_BACKOFF, self.interval * 2**self.failures)
                logger.exception("ledger write failed (%d in a row); retrying in %.2fs", self.failures, delay)
                self._work.set()
                await asyncio.sleep(delay)
            else:
                self.failures = 0

    async def aclose(self, grace: float = 5.0) -> None:
        """Flush what is queued (within ``grace`` seconds) and stop the background loop."""
        try:
            async with asyncio.timeout(grace):
                await self.flush()
        except Exception:
            logger.exception("ledger records lost at shutdown: %d", len(self))
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._executor.shutdown(wait=False)


def _log_dropped(record: LedgerRecord, exc: BaseException) -> None:
    logger.error(
        "ledger record dropped: the store refuses it (%s: %s): session %s, request %r, %s, %s",
        type(exc).__name__,
        exc,
        record.session_id,
        record.request_key,
        record.method,
        record.state,
    )
