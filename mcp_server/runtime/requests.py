"""This process's requests in flight: the table that holds each one from its arrival until it is settled.

:class:`RequestTable` is the per-process state of the settlement (:mod:`mcp_server.protocol.settlement`
says what a settlement is). The worker that holds a request's exchange (the HTTP POST waiting for it, or the
stdio loop) decides its settlement here, in memory: :meth:`RequestTable.settle` is a compare-and-set on the
entry's state, and only the caller that moves it from ``pending`` takes it out of the table and delivers a
reply (or, for a cancel, none). Every way a request can end goes through it: its answer, a deadline, the
client's cancel, the session's end, an operator's abort, shutdown. The ledger records each settlement
behind the request path (the table's ``sink``, :class:`~mcp_server.runtime.writer.LedgerWriter`).

Protocol code is handed the table as :class:`~mcp_server.protocol.interfaces.PendingRequests` (what
``serving``, ``claims`` and the 2026-07-28 refusals use of it), never as this class.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from functools import lru_cache
from typing import Any, NoReturn

from ..conf import now as clock_now
from ..core.records import (
    CLIENT_LENGTH,
    NAME_LENGTH,
    OAUTH_CLIENT_LENGTH,
    DuplicateRequest,
    LedgerRecord,
    long_id_of,
    request_key,
    storable,
)
from ..core.stores import StoreUnavailable
from ..protocol.settlement import (
    ANSWERED,
    CANCELLED,
    CLOSED,
    PENDING,
    TIMED_OUT,
    Deliver,
    PendingRequest,
    RecordSink,
    closed_response,
    outcome_of,
)
from ..telemetry import RequestTelemetry, load_telemetry
from ..wire.errors import INVALID_REQUEST, JSONRPCError, RequestSettled
from ..wire.jsonrpc import MAX_METHOD_LENGTH, RequestId, encode_reply, error_response, id_problem

__all__ = ["EARLY_CANCEL_LIMIT", "EARLY_CANCEL_WINDOW", "RequestTable"]


@lru_cache(maxsize=64)
def _seconds(seconds: float) -> timedelta:
    """``timedelta(seconds=seconds)``, made once per value (a request's deadline and lease are the same few
    settings on every request; making one from a float costs ~3,000 instructions)."""
    return timedelta(seconds=seconds)


logger = logging.getLogger("mcp_server.requests")

EARLY_CANCEL_WINDOW = 30.0
"""Seconds a cancel for an id not (yet) known here is remembered: its request may still arrive (I9)."""

EARLY_CANCEL_LIMIT = 10_000
"""At most this many early cancels are remembered per process (oldest forgotten first)."""


async def _answered_by_caller(entry: PendingRequest, response: dict[str, Any] | None) -> None:
    """The delivery of a request refused while being opened: its caller answers the error it raised."""


class RequestTable:
    """This process's pending requests; settles each exactly once and records it in ``sink``."""

    def __init__(
        self,
        sink: RecordSink,
        *,
        worker_id: str,
        channel: Callable[[], str] = lambda: "",
        on_remembered_cancel: Callable[[str | None, str], Awaitable[None]] | None = None,
    ) -> None:
        self.sink = sink
        self.on_remembered_cancel = on_remembered_cancel
        """Called when a remembered cancel (I9) settled its request: other workers may forget theirs."""
        self.worker_id = worker_id
        self._channel = channel
        self._entries: dict[tuple[str | None, str], PendingRequest] = {}
        self._stateless: set[PendingRequest] = set()
        self._early_cancels: OrderedDict[tuple[str | None, str], float] = OrderedDict()
        self.telemetry: RequestTelemetry | None = load_telemetry()
        """Spans and metrics of the requests (``None``: neither OpenTelemetry nor prometheus_client is
        installed, or ``TELEMETRY`` is off)."""

    def __len__(self) -> int:
        return len(self._entries) + len(self._stateless)

    def pending(self, session_id: str | None = None) -> list[PendingRequest]:
        """Pending requests held here, of one session or all."""
        entries = [*self._entries.values(), *self._stateless]
        return [e for e in entries if session_id is None or e.session_id == session_id]

    def get(self, session_id: str | None, key: str, pk: Any = None) -> PendingRequest | None:
        """The pending request with that session and stored id, if held here. A sessionless request is
        named by its ledger key ``pk`` as well: several clients may use the same id."""
        if session_id is None:
            if pk is None:  # not stored yet (the ledger is written behind): nobody can name it
                return None
            return next((e for e in self._stateless if e.record.pk == pk and e.key[1] == key), None)
        return self._entries.get((session_id, key))

    def _record(
        self,
        session_id: str | None,
        request_id: RequestId,
        method: str,
        *,
        name: str,
        user_id: int | None,
        seconds: float | None,
        lease: float,
        protocol_version: str,
        round_of: str,
        client: str,
        oauth_client: tuple[str, str],
    ) -> LedgerRecord:
        """The ledger record of an arriving request, each text cut to what its column holds. Raises -32600 for
        an id pending in the same session, or one no request may have."""
        if (problem := id_problem(request_id)) is not None:
            raise JSONRPCError(INVALID_REQUEST, f"Invalid request: {problem}")
        key = request_key(request_id)
        if session_id is not None and (session_id, key) in self._entries:
            raise _duplicate(request_id)
        now = clock_now()
        return LedgerRecord(
            session_id=session_id,
            request_key=key,
            method=storable(method, MAX_METHOD_LENGTH),
            name=storable(name, NAME_LENGTH),
            user_id=user_id,
            worker=self.worker_id,
            channel=self._channel(),
            created=now,
            deadline=now + _seconds(seconds) if seconds else None,
            lease_expires=now + _seconds(lease),
            protocol_version=protocol_version,
            round_of=round_of,
            client=storable(client, CLIENT_LENGTH),
            long_id=long_id_of(request_id, key),
            oauth_client_id=storable(oauth_client[0], OAUTH_CLIENT_LENGTH),
            oauth_client_name=storable(oauth_client[1], OAUTH_CLIENT_LENGTH),
        )

    async def open(
        self,
        session_id: str | None,
        request_id: RequestId,
        method: str,
        deliver: Deliver,
        *,
        name: str = "",
        user_id: int | None = None,
        seconds: float | None = None,
        lease: float = 30.0,
        protocol_version: str = "",
        round_of: str = "",
        client: str = "",
        oauth_client: tuple[str, str] = ("", ""),
        params: dict[str, Any] | None = None,
        transport: str = "http",
        headers: Mapping[str, Any] | None = None,
    ) -> PendingRequest:
        """Take an arriving request. Raises -32600 for an id pending in the same session, or one no
        request may have (see :func:`~mcp_server.wire.jsonrpc.id_problem`; the transports refuse it first).

        A request whose cancel arrived first (I9) is settled as cancelled at once: it never runs.
        ``round_of`` links a retry to the ``input_required`` round it answers (2026-07-28).
        ``oauth_client``: ``(client_id, name)`` of the OAuth client that sent it
        (:func:`~mcp_server.auth.base.oauth_client_of`). Its span starts from ``params`` (``_meta``),
        ``transport`` (``"http"`` or ``"stdio"``) and ``headers`` (the HTTP request's ``META``).
        """
        record = self._record(
            session_id,
            request_id,
            method,
            name=name,
            user_id=user_id,
            seconds=seconds,
            lease=lease,
            protocol_version=protocol_version,
            round_of=round_of,
            client=client,
            oauth_client=oauth_client,
        )
        entry = PendingRequest(record=record, request_id=request_id, deliver=deliver)
        if self.telemetry is not None:
            entry.span = span = self.telemetry.start(record, request_id, params, transport, headers)
            if span is not None:  # the ledger row names the span (the admin links its trace)
                record.trace_id, record.span_id = span.trace_id, span.span_id
        try:
            await self.sink.opened(record)
        except (DuplicateRequest, StoreUnavailable) as exc:
            await self._not_opened(entry, exc)
        if session_id is None:
            self._stateless.add(entry)
        else:
            self._entries[entry.key] = entry
        if self._take_early_cancel(session_id, record.request_key) and method != "initialize":
            await self.settle(entry, CANCELLED, None)
            if self.on_remembered_cancel is not None:
                await self.on_remembered_cancel(session_id, record.request_key)
        return entry

    async def _not_opened(self, entry: PendingRequest, exc: DuplicateRequest | StoreUnavailable) -> NoReturn:
        """The sink refused an arriving request: pending at another worker (written through: -32600), or
        its store did not answer (the caller answers that error; the write may still land: it is settled)."""
        request_id = entry.request_id
        if isinstance(exc, DuplicateRequest):
            if entry.span is not None:
                entry.span.end(ANSWERED, error_response(request_id, _duplicate(request_id)))
            raise _duplicate(request_id) from None
        refused = PendingRequest(record=entry.record, request_id=request_id, deliver=_answered_by_caller)
        refused.span = entry.span
        await self.settle(refused, ANSWERED, error_response(request_id, exc))
        raise exc

    async def settle(self, entry: PendingRequest, state: str, response: dict[str, Any] | None) -> bool:
        """Settle ``entry``: ``True`` for the one caller that moves it from pending (it delivers).

        The response is encoded here, once (``entry.reply``): one that JSON cannot carry is replaced by the
        error :func:`~mcp_server.wire.jsonrpc.encode_reply` makes of it, and that is what is both delivered
        and recorded.
        """
        if entry.state != PENDING or (entry.claimed and asyncio.current_task() is not entry.task):
            return False
        entry.state = state
        if response is not None:
            entry.reply = encode_reply(response)
            if entry.reply.message is not response:
                logger.warning(
                    "the response to %r (%s) could not be sent as JSON; answered: %s",
                    entry.request_id,
                    entry.method,
                    entry.reply.message["error"]["message"],
                )
                response = entry.reply.message
        if entry.session_id is None:
            self._stateless.discard(entry)
        elif self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        if (
            state not in (ANSWERED, TIMED_OUT)
            and entry.task is not None
            and entry.task is not asyncio.current_task()
        ):
            entry.task.cancel()
        record = entry.record
        record.outcome = outcome_of(response)
        record.settled_at = clock_now()
        record.state = state
        try:
            await entry.deliver(entry, response)
        finally:
            if entry.span is not None:
                entry.span.end(state, response)
            try:
                await self.sink.settled(record)
            except Exception:  # the reply went out; the record converges when the store answers
                logger.exception("could not record the settlement of %r", entry.request_id)
        return True

    def claim(self, entry: PendingRequest) -> None:
        """The handler claims the request's answer before its writes commit: from now on, a cancel, the end
        of the session, an operator's abort or shutdown no longer settle it; its own task does, with the
        handler's result. Raises :class:`RequestSettled` if one of them did already."""
        if entry.state != PENDING:
            raise RequestSettled(entry.state)
        entry.claimed = True

    async def cancel(self, session_id: str | None, key: str, *, remember: bool = True) -> bool:
        """The client cancelled: stop the request and send nothing for it. ``initialize`` is not cancellable.

        An id not held here is remembered for :data:`EARLY_CANCEL_WINDOW` seconds (``remember``): its request
        may be on its way to this worker.
        """
        entry = self._entries.get((session_id, key))
        if entry is None:
            if remember and session_id is not None:
                self._remember_early_cancel(session_id, key)
            return False
        return entry.method != "initialize" and await self.settle(entry, CANCELLED, None)

    async def close_session(self, session_id: str, reason: str) -> int:
        """Answer every request of the session held here with -32000 ``Connection closed: <reason>``."""
        closed = 0
        for entry in self.pending(session_id):
            closed += await self.settle(entry, CLOSED, closed_response(entry.request_id, reason))
        if self.telemetry is not None:
            self.telemetry.session_closed(session_id)
        return closed

    async def shutdown(self, reason: str = "server shutting down") -> int:
        """Answer every request held here with -32000 (graceful shutdown)."""
        closed = 0
        for entry in self.pending():
            closed += await self.settle(entry, CLOSED, closed_response(entry.request_id, reason))
        return closed

    async def refuse(self, record: LedgerRecord) -> None:
        """The ledger refused a request as a duplicate of one pending at another worker: answer -32600."""
        for entry in self.pending(record.session_id):
            if entry.record is record:
                refused = error_response(entry.request_id, _duplicate(entry.request_id))
                if await self.settle(entry, ANSWERED, refused) and entry.task is not None:
                    entry.task.cancel()  # it must not go on with its side effects
                return

    def forget_cancel(self, session_id: str | None, key: str) -> None:
        """Another worker settled the request a remembered cancel was for: the id may be used again."""
        self._early_cancels.pop((session_id, key), None)

    # -- cancels that overtake their request (I9) ----------------------------------------------------------

    def _remember_early_cancel(self, session_id: str, key: str) -> None:
        now = time.monotonic()
        self._early_cancels[(session_id, key)] = now + EARLY_CANCEL_WINDOW
        self._early_cancels.move_to_end((session_id, key))
        while self._early_cancels and (
            len(self._early_cancels) > EARLY_CANCEL_LIMIT or next(iter(self._early_cancels.values())) < now
        ):
            self._early_cancels.popitem(last=False)

    def _take_early_cancel(self, session_id: str | None, key: str) -> bool:
        if not self._early_cancels:
            return False
        expires = self._early_cancels.pop((session_id, key), None)
        return expires is not None and expires >= time.monotonic()


def _duplicate(request_id: RequestId) -> JSONRPCError:
    return JSONRPCError(INVALID_REQUEST, f"Request id {request_id!r} is already in flight in this session")
