"""Claims on the records of the ledger batch being written: how a claim never waits for the writer.

A handler claims its answer (``Context.claim_answer``) inside its transaction, which by then holds the
database's write lock (SQLite: the one lock of the file) or row locks (PostgreSQL). Waiting there for the
writer's batch that holds the request's pending row deadlocks on SQLite: the batch needs the very lock the
handler holds. So a claim on a record of the batch in flight decides at once, in the handler's thread, under
one thread lock shared with the writer's thread (:class:`InFlight`):

- the batch committed already (its pks are *landed*): the handler's transaction moves that row to answered;
- it did not: the record is *taken*: the handler's transaction inserts the answered row itself, and the
  batch, which checks the taken records just before its commit, deletes its own pending row of it in its own
  transaction (never committed). A handler whose transaction rolls back leaves the request without a row
  until its settlement is written (as a final row, by the writer).

The writer's thread holds the lock only across that check, its ``DELETE`` of its own uncommitted rows and its
``COMMIT``; the handler's thread only across a dictionary look-up. A commit waits on no lock a claiming
handler holds (PostgreSQL: a commit takes no lock; SQLite: the handler's transaction holds the write lock, so
the batch has written nothing yet, or it is in WAL mode, whose commits do not wait for readers).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from ..core.records import LedgerRecord

__all__ = ["InFlight"]


class InFlight:
    """The handshake between claims (handlers' threads) and the batch being written (the writer's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: dict[int, LedgerRecord] = {}
        self._landed: dict[int, object] = {}

    def claim(self, key: int, replica: LedgerRecord) -> object | None:
        """In the handler's thread: the pk of the record's row if its batch has committed it; otherwise
        ``None``, and the record is taken (the caller's transaction inserts ``replica``)."""
        with self._lock:
            pk = self._landed.get(key)
            if pk is None:
                self._taken[key] = replica
            return pk

    @contextlib.contextmanager
    def committing(
        self, written: dict[int, LedgerRecord], discard: Callable[[list[object]], None]
    ) -> Iterator[set[int]]:
        """In the writer's thread, entered inside the batch's transaction and left after its commit: the keys
        of the taken records among ``written`` (key: the record's key; value: the snapshot the batch wrote,
        with its pk), whose rows ``discard`` deletes before the commit; the others land when it is done."""
        with self._lock:
            yielded = {key for key in written if key in self._taken}
            pks = [written[key].pk for key in yielded if written[key].pk is not None]
            if pks:
                discard(pks)
            yield yielded  # the caller's transaction commits here, with the lock held
            for key, snapshot in written.items():
                if key not in yielded and snapshot.pk is not None:
                    self._landed[key] = snapshot.pk

    # The event loop's two calls take no lock: a batch may hold it across a COMMIT, which the loop must not
    # wait for. Their keys are of records no batch is writing, which the writer's thread never looks up at
    # the same time, and one dictionary operation is atomic.

    def forget(self, keys: set[int], *, keep: set[int] | frozenset[int] = frozenset()) -> None:
        """On the event loop, once their batch is done: drop what is known of ``keys`` but ``keep`` (records
        a claim still has to decide on)."""
        for key in keys - keep:
            self._landed.pop(key, None)

    def release(self, key: int) -> LedgerRecord | None:
        """On the event loop, once the request is settled and no batch holds its record: forget it; the
        answered row its handler inserted, if it took the record."""
        self._landed.pop(key, None)
        return self._taken.pop(key, None)
