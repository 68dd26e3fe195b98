"""Operator actions across worker processes: the admin on one worker, the request held by another.

Two Daphne workers share PostgreSQL (sessions, ledger, admin log) and Redis (channel layer, cache). The
abort or session end is decided in a sync admin view on worker B; the settle path's channel-layer message
delivers the one reply through worker A, which holds the client's POST.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from mcp_server.wire.errors import CONNECTION_CLOSED, REQUEST_ABORTED
from tests.support.admin import admin_client, create_superuser, run_action
from tests.support.live import LiveServer, require_services, two_workers
from tests.support.raw import messages_of, open_session, rpc
from tests.support.wait import wait_for

SLOW = {"name": "slow", "arguments": {"seconds": 30}}


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer, str]]:
    """Worker A (JSON responses) and worker B (SSE) of one site, and the site's database URL."""
    require_services()
    with two_workers(tmp_path_factory.mktemp("admin-multiprocess")) as (a, b, database):
        create_superuser(b)
        yield a, b, database


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30.0) as client:
        yield client


def rows(database: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(database, row_factory=dict_row) as db:
        return list(db.execute(sql, params).fetchall())


def entry(database: str, session_id: str, request_id: int) -> dict[str, Any]:
    found = rows(
        database,
        "SELECT * FROM mcp_server_ledgerentry WHERE session_id = %s AND request_key = %s ORDER BY id DESC",
        session_id,
        f"i:{request_id}",
    )
    assert found, f"request {request_id} is not in the ledger"
    return found[0]


async def _stored(database: str, session_id: str, request_id: int) -> bool:
    sql = "SELECT 1 FROM mcp_server_ledgerentry WHERE session_id = %s AND request_key = %s"
    return bool(rows(database, sql, session_id, f"i:{request_id}"))


async def settled(database: str, session_id: str, request_id: int) -> dict[str, Any]:
    """The ledger row of a request once it has left ``pending``.

    The worker that settled it records it behind the answer (``LEDGER_FLUSH_INTERVAL``), so the row is
    waited for, not read once.
    """

    async def recorded() -> bool:
        return bool(entry(database, session_id, request_id)["state"] != "pending")

    await wait_for(recorded)
    return entry(database, session_id, request_id)


async def test_abort_on_worker_b_answers_the_request_held_by_worker_a(
    workers: tuple[LiveServer, LiveServer, str], http: httpx.AsyncClient
) -> None:
    a, b, database = workers
    session = await open_session(http, a.url)
    call = asyncio.create_task(session.post(rpc("tools/call", SLOW, 5)))
    await session.wait_pending(5)
    await wait_for(lambda: _stored(database, session.id, 5))  # its pending row is written behind it
    pk = entry(database, session.id, 5)["id"]
    assert entry(database, session.id, 5)["channel"], "worker A must name the channel that holds the request"

    admin = await admin_client(b.base)
    try:
        assert (await run_action(admin, "ledgerentry", "abort_requests", [pk])).status_code == 302
    finally:
        await admin.aclose()

    response = await asyncio.wait_for(call, 5)  # the handler would sleep 30 s: only B's message ends it now
    assert response.status_code == 200
    assert messages_of(response) == [
        {
            "jsonrpc": "2.0",
            "id": 5,
            "error": {"code": REQUEST_ABORTED, "message": "Request aborted by an operator"},
        }
    ]
    assert (await settled(database, session.id, 5))["state"] == "aborted"
    log = rows(database, "SELECT * FROM django_admin_log WHERE object_id = %s", str(pk))
    assert len(log) == 1
    assert (await session.call_tool("echo", {"text": "on"}))["result"]["content"][0]["text"] == "on"


async def test_end_session_on_worker_b_closes_requests_held_by_worker_a(
    workers: tuple[LiveServer, LiveServer, str], http: httpx.AsyncClient
) -> None:
    a, b, database = workers
    session = await open_session(http, a.url)
    call = asyncio.create_task(session.post(rpc("tools/call", SLOW, 6)))
    await session.wait_pending(6)

    admin = await admin_client(b.base)
    try:
        assert (await run_action(admin, "session", "end_sessions", [session.id])).status_code == 302
    finally:
        await admin.aclose()

    response = await asyncio.wait_for(call, 5)
    closed = {"code": CONNECTION_CLOSED, "message": "Connection closed: session ended by an operator"}
    assert messages_of(response) == [{"jsonrpc": "2.0", "id": 6, "error": closed}]
    assert (await settled(database, session.id, 6))["state"] == "closed"
    for worker in (a, b):
        later = await http.post(worker.url, json=rpc("ping", None, 7), headers=session.headers())
        assert later.status_code == 404, worker
    log = rows(database, "SELECT * FROM django_admin_log WHERE object_id = %s", session.id)
    assert len(log) == 1
