"""The ledger interface: one record per request, from arrival until it is settled.

The worker that holds a request decides its settlement in memory and records it here, in batches
(:meth:`Ledger.write_batch`, called by :class:`~mcp_server.runtime.writer.LedgerWriter`): a request settled
before its batch is written becomes one final record, a longer one a pending record and then its settlement.
``asettle`` is the compare-and-set from ``pending`` that decides only where no live worker holds the request
(the orphans of a dead worker): of any number of concurrent callers, in any process, exactly one wins.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async

from ..wire.jsonrpc import MAX_METHOD_LENGTH
from .states import State

__all__ = [
    "CLIENT_LENGTH",
    "KEY_LENGTH",
    "NAME_LENGTH",
    "OAUTH_CLIENT_LENGTH",
    "DuplicateRequest",
    "Ledger",
    "LedgerRecord",
    "id_of_key",
    "long_id_of",
    "make_storable",
    "request_key",
    "storable",
    "storable_outcome",
]

NAME_LENGTH = 300
"""What the ledger keeps of the tool, prompt or resource a request names (characters)."""
CLIENT_LENGTH = 200
"""Characters of ``"name version"`` the ledger keeps of a client."""
OAUTH_CLIENT_LENGTH = 255
"""Characters the ledger keeps of an OAuth client's id (a CIMD URL) and of its name."""


KEY_LENGTH = 200
"""Characters of the ledger's ``request_key`` column."""
_PREFIX = KEY_LENGTH - len("h:") - 64 - len(":")


def request_key(request_id: str | int) -> str:
    """The stored form of a JSON-RPC id: ``1`` and ``"1"`` stay distinct.

    A string id whose key would not fit :data:`KEY_LENGTH` (JSON-RPC lets an id be any string) is keyed
    ``h:<SHA-256 of its key>:<its first characters>``: distinct ids keep distinct keys (the uniqueness of a
    session's pending ids holds for them as for short ones), the prefix shows and searches in the admin, and
    the whole id is kept beside it (:attr:`LedgerRecord.long_id`). Short ids are not hashed.
    """
    key = f"i:{request_id}" if isinstance(request_id, int) else f"s:{request_id}"
    if len(key) <= KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"h:{digest}:{key[2 : 2 + _PREFIX]}"


def long_id_of(request_id: str | int, key: str) -> str:
    """The id a hashed ``key`` stands for (``""`` for a key that holds its id)."""
    return str(request_id) if key.startswith("h:") else ""


def storable(text: str, limit: int) -> str:
    """``text`` as every ledger backend can hold it: at most ``limit`` characters, each NUL character and
    lone UTF-16 surrogate replaced by U+FFFD (PostgreSQL's text columns refuse both, SQLite the latter).

    For what the client named (a tool, a prompt, a URI) and what an error said: the record shows it, the
    request is not refused for it.
    """
    text = text[:limit]
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def storable_outcome(outcome: dict[str, Any] | None, limit: int = 500) -> dict[str, Any] | None:
    """An outcome (``{"result": true}`` or ``{"error": {"code", "message"}}``) every backend can hold."""
    if outcome is None or "error" not in outcome:
        return outcome
    error = outcome["error"] if isinstance(outcome["error"], dict) else {}
    code = error.get("code")
    return {
        "error": {
            "code": code if isinstance(code, int) and not isinstance(code, bool) else None,
            "message": storable(str(error.get("message", "")), limit),
        }
    }


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
    worker: str = ""
    channel: str = ""
    created: datetime | None = None
    deadline: datetime | None = None
    lease_expires: datetime | None = None
    state: str = State.PENDING
    settled_at: datetime | None = None
    outcome: dict[str, Any] | None = None
    round_of: str = ""
    """2026-07-28: the token of the ``input_required`` round this retry answers (its ``outcome["round"]``)."""
    pk: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    protocol_version: str = ""
    """The MCP revision the request was served at (a 2026-07-28 request has no session)."""
    client: str = ""
    """``"name version"`` of the client that sent it (at 2026-07-28 from the request's own ``clientInfo``)."""
    long_id: str = ""
    """The whole id of a request keyed by its hash (see :func:`request_key`), else ``""``."""
    oauth_client_id: str = ""
    """The OAuth client whose access token authenticated the request (``""``: none), as the user is
    recorded: a plain value read off the authentication result the request already carries."""
    oauth_client_name: str = ""
    """That client's registered name."""

    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id, with its original type."""
        return id_of_key(self.request_key, self.long_id)


def id_of_key(key: str, long_id: str = "") -> str | int:
    """The JSON-RPC id a stored ``key`` names (``long_id``: the whole id of a hashed key)."""
    kind, _, raw = key.partition(":")
    if kind == "h":
        return long_id or raw.partition(":")[2]
    return int(raw) if kind == "i" else raw


def make_storable(record: LedgerRecord) -> None:
    """Make every text field of ``record`` but its identity (session, request id) storable, in place."""
    record.method = storable(record.method, MAX_METHOD_LENGTH)
    record.name = storable(record.name, NAME_LENGTH)
    record.worker = storable(record.worker, 200)
    record.channel = storable(record.channel, 200)
    record.protocol_version = storable(record.protocol_version, 20)
    record.client = storable(record.client, CLIENT_LENGTH)
    record.oauth_client_id = storable(record.oauth_client_id, OAUTH_CLIENT_LENGTH)
    record.oauth_client_name = storable(record.oauth_client_name, OAUTH_CLIENT_LENGTH)
    record.outcome = storable_outcome(record.outcome)


class Ledger(ABC):
    """Storage for request records, shared by every worker process. Chosen by ``LEDGER_BACKEND``."""

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
