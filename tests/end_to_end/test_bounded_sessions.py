"""I12 over real servers: a worker's upkeep ends idle sessions (answering their in-flight requests -32000) and
deletes them; an ``initialize`` over ``MAX_CLIENT_METADATA_BYTES`` is answered -32602 and opens nothing;
one over ``MAX_SESSIONS_PER_CLIENT`` gets 429, which the official client reports with our message."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from typing import Any

import httpx
import pytest

from mcp_server.sessions import EXPIRED_REASON
from mcp_server.wire.errors import INVALID_PARAMS
from tests.support.live import LiveServer
from tests.support.raw import error_of, initialize, mcp_headers, open_session, rpc
from tests.support.sessions import backdate, database_file
from tests.support.wait import wait_for


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0) as client:
        yield client


@pytest.fixture(scope="module")
def capped_server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"MAX_SESSIONS_PER_CLIENT": 3, "MAX_CLIENT_METADATA_BYTES": 2048})


async def test_an_initialize_over_the_metadata_bound_is_answered_minus_32602_and_opens_nothing(
    http: httpx.AsyncClient, capped_server: LiveServer
) -> None:
    response = await initialize(
        http, capped_server.url, capabilities={"experimental": {"x": {"y": "z" * 4096}}}
    )
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    (answer,) = [response.json()]
    assert answer["id"] == 1
    assert answer["error"]["code"] == INVALID_PARAMS
    assert "MAX_CLIENT_METADATA_BYTES" in answer["error"]["message"]


async def test_a_client_over_its_session_quota_gets_429_until_it_ends_one(
    http: httpx.AsyncClient, capped_server: LiveServer
) -> None:
    for session_id in session_ids(capped_server):  # other tests' sessions from this address
        await http.delete(capped_server.url, headers=mcp_headers(session_id))
    sessions = [await open_session(http, capped_server.url) for _ in range(3)]
    refused = await initialize(http, capped_server.url)
    assert refused.status_code == 429
    error = error_of(refused)
    assert "Too many open sessions for address 127.0.0.1: 3, at most 3" in error["message"]
    assert "MAX_SESSIONS_PER_CLIENT" in error["message"]
    assert len(session_ids(capped_server)) == 3  # nothing stored for the refused one
    assert (await sessions[0].delete()).status_code == 200
    again = await open_session(http, capped_server.url)
    assert (await again.request("ping"))["result"] == {}


def session_ids(server: LiveServer) -> list[str]:
    with closing(sqlite3.connect(database_file(server), timeout=30)) as db:
        rows = db.execute("SELECT id FROM mcp_server_session WHERE ended_at IS NULL").fetchall()
    return [row[0] for row in rows]


@pytest.fixture(scope="module")
def sweeping_server(start: Callable[..., LiveServer]) -> LiveServer:
    """Upkeep every 0.2 s (a third of LEASE_TIMEOUT), ended sessions pruned at once."""
    return start({"LEASE_TIMEOUT": 0.6, "SESSION_IDLE_TIMEOUT": 60.0, "SESSION_RETENTION": 0})


def row_of(server: LiveServer, session_id: str) -> dict[str, Any] | None:
    with closing(sqlite3.connect(database_file(server), timeout=30)) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM mcp_server_session WHERE id = ?", (session_id,)).fetchone()
    return dict(row) if row is not None else None


async def test_a_worker_expires_and_prunes_sessions_in_the_background(
    http: httpx.AsyncClient, sweeping_server: LiveServer
) -> None:
    """No request comes back for the idle session: the worker's upkeep ends it (its in-flight request
    answered -32000, its ledger row closed) and then deletes it."""
    idle = await open_session(http, sweeping_server.url)
    busy = await open_session(http, sweeping_server.url)
    call = asyncio.ensure_future(idle.call_tool("slow", {"seconds": 60}, request_id=77))
    await idle.wait_pending(77)
    backdate(sweeping_server, idle.id, 3600)
    answer = await asyncio.wait_for(call, 30)
    assert answer["error"] == {"code": -32000, "message": f"Connection closed: {EXPIRED_REASON}"}

    async def gone() -> bool:
        return row_of(sweeping_server, idle.id) is None

    await wait_for(gone, within=30)
    assert (await idle.post(rpc("ping"))).status_code == 404
    assert (await busy.request("ping"))["result"] == {}  # the other session is left alone
    with closing(sqlite3.connect(database_file(sweeping_server), timeout=30)) as db:
        left = db.execute(
            "SELECT COUNT(*) FROM mcp_server_ledgerentry WHERE session_id = ?", (idle.id,)
        ).fetchone()
    assert left == (0,)


async def test_the_official_client_reads_the_refusals(start: Callable[..., LiveServer]) -> None:
    """What an MCP client shows its user: our message, from the JSON-RPC error in the 429's body."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    server = start({"MAX_SESSIONS_PER_CLIENT": 1})
    async with Client(server.url, mode="legacy") as first:
        assert (await first.call_tool("echo", {"text": "one"})).content[0].text == "one"
        with pytest.raises(BaseExceptionGroup) as refused:  # the client's task group carries it
            async with Client(server.url, mode="legacy"):
                pass
        assert refused.group_contains(
            MCPError, match="Too many open sessions for address 127.0.0.1: 1, at most 1"
        )
