"""The ledger of input rounds: an ``input_required`` answer is a settled answer, recorded as such; the retry
is a new entry linked to the round it answers (``round_of``).

Requests go the transports' way in (``start_request`` on a real ``Runtime``: the request table, the ledger
writer, the database ledger), with a 2026 ``SessionState`` as the modern transports build it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client
from django.utils import timezone

from mcp_server.core.context import Context, SessionState
from mcp_server.core.records import LedgerRecord
from mcp_server.core.rounds import round_token
from mcp_server.core.states import State
from mcp_server.models import LedgerEntry
from mcp_server.protocol.serving import start_request
from mcp_server.protocol.settlement import PendingRequest, outcome_of
from mcp_server.registry.server import MCPServer
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.jsonrpc import JSONRPCRequest
from tests.support.peers import RecordingPeer
from tests.support.wait import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"
CAPS: dict[str, Any] = {"elicitation": {}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}

server = MCPServer("rounds-ledger")


@server.tool
async def ask_name(ctx: Context) -> str:
    """Asks the user's name."""
    answer = await ctx.elicit("Name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {answer['content']['name']}!"


async def send(runtime: Runtime, request_id: int, params: dict[str, Any]) -> dict[str, Any]:
    """One modern ``tools/call`` in through the request table; returns the response it was settled with."""
    delivered: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        delivered.set_result(response)

    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": CAPS,
    }
    message = JSONRPCRequest(
        jsonrpc="2.0", id=request_id, method="tools/call", params={**params, "_meta": meta}
    )
    session = SessionState(id=None, protocol_version=MODERN, client_capabilities=CAPS)
    await start_request(
        runtime, message, server=server, session=session, peer=RecordingPeer(), deliver=deliver
    )
    async with asyncio.timeout(5):
        response = await delivered
    assert response is not None
    return response


async def settled_rows(runtime: Runtime, count: int) -> list[LedgerEntry]:
    """The ``tools/call`` entries, once ``count`` of them are settled in the database (the writer's thread
    has its own connection: a read here may see its last write a moment later)."""
    await runtime.writer.flush()
    entries = LedgerEntry.objects.filter(method="tools/call")

    async def settled() -> bool:
        return await entries.exclude(state=LedgerEntry.State.PENDING).acount() == count

    await wait_for(settled, within=5)
    return [row async for row in entries.order_by("created", "pk")]


async def test_a_round_is_answered_and_its_retry_links_to_it() -> None:
    runtime = Runtime(flush_interval=0)
    params = {"name": "ask_name", "arguments": {}}
    first = (await send(runtime, 1, params))["result"]
    state = first["requestState"]
    retry = {**params, "inputResponses": {"user_name": ALICE}, "requestState": state}
    done = (await send(runtime, 2, retry))["result"]
    assert done["content"][0]["text"] == "Hello, Alice!"
    round_row, retry_row = await settled_rows(runtime, 2)
    assert round_row.state == retry_row.state == LedgerEntry.State.ANSWERED  # each answered exactly once
    assert round_row.outcome == {"result": True, "resultType": "input_required", "round": round_token(state)}
    assert round_row.round_of == ""
    assert retry_row.round_of == round_token(state)
    assert retry_row.outcome == {"result": True}


async def test_a_refused_state_links_to_nothing() -> None:
    runtime = Runtime(flush_interval=0)
    params = {"name": "ask_name", "arguments": {}}
    state = (await send(runtime, 1, params))["result"]["requestState"]
    refused = await send(runtime, 2, {**params, "requestState": state + "-TAMPERED"})
    assert refused["error"]["code"] == -32602
    _round_row, refused_row = await settled_rows(runtime, 2)
    assert refused_row.round_of == ""
    assert refused_row.outcome == {"error": {"code": -32602, "message": refused["error"]["message"]}}


def test_the_outcome_of_a_complete_result_is_unchanged() -> None:
    assert outcome_of({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}}) == {
        "result": True
    }


def test_the_admin_finds_the_retry_of_a_round_by_its_token(admin_client: Client) -> None:
    now = timezone.now()
    common = {"method": "tools/call", "worker": "w", "created": now, "state": "answered", "settled_at": now}
    LedgerEntry.objects.create(request_key="i:1", outcome=ROUND_OUTCOME, **common)
    LedgerEntry.objects.create(request_key="i:2", round_of="abc123", outcome={"result": True}, **common)
    LedgerEntry.objects.create(request_key="i:3", outcome={"result": True}, **common)
    response = admin_client.get("/admin/mcp_server/ledgerentry/", {"q": "abc123"})
    assert response.status_code == 200
    assert [entry.request_id for entry in response.context["cl"].result_list] == [2]


ROUND_OUTCOME = {"result": True, "resultType": "input_required", "round": "abc123"}


@pytest.mark.parametrize("backend", ["database", "cache"])
async def test_both_ledger_backends_keep_the_link(backend: str) -> None:
    caches["default"].clear()
    ledger = (
        DatabaseLedger({}) if backend == "database" else CacheLedger({"RETENTION": 60, "LEASE_TIMEOUT": 1})
    )
    now = timezone.now()
    pending = LedgerRecord(
        session_id=None, request_key="i:5", method="tools/call", round_of="abc", created=now
    )
    settled = LedgerRecord(
        session_id=None, request_key="i:6", method="tools/call", round_of="def", created=now
    )
    settled.state, settled.outcome, settled.settled_at = State.ANSWERED, ROUND_OUTCOME, now
    await ledger.awrite_batch([pending, settled], [])
    stored = [await ledger.aget(pending), await ledger.aget(settled)]
    assert [(r.round_of, r.outcome) for r in stored if r is not None] == [
        ("abc", None),
        ("def", ROUND_OUTCOME),
    ]
