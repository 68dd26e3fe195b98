"""Writing the ledger through: with ``LEDGER_FLUSH_INTERVAL = 0`` each open and settle waits for its write.

A pending duplicate is then refused before the request runs. The wait lasts at most ``STORE_TIMEOUT``: a
request whose open times out is answered with :class:`~mcp_server.core.stores.StoreUnavailable`, and the
write, still on its way in the writer's thread, is *in doubt*: it is followed up behind the request path when
it lands (the row it left pending is settled then). A settlement the store cannot take now is queued behind,
as the batches of :class:`~mcp_server.runtime.writer.LedgerWriter` are written, with their retries.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable
from typing import Any

from ..core.records import LedgerRecord, make_storable
from ..core.states import State
from ..core.stores import StoreUnavailable, is_unavailable, store_timeout
from .batching import BatchLoop

__all__ = ["WriteThrough"]

logger = logging.getLogger("mcp_server.ledger")


class WriteThrough(BatchLoop):
    """The ledger writer's queues (written behind, in batches) and its writes the request path waits for;
    :class:`~mcp_server.runtime.writer.LedgerWriter` writes the batches (``_write_sync``)."""

    def __init__(self, interval: float, timeout: float | None) -> None:
        super().__init__(interval)
        self.timeout = timeout
        """Longest wait of a write-through (default ``STORE_TIMEOUT``)."""
        self._inserts: dict[int, LedgerRecord] = {}
        self._updates: dict[int, LedgerRecord] = {}
        self._in_doubt: dict[int, LedgerRecord] = {}
        """Records of a write-through that outlived its wait, until it lands."""

    @property
    def write_through(self) -> bool:
        """Whether each write waits for the store (``LEDGER_FLUSH_INTERVAL`` is 0)."""
        return self.interval == 0

    def _write_sync(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord], keys: list[int] | None = None
    ) -> list[LedgerRecord]:
        """In the writer's thread: write ``inserts`` and ``updates``; the inserts refused as duplicates."""
        raise NotImplementedError

    async def _write_through(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord], *, made_storable: bool = False
    ) -> list[LedgerRecord]:
        """One write, waited for at most ``timeout`` seconds; one that outlives it is followed up behind."""
        limit = store_timeout() if self.timeout is None else self.timeout
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, self._write_sync, inserts, updates
        )
        try:
            async with asyncio.timeout(limit):
                return await asyncio.shield(future)
        except (TimeoutError, asyncio.CancelledError) as exc:
            for record in [*inserts, *updates]:
                self._in_doubt[id(record)] = record
            future.add_done_callback(functools.partial(self._landed, inserts, updates))
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise StoreUnavailable("ledger", f"did not answer within {limit:g}s") from None
        except Exception as exc:
            if is_unavailable(exc):
                raise StoreUnavailable("ledger", f"cannot be reached ({type(exc).__name__})") from exc
            if made_storable:
                raise
            for record in [*inserts, *updates]:  # refused a value: once more, with what the store can hold
                make_storable(record)
            return await self._write_through(inserts, updates, made_storable=True)

    async def _settle_through(self, record: LedgerRecord) -> None:
        """Write a settlement through; one the store cannot take now is queued behind (never raises)."""
        inserts, updates = ([record], []) if record.pk is None else ([], [record])
        try:
            await self._write_through(inserts, updates)
        except StoreUnavailable as exc:
            if id(record) not in self._in_doubt:  # not written: behind, with retries
                self._queue_behind(inserts, updates)
            logger.warning("settlement of %r recorded behind the request: %s", record.request_key[:100], exc)
        except Exception:
            logger.exception("could not record the settlement of %s", record.request_key[:100])
            self._queue_behind(inserts, updates)

    def _landed(
        self, inserts: list[LedgerRecord], updates: list[LedgerRecord], future: asyncio.Future[Any]
    ) -> None:
        """A write-through that outlived its wait is done: write what happened since, behind."""
        for record in [*inserts, *updates]:
            self._in_doubt.pop(id(record), None)
        if future.cancelled() or future.exception() is not None:
            self._queue_behind([r for r in inserts if r.state != State.PENDING], updates)
            return
        refused = {id(r) for r in future.result()}
        written = [r for r in inserts if id(r) not in refused and r.pk is not None]
        self._queue_behind([], [r for r in written if r.state != State.PENDING])

    def _queue_behind(self, inserts: Iterable[LedgerRecord], updates: Iterable[LedgerRecord]) -> None:
        for record in inserts:
            record.pk = None
            self._inserts[id(record)] = record
        for record in updates:
            self._updates[id(record)] = record
        if self._inserts or self._updates:
            self._wake()
