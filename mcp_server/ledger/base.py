"""The ledger interface: one record per request, from arrival until it is settled.

``asettle`` is a compare-and-set from ``pending``: of any number of concurrent callers, in any process,
exactly one gets ``True``. That caller, and only that caller, delivers the request's reply.
"""

from __future__ import annotations

import os
import socket
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync

from .states import State

__all__ = ["WORKER_ID", "DuplicateRequest", "Ledger", "LedgerRecord", "request_key"]

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
"""This process's identity in the ledger (its leases carry it)."""


def request_key(request_id: str | int) -> str:
    """The stored form of a JSON-RPC id: ``1`` and ``"1"`` stay distinct."""
    return f"i:{request_id}" if isinstance(request_id, int) else f"s:{request_id}"


class DuplicateRequest(Exception):
    """A request id already pending in the same session."""


@dataclass
class LedgerRecord:
    """One request as the ledger knows it."""

    session_id: str | None
    request_key: str
    method: str
    name: str = ""
    user_id: int | None = None
    worker: str = WORKER_ID
    channel: str = ""
    created: datetime | None = None
    deadline: datetime | None = None
    lease_expires: datetime | None = None
    state: str = State.PENDING
    settled_at: datetime | None = None
    outcome: dict[str, Any] | None = None
    pk: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id, with its original type."""
        kind, _, raw = self.request_key.partition(":")
        return int(raw) if kind == "i" else raw


class Ledger(ABC):
    """Storage for request records, shared by every worker process. Chosen by ``LEDGER_BACKEND``."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}

    @abstractmethod
    async def aopen(self, record: LedgerRecord) -> LedgerRecord:
        """Store a pending record (sets ``pk``); raise :class:`DuplicateRequest` for a pending duplicate."""

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
    async def arenew_leases(self, worker: str, until: datetime) -> int:
        """Extend the lease of every pending record ``worker`` holds."""

    @abstractmethod
    async def aexpired(self, now: datetime, *, limit: int = 500) -> list[LedgerRecord]:
        """Pending records whose lease ran out (their worker died)."""

    @abstractmethod
    async def aprune(self, settled_before: datetime) -> int:
        """Delete records settled before ``settled_before``; returns how many."""

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
