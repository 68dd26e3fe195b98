"""Sessions live in the database: another process sees them, and idle ones expire."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import CLIENT_INFO, RawSession, open_session, rpc
from tests.support.sessions import backdate, database_file

IDLE_TIMEOUT = 60


def session_row(server: LiveServer, session_id: str) -> dict[str, Any]:
    with closing(sqlite3.connect(database_file(server), timeout=30)) as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM mcp_server_session WHERE id = ?", (session_id,)).fetchone()
    assert row is not None, f"session {session_id} is not in the database"
    return dict(row)


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=20.0) as client:
        yield client


@pytest.fixture(scope="module")
def live_server(start: Callable[..., LiveServer]) -> LiveServer:
    """A server that reads the session from the database on every request (``SESSION_CACHE_TTL`` 0).

    Its in-memory channel layer is its own, so the broadcast of a session's end made by ``peer_server``
    never reaches it: only the database tells it (see ``test_the_session_cache_bounds_a_missed_end``).
    """
    return start({"MAX_REQUEST_BYTES": 65536, "SESSION_CACHE_TTL": 0})


@pytest.fixture(scope="module")
def peer_server(live_server: LiveServer, start: Callable[..., LiveServer]) -> LiveServer:
    """A second process on the same SQLite file as ``live_server``, with a short idle timeout.

    Its background sweep, which would end every session of the shared file idle past its short timeout
    (``tests/runtime/test_session_bounds.py``), runs once at start-up only (a third of a long
    ``LEASE_TIMEOUT``): here a session's idleness is judged by each process when a request comes.
    """
    return start(
        {
            "MAX_REQUEST_BYTES": 65536,
            "SESSION_IDLE_TIMEOUT": IDLE_TIMEOUT,
            "SESSION_CACHE_TTL": 0,
            "LEASE_TIMEOUT": 3600.0,
        },
        DATABASE_URL=live_server.env["DATABASE_URL"],
    )


CACHE_TTL = 1.0


async def test_the_session_cache_bounds_a_missed_end(
    http: httpx.AsyncClient, live_server: LiveServer, start: Callable[..., LiveServer]
) -> None:
    """A worker that caches sessions and misses the broadcast of an end refuses the session within the TTL."""
    caching = start({"SESSION_CACHE_TTL": CACHE_TTL}, DATABASE_URL=live_server.env["DATABASE_URL"])
    session = await open_session(http, live_server.url)
    assert (await on(caching, session).request("ping"))["result"] == {}  # cached there now
    assert (await session.delete()).status_code == 200
    ended = time.monotonic()
    while (await on(caching, session).post(rpc("ping"))).status_code == 200:
        assert time.monotonic() - ended < CACHE_TTL + 2.0, "an ended session outlived the cache's bound"
    assert (await on(caching, session).post(rpc("ping"))).status_code == 404  # and for good


def on(server: LiveServer, session: RawSession) -> RawSession:
    """The same session, addressed to another server process."""
    return RawSession(session.http, server.url, session.id, session.version, session.init_result)


async def test_initialize_stores_the_session(http: httpx.AsyncClient, live_server: LiveServer) -> None:
    session = await open_session(http, live_server.url, "2025-06-18")
    row = session_row(live_server, session.id)
    assert row["protocol_version"] == "2025-06-18"
    assert row["client_name"] == CLIENT_INFO["name"]
    assert row["ended_at"] is None
    assert row["transport"] == "http"


async def test_a_session_works_on_another_process(
    http: httpx.AsyncClient, live_server: LiveServer, peer_server: LiveServer
) -> None:
    assert peer_server.process.pid != live_server.process.pid
    first = await open_session(http, live_server.url)
    second = on(peer_server, first)
    answer = await second.call_tool("echo", {"text": "across processes"})
    assert answer["result"]["content"][0]["text"] == "across processes"
    # The revision negotiated by the first process holds on the second.
    assert (await second.post(rpc("ping"), **{"MCP-Protocol-Version": "1999-01-01"})).status_code == 400
    assert (await second.request("ping"))["result"] == {}


async def test_a_session_ended_on_one_process_is_gone_on_the_other(
    http: httpx.AsyncClient, live_server: LiveServer, peer_server: LiveServer
) -> None:
    first = await open_session(http, live_server.url)
    second = on(peer_server, first)
    assert (await second.request("ping"))["result"] == {}
    assert (await second.delete()).status_code == 200
    assert (await first.post(rpc("ping"))).status_code == 404
    assert (await second.post(rpc("ping"))).status_code == 404
    row = session_row(live_server, first.id)
    assert row["ended_at"] is not None
    assert row["end_reason"] == "session terminated by the client"


async def test_unknown_session_is_404_on_every_process(
    http: httpx.AsyncClient, live_server: LiveServer, peer_server: LiveServer
) -> None:
    first = await open_session(http, live_server.url)
    forged_id = first.id[:-1] + ("A" if first.id[-1] != "A" else "B")
    for server in (live_server, peer_server):
        forged = RawSession(http, server.url, forged_id, first.version, {})
        assert (await forged.post(rpc("ping"))).status_code == 404
    assert (await on(peer_server, first).request("ping"))["result"] == {}


async def test_an_idle_session_expires(http: httpx.AsyncClient, peer_server: LiveServer) -> None:
    session = await open_session(http, peer_server.url)
    assert (await session.request("ping"))["result"] == {}
    backdate(peer_server, session.id, IDLE_TIMEOUT * 2)
    response = await session.post(rpc("ping"))
    assert response.status_code == 404
    row = session_row(peer_server, session.id)
    assert row["ended_at"] is not None
    assert row["end_reason"] == "session expired"
    # Expiry is final: bringing last_seen back does not revive it.
    backdate(peer_server, session.id, 0)
    assert (await session.post(rpc("ping"))).status_code == 404


async def test_a_session_used_within_the_timeout_is_kept_alive(
    http: httpx.AsyncClient, peer_server: LiveServer
) -> None:
    session = await open_session(http, peer_server.url)
    stale = backdate(peer_server, session.id, IDLE_TIMEOUT * 0.75)
    assert (await session.request("ping"))["result"] == {}
    touched = _parse(session_row(peer_server, session.id)["last_seen"])
    assert touched > stale + timedelta(seconds=IDLE_TIMEOUT * 0.5)
    # Idle again for less than the timeout: still alive, because the last request counted as activity.
    backdate(peer_server, session.id, IDLE_TIMEOUT * 0.75)
    assert (await session.request("ping"))["result"] == {}
    assert session_row(peer_server, session.id)["ended_at"] is None


async def test_the_idle_timeout_is_per_process_setting(
    http: httpx.AsyncClient, live_server: LiveServer, peer_server: LiveServer
) -> None:
    """The same idle session is still alive for the default (one hour) timeout, expired for the short one."""
    session = await open_session(http, live_server.url)
    backdate(live_server, session.id, IDLE_TIMEOUT * 2)
    assert (await session.request("ping"))["result"] == {}
    backdate(live_server, session.id, IDLE_TIMEOUT * 2)
    assert (await on(peer_server, session).post(rpc("ping"))).status_code == 404
    assert (await session.post(rpc("ping"))).status_code == 404


async def test_log_level_and_subscriptions_are_kept_in_the_session_row(
    http: httpx.AsyncClient, live_server: LiveServer, peer_server: LiveServer
) -> None:
    session = await open_session(http, live_server.url)
    assert (await session.request("logging/setLevel", {"level": "warning"}))["result"] == {}
    for uri in ("test://watched-resource", "test://static-text"):
        assert (await session.request("resources/subscribe", {"uri": uri}))["result"] == {}
    elsewhere = on(peer_server, session)  # another process changes the same row
    again = await elsewhere.request("resources/subscribe", {"uri": "test://watched-resource"})
    assert again["result"] == {}
    unsubscribed = await elsewhere.request("resources/unsubscribe", {"uri": "test://static-text"})
    assert unsubscribed["result"] == {}
    row = session_row(live_server, session.id)
    assert row["log_level"] == "warning"
    assert json.loads(row["subscriptions"]) == ["test://watched-resource"]  # once, though subscribed twice
