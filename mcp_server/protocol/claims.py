"""A handler's claim on its request's answer (``Context.claim_answer``): what makes a write cancel-safe.

A write tool's changes and its request's settlement must agree: a change committed while the request is
recorded cancelled, closed or timed out (its reply lost) is what this prevents. The handler claims the answer
inside its transaction, just before the commit:

- in this process, the request table stops every other way the request could end (a cancel, the end of its
  session, an operator's abort, shutdown) and the deadline is disarmed, or, when one of them came first, the
  claim raises :class:`~mcp_server.wire.errors.RequestSettled` and the transaction rolls back;
- with the database ledger on the transaction's database, the request's record is written as answered in that
  very transaction, so that a worker killed at the commit leaves both or neither (a survivor settling the
  request as an orphan finds it answered, or finds it pending and the change rolled back).
"""

from __future__ import annotations

import weakref

from ..core.context import Context
from ..wire.errors import RequestSettled
from .interfaces import PendingRequests
from .settlement import PendingRequest

__all__ = ["RequestClaim"]


class RequestClaim:
    """The :class:`~mcp_server.core.context.AnswerClaim` of one request held in a request table."""

    __slots__ = ("ctx", "entry", "joined", "table")

    def __init__(self, table: PendingRequests, entry: PendingRequest, ctx: Context) -> None:
        self.table = table
        self.entry = entry
        self.ctx = weakref.ref(ctx)
        """Weak: the context holds its claim, and a cycle would keep the request (its params, its Django
        request and body) until a full garbage collection rather than freeing it when it is answered."""
        self.joined: str | None = None
        """The database whose transaction records the answer (once the claim is confirmed there)."""

    async def reserve(self, using: str | None) -> None:
        """Claim the answer in this process; see whether the ledger can join a transaction on ``using``."""
        if self.entry.claimed:
            return
        ctx = self.ctx()
        deadline = ctx.deadline if ctx is not None else None
        if deadline is not None and deadline.expired():  # the timeout fired: its answer is on its way
            raise RequestSettled("timed_out")
        self.table.claim(self.entry)
        if deadline is not None:
            deadline.reschedule(None)
        if using is not None and await self.table.sink.adopt(self.entry.record, using):
            self.joined = using

    def confirm(self, using: str) -> None:
        """Record the answer in the caller's transaction, where :meth:`reserve` found the ledger can."""
        if self.joined != using:
            return
        self.joined = None  # once: a second claim in the same transaction has nothing left to do
        if not self.table.sink.answer_within(self.entry.record, using):
            raise RequestSettled("settled by another worker")
