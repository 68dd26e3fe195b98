"""Operator actions in the admin of a real server, on real in-flight requests.

*Abort* answers the request once with -32003 and leaves its session open; *end session* answers its
in-flight requests -32000 and later requests get 404. Each action is in the admin log, and repeating it
changes nothing (the reply guarantee: no request is answered twice).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from mcp_server.wire.errors import CONNECTION_CLOSED, REQUEST_ABORTED
from tests.support.admin import admin_client, admin_log, create_superuser, pending_rows, query, run_action
from tests.support.live import LiveServer
from tests.support.raw import (
    RawSession,
    messages_of,
    open_session,
    rpc,
    sessionless_headers,
    sessionless_meta,
)
from tests.support.wait import wait_for

SLOW = {"name": "slow", "arguments": {"seconds": 30}}


@pytest.fixture(scope="module", params=["json", "sse"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    """A server in each response mode, with an admin user."""
    live = start({"RESPONSE_MODE": request.param})
    create_superuser(live)
    return live


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30.0) as client:
        yield client


@pytest.fixture
async def admin(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    client = await admin_client(server.base)
    try:
        yield client
    finally:
        await client.aclose()


def responses_to(response: httpx.Response, request_id: int) -> list[dict[str, Any]]:
    """Every JSON-RPC response with that id in an HTTP response (an SSE stream may carry several)."""
    assert response.status_code == 200, response.text
    return [m for m in messages_of(response) if m.get("id") == request_id and "method" not in m]


async def in_flight(server: LiveServer, session: RawSession, request_id: int) -> asyncio.Task[httpx.Response]:
    """POST a slow tool call and return once the ledger holds it."""
    call = asyncio.create_task(session.post(rpc("tools/call", SLOW, request_id)))
    await session.wait_pending(request_id)
    # The worker writes its ledger behind (LEDGER_FLUSH_INTERVAL): wait for the pending row too (it lives in
    # another process's database file; no event tells this one).
    sql = "SELECT id FROM mcp_server_ledgerentry WHERE session_id = ? AND request_key = ?"
    await wait_for(
        lambda: asyncio.to_thread(query, server, sql, session.id, f"i:{request_id}"),
        f"the pending row of request {request_id}",
        within=5,
    )
    return call


def ledger_row(server: LiveServer, session_id: str, request_id: int) -> dict[str, Any]:
    rows = query(
        server,
        "SELECT * FROM mcp_server_ledgerentry WHERE session_id = ? AND request_key = ? ORDER BY id DESC",
        session_id,
        f"i:{request_id}",
    )
    assert rows, f"request {request_id} is not in the ledger"
    return rows[0]


async def settled_row(server: LiveServer, session_id: str, request_id: int) -> dict[str, Any]:
    """The request's row once its settlement is recorded: the worker writes the ledger behind its answers
    (``LEDGER_FLUSH_INTERVAL``), so the row is polled (it lives in another process) for a few seconds."""

    async def settled() -> dict[str, Any] | None:
        row = await asyncio.to_thread(ledger_row, server, session_id, request_id)
        return row if row["state"] != "pending" else None

    return await wait_for(settled, f"the settlement of request {request_id}", within=5)


async def test_abort_answers_the_request_once_with_minus_32003(
    server: LiveServer, http: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    session = await open_session(http, server.url)
    call = await in_flight(server, session, 41)
    pk = ledger_row(server, session.id, 41)["id"]

    done = await run_action(admin, "ledgerentry", "abort_requests", [pk])
    assert done.status_code == 302, done.text

    answers = responses_to(await asyncio.wait_for(call, 10), 41)
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": 41,
            "error": {"code": REQUEST_ABORTED, "message": "Request aborted by an operator"},
        }
    ]
    row = await settled_row(server, session.id, 41)
    assert row["state"] == "aborted"
    assert row["settled_at"] is not None
    log = admin_log(server, pk)
    assert len(log) == 1
    assert "Aborted request 41 (tools/call slow)" in log[0]["change_message"]
    assert log[0]["action_flag"] == 2  # CHANGE

    # The session goes on; aborting again changes nothing and logs nothing.
    echoed = await session.call_tool("echo", {"text": "still here"})
    assert echoed["result"]["content"][0]["text"] == "still here"
    again = await run_action(admin, "ledgerentry", "abort_requests", [pk])
    assert again.status_code == 302
    assert len(admin_log(server, pk)) == 1
    assert (await settled_row(server, session.id, 41))["state"] == "aborted"

    async def none_pending() -> bool:  # the echo's row, if its batch caught it pending, is settled behind it
        return not [r for r in await asyncio.to_thread(pending_rows, server) if r["session_id"] == session.id]

    await wait_for(none_pending, within=5)


async def test_abort_one_of_two_leaves_the_other_running(
    server: LiveServer, http: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    session = await open_session(http, server.url)
    first = await in_flight(server, session, 51)
    second = await in_flight(server, session, 52)
    pk = ledger_row(server, session.id, 51)["id"]
    await run_action(admin, "ledgerentry", "abort_requests", [pk])
    assert responses_to(await asyncio.wait_for(first, 10), 51)[0]["error"]["code"] == REQUEST_ABORTED
    assert not second.done()
    assert ledger_row(server, session.id, 52)["state"] == "pending"
    await session.cancel(52)
    await asyncio.wait_for(second, 10)


async def test_end_session_answers_minus_32000_then_404(
    server: LiveServer, http: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    session = await open_session(http, server.url)
    call = await in_flight(server, session, 61)

    done = await run_action(admin, "session", "end_sessions", [session.id])
    assert done.status_code == 302, done.text

    answers = responses_to(await asyncio.wait_for(call, 10), 61)
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": 61,
            "error": {
                "code": CONNECTION_CLOSED,
                "message": "Connection closed: session ended by an operator",
            },
        }
    ]
    assert (await settled_row(server, session.id, 61))["state"] == "closed"
    later = await session.post(rpc("tools/call", {"name": "echo", "arguments": {"text": "x"}}, 62))
    assert later.status_code == 404
    stored = query(server, "SELECT * FROM mcp_server_session WHERE id = ?", session.id)[0]
    assert stored["ended_at"] is not None
    assert stored["end_reason"] == "session ended by an operator"
    log = admin_log(server, session.id)
    assert len(log) == 1
    assert "Ended the session" in log[0]["change_message"]

    again = await run_action(admin, "session", "end_sessions", [session.id])
    assert again.status_code == 302
    assert len(admin_log(server, session.id)) == 1


async def test_live_page_abort_endpoint(
    server: LiveServer, http: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    session = await open_session(http, server.url)
    call = await in_flight(server, session, 71)
    pk = ledger_row(server, session.id, 71)["id"]
    page = await admin.get("/admin/mcp_server/ledgerentry/live/")
    assert page.status_code == 200
    token = page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    abort = "/admin/mcp_server/ledgerentry/live/abort/"
    answer = await admin.post(abort, data={"pk": [str(pk), "999999"], "csrfmiddlewaretoken": token})
    assert answer.json() == {"aborted": [pk], "skipped": [999999]}
    assert responses_to(await asyncio.wait_for(call, 10), 71)[0]["error"]["code"] == REQUEST_ABORTED
    assert (await admin.post(abort, data={"pk": [str(pk)], "csrfmiddlewaretoken": token})).json() == {
        "aborted": [],
        "skipped": [pk],
    }
    assert len(admin_log(server, pk)) == 1
    assert (await admin.get(abort)).status_code == 405
    assert (await admin.post(abort, data={"pk": [str(pk)]})).status_code == 403  # no CSRF token


async def test_abort_names_a_sessionless_request_among_others_with_its_id(
    server: LiveServer, http: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    """Two 2026-07-28 clients use the same id; aborting one row answers that client only, and each row
    names the client that sent it (no session holds it)."""

    def call(client: str) -> asyncio.Task[httpx.Response]:
        meta = sessionless_meta(client_info={"name": client, "version": "9"})
        payload = rpc("tools/call", {**SLOW, "_meta": meta}, 5)
        return asyncio.create_task(
            http.post(server.url, json=payload, headers=sessionless_headers("tools/call", "slow"))
        )

    first, second = call("first-client"), call("second-client")
    sql = (
        "SELECT * FROM mcp_server_ledgerentry WHERE session_id IS NULL AND request_key = 'i:5' AND client = ?"
    )

    async def both_pending() -> bool:
        return bool(await asyncio.to_thread(query, server, sql, "first-client 9")) and bool(
            await asyncio.to_thread(query, server, sql, "second-client 9")
        )

    await wait_for(both_pending)
    [row] = query(server, sql + " AND state = 'pending'", "second-client 9")

    await run_action(admin, "ledgerentry", "abort_requests", [row["id"]])
    assert responses_to(await asyncio.wait_for(second, 10), 5)[0]["error"]["code"] == REQUEST_ABORTED
    assert not first.done()
    [other] = query(server, sql, "first-client 9")
    assert other["state"] == "pending"
    first.cancel()  # at 2026-07-28 a client cancels by closing its connection

    async def first_settled() -> bool:
        return not await asyncio.to_thread(query, server, sql + " AND state = 'pending'", "first-client 9")

    await wait_for(first_settled)
