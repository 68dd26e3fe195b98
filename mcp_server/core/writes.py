"""Write transactions that take SQLite's write lock when they begin (``BEGIN IMMEDIATE``).

SQLite lets one connection write at a time. A transaction that reads first and writes after (``BEGIN``
deferred, as Django's default options do) cannot wait for the lock once another connection holds it:
SQLite answers ``database is locked`` at once, whatever the ``timeout``. The ledger writer's thread writes on
a connection of its own, so a write tool's transaction in deferred mode would fail whenever a batch is being
written. Taken at ``BEGIN``, the lock is waited for (up to the connection's ``timeout``) instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction

__all__ = ["begin_write", "write_transaction"]


@contextlib.contextmanager
def begin_write(connection: Any) -> Iterator[None]:
    """While it is open, an outermost ``atomic`` block on ``connection`` (SQLite) begins ``IMMEDIATE``
    (``EXCLUSIVE`` stays so). Other databases, and a block nested in a transaction, are left as they are."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
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
