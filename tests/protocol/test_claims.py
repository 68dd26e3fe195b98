"""``RequestClaim.reserve`` in process, on a real request table: a claim without a deadline takes the answer,
one whose deadline has passed is refused (its timeout answer is on its way), one under a deadline disarms it.
(Claims against every way a request ends, with writes: tests/protocol/test_write_claims.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_server.core.context import Context, SessionState
from mcp_server.protocol.claims import RequestClaim
from mcp_server.protocol.settlement import PendingRequest
from mcp_server.registry.server import MCPServer
from mcp_server.runtime import Runtime
from mcp_server.wire.errors import RequestSettled
from tests.support.peers import RecordingPeer

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def _nowhere(entry: PendingRequest, response: dict[str, Any] | None) -> None:
    """The request's answer is not sent anywhere in these tests."""


async def claim_of(runtime: Runtime, deadline: asyncio.Timeout | None) -> tuple[RequestClaim, Context]:
    """A claim and its context (the claim holds the context weakly: the caller keeps it, as a handler
    does)."""
    entry = await runtime.requests.open("claims", 1, "tools/call", _nowhere, lease=60.0)
    ctx = Context(
        server=MCPServer("claims"),
        session=SessionState(id="claims", protocol_version="2025-11-25"),
        request_id=1,
        method="tools/call",
        params={},
        peer=RecordingPeer(),
    )
    ctx.deadline = deadline
    ctx.claim = claim = RequestClaim(runtime.requests, entry, ctx)
    return claim, ctx


async def test_a_claim_without_a_deadline_takes_the_answer() -> None:
    claim, _ctx = await claim_of(Runtime(flush_interval=0), None)
    await claim.reserve(None)
    assert claim.entry.claimed


async def test_a_claim_under_a_deadline_disarms_it() -> None:
    async with asyncio.timeout(60) as deadline:
        claim, _ctx = await claim_of(Runtime(flush_interval=0), deadline)
        await claim.reserve(None)
        assert claim.entry.claimed
        assert deadline.when() is None


async def test_a_claim_after_the_deadline_passed_is_refused() -> None:
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout_at(loop.time() - 1) as deadline:  # expired at its first await
            await asyncio.sleep(0)
    claim, _ctx = await claim_of(Runtime(flush_interval=0), deadline)
    assert deadline.expired()
    with pytest.raises(RequestSettled):
        await claim.reserve(None)
    assert not claim.entry.claimed
