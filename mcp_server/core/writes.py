"""Write transactions that take SQLite's write lock when they begin (``BEGIN IMMEDIATE``).

SQLite lets one connection write at a time. A transaction that reads first and writes after (``BEGIN``
deferred, as Django's default options do) cannot wait for the lock once another connection holds it:
SQLite answers ``database is locked`` at once, whatever the ``timeout``. The ledger writer's thread writes on
a connection of its own, so a write tool's transaction in deferred mode would fail whenever a batch is being
written. Taken at ``BEGIN``, the lock is waited for (up to the connection's ``timeout``) instead.

Within one process, writers on the same SQLite file take turns on a thread lock first (:func:`write_turn`),
then ``BEGIN IMMEDIATE``. SQLite's own wait is a busy handler that sleeps and retries (up to 100 ms between
tries), so a lock freed while its waiters sleep stays unused, and under many writers a transaction may wait
longer than its ``timeout`` while others pass it: measured with 200 concurrent write calls, waits of seconds
at ``BEGIN``. The thread lock hands the turn over as soon as it is released, to the threads of this process in
the order they wait. Other processes (other workers, ``manage.py`` commands) still meet at SQLite's lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction

__all__ = ["begin_write", "write_transaction", "write_turn"]

_TURNS: dict[str, threading.Lock] = {}
_TURNS_GUARD = threading.Lock()
DEFAULT_SQLITE_TIMEOUT = 5.0
"""Python's ``sqlite3`` waits 5 s for a lock unless ``OPTIONS["timeout"]`` says otherwise."""


@contextlib.contextmanager
def write_turn(connection: Any) -> Iterator[None]:
    """This process's turn to write to ``connection``'s SQLite file (one writer at a time), waited for at most
    the connection's ``timeout``, as SQLite waits for its lock; then ``database is locked``
    (``OperationalError``), as SQLite answers."""
    name = str(connection.settings_dict["NAME"])
    with _TURNS_GUARD:
        turn = _TURNS.setdefault(name, threading.Lock())
    timeout = (connection.settings_dict.get("OPTIONS") or {}).get("timeout", DEFAULT_SQLITE_TIMEOUT)
    if not turn.acquire(timeout=float(timeout)):
        raise OperationalError("database is locked")
    try:
        yield
    finally:
        turn.release()


@contextlib.contextmanager
def begin_write(connection: Any) -> Iterator[None]:
    """While it is open, an outermost ``atomic`` block on ``connection`` (SQLite) begins ``IMMEDIATE``
    (``EXCLUSIVE`` stays so), in this process's turn to write (:func:`write_turn`), which lasts until the
    block is done. Other databases, and a block nested in a transaction, are left as they are."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    with write_turn(connection):
        connection.ensure_connection()  # a new connection resets its mode from the settings
        mode = connection.transaction_mode
        connection.transaction_mode = "EXCLUSIVE" if mode == "EXCLUSIVE" else "IMMEDIATE"
        try:
            yield
        finally:
            connection.transaction_mode = mode


@contextlib.contextmanager
def write_transaction(using: str | None = None) -> Iterator[None]:
    """``transaction.atomic(using=using)`` that, on SQLite, holds the write lock from its ``BEGIN``."""
    alias = using or DEFAULT_DB_ALIAS
    with begin_write(connections[alias]), transaction.atomic(using=alias):
        yield
