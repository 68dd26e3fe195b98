"""I8: the reply guarantee holds across worker processes.

Several real Daphne processes serve one site with no sticky sessions: the channel layer and the cache on
Redis, sessions and the ledger on PostgreSQL (or the ledger in the Redis cache). A request served by one
worker is cancelled, closed or answered through another; a GET stream held by one worker gets the
notifications another one sends; a worker killed mid-request has its pending request settled by a survivor.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.live import REDIS_URL as TEST_REDIS_URL
from tests.support.live import (
    LiveServer,
    postgres_database,
    redis_namespace,
    require_services,
    start_server,
)
from tests.support.multiprocess import (
    BATCH_VERSION,
    CACHE_LEDGER,
    DB_LEDGER,
    McpSession,
    open_session,
    request_key,
)
from tests.support.raw import messages_of, rpc, sse_events
from tests.support.wait import wait_for

WATCHED_URI = "test://watched-resource"  # a resource of project/conformance, subscribable
SLOW = {"name": "slow", "arguments": {"seconds": 30}}  # outlives every wait below
CLOSED_BY_DELETE = "Connection closed: session terminated by the client"
DEAD_WORKER = "Connection closed: the worker serving it stopped"
KILL_LEASE = 1.0
"""``LEASE_TIMEOUT`` of the worker that gets killed and of its survivor."""


# -- services and servers -------------------------------------------------------------------------------


@dataclass
class Site:
    """Two workers of one site (one ledger backend, one database): each is the other's "B"."""

    backend: str
    database: str
    json_worker: LiveServer
    sse_worker: LiveServer

    @property
    def uses_database_ledger(self) -> bool:
        return self.backend == DB_LEDGER

    @property
    def workers(self) -> tuple[LiveServer, LiveServer]:
        return self.json_worker, self.sse_worker


@dataclass
class Cluster:
    database: str
    sites: dict[str, Site]
    doomed: LiveServer
    """A worker that test_killed_worker kills."""
    survivor: LiveServer


@pytest.fixture(scope="module")
def services() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL database and a Redis key prefix of this run's own: ``(database URL, prefix)``."""
    require_services()
    with postgres_database() as database, redis_namespace() as prefix:
        yield database, prefix


@pytest.fixture(scope="module")
def cluster(services: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Six workers, started in parallel: two per ledger backend, and a pair for the kill test."""
    database, prefix = services
    directory: Path = tmp_path_factory.mktemp("multiprocess")
    env = {"DATABASE_URL": database, "REDIS_URL": TEST_REDIS_URL, "MCP_TEST_REDIS_PREFIX": prefix}
    specs: dict[str, dict[str, Any]] = {}
    for label, backend in (("db", DB_LEDGER), ("cache", CACHE_LEDGER)):
        for mode in ("json", "sse"):
            specs[f"{label}-{mode}"] = {"RESPONSE_MODE": mode, "LEDGER_BACKEND": backend}
    specs["doomed"] = {"RESPONSE_MODE": "json", "LEASE_TIMEOUT": KILL_LEASE}
    specs["survivor"] = {"RESPONSE_MODE": "json", "LEASE_TIMEOUT": KILL_LEASE}
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = {
            name: pool.submit(start_server, directory, overrides, name=name, **env)
            for name, overrides in specs.items()
        }
        started: dict[str, LiveServer] = {}
        errors: list[BaseException] = []
        for name, future in futures.items():
            try:
                started[name] = future.result()
            except Exception as exc:
                errors.append(exc)
    try:
        if errors:
            raise errors[0]
        sites = {
            label: Site(
                backend=backend,
                database=database,
                json_worker=started[f"{label}-json"],
                sse_worker=started[f"{label}-sse"],
            )
            for label, backend in (("db", DB_LEDGER), ("cache", CACHE_LEDGER))
        }
        yield Cluster(database, sites, started["doomed"], started["survivor"])
    finally:
        with ThreadPoolExecutor(len(specs)) as pool:
            list(pool.map(LiveServer.stop, started.values()))


@pytest.fixture(params=["db", "cache"])
def site(request: pytest.FixtureRequest, cluster: Cluster) -> Site:
    """Each test runs once with the database ledger and once with the cache ledger."""
    return cluster.sites[request.param]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0)) as client:
        yield client


# -- raw MCP over HTTP ------------------------------------------------------------------------------------


# -- waiting on real state --------------------------------------------------------------------------------


async def ledger_rows(database: str, session_id: str) -> dict[str, dict[str, Any]]:
    """The session's rows of ``mcp_server_ledgerentry``, by request key."""
    async with await psycopg.AsyncConnection.connect(database) as connection:
        cursor = await connection.execute(
            "SELECT request_key, state, outcome, worker, created, lease_expires, settled_at"
            " FROM mcp_server_ledgerentry WHERE session_id = %s",
            (session_id,),
        )
        columns = ("request_key", "state", "outcome", "worker", "created", "lease_expires", "settled_at")
        return {row[0]: dict(zip(columns, row, strict=True)) for row in await cursor.fetchall()}


async def wait_pending(site: Site, b: LiveServer, session: McpSession, *ids: int | str) -> None:
    """Wait until the ledger holds every one of ``ids`` pending (asked of worker ``b``)."""

    async def held() -> bool:
        return set(ids) <= set(await session.ledger_pending(b))

    await wait_for(held, f"requests {ids} pending in the ledger")
    if site.uses_database_ledger:
        rows = await ledger_rows(site.database, session.id)
        assert all(rows[request_key(i)]["state"] == "pending" for i in ids), rows


async def assert_settled(
    site: Site, b: LiveServer, session: McpSession, expected: dict[int | str, str]
) -> None:
    """Nothing of the session is left pending; with the database ledger, each row is in its state.

    The worker that settled a request records it behind its answer (``LEDGER_FLUSH_INTERVAL``), so the ledger
    is waited for rather than read once.
    """

    async def drained() -> bool:
        return await session.ledger_pending(b) == []

    await wait_for(drained, "the ledger to record every settlement")
    if site.uses_database_ledger:
        wanted = {request_key(request_id): state for request_id, state in expected.items()}

        async def recorded() -> bool:  # a request settled before its batch is written has no row until then
            rows = await ledger_rows(site.database, session.id)
            return all(key in rows and rows[key]["state"] == state for key, state in wanted.items())

        await wait_for(recorded, "every expected row in its state")
        rows = await ledger_rows(site.database, session.id)
        # The probe's own row may still be pending: its settlement is written behind its answer.
        pending = {
            k: r["state"] for k, r in rows.items() if r["state"] == "pending" and k != "s:ledger-probe"
        }
        assert pending == {}
    # The id is free again: no pending entry of it anywhere. (Not for a cancelled id: a request reusing it is
    # taken for the late arrival of the one cancelled, which a cancel may overtake (I9), and never runs.)
    for request_id in [i for i, state in expected.items() if state != "cancelled"]:
        assert await session.call(b, request_id, "test/echo", {"again": True}) == {"params": {"again": True}}


# -- 1. a cancel through another worker -------------------------------------------------------------------


async def test_cancel_through_another_worker_json(site: Site, http: httpx.AsyncClient) -> None:
    a, b = site.json_worker, site.sse_worker
    session = await open_session(http, a)
    request = asyncio.ensure_future(session.post(a, rpc("tools/call", SLOW, 7)))
    await wait_pending(site, b, session, 7)
    await session.cancel(b, 7)
    response = await asyncio.wait_for(request, 10)
    assert response.status_code == 202
    assert response.content == b""
    await assert_settled(site, b, session, {7: "cancelled"})


async def test_cancel_through_another_worker_sse(site: Site, http: httpx.AsyncClient) -> None:
    a, b = site.sse_worker, site.json_worker
    session = await open_session(http, a)
    # Daphne sends the stream's headers with its first bytes: read the whole stream in the background.
    request = asyncio.ensure_future(session.post(a, rpc("tools/call", SLOW, "slow-1")))
    await wait_pending(site, b, session, "slow-1")
    await session.cancel(b, "slow-1")
    response = await asyncio.wait_for(request, 10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert [m for m in messages_of(response) if m.get("id") == "slow-1"] == []
    await assert_settled(site, b, session, {"slow-1": "cancelled"})


# -- 2. a DELETE through another worker -------------------------------------------------------------------


async def test_delete_through_another_worker_answers_a_single_post(
    site: Site, http: httpx.AsyncClient
) -> None:
    a, b = site.json_worker, site.sse_worker
    session = await open_session(http, a)
    request = asyncio.ensure_future(session.post(a, rpc("tools/call", SLOW, 1)))
    await wait_pending(site, b, session, 1)
    await session.delete(b)
    response = await asyncio.wait_for(request, 10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32000, "message": CLOSED_BY_DELETE},
    }
    await assert_session_gone(site, session, {1: "closed"})


async def test_delete_through_another_worker_answers_a_batch(site: Site, http: httpx.AsyncClient) -> None:
    a, b = site.json_worker, site.sse_worker
    session = await open_session(http, a, version=BATCH_VERSION)
    batch = [rpc("tools/call", SLOW, 1), rpc("tools/call", SLOW, "two")]
    request = asyncio.ensure_future(session.post(a, batch))
    await wait_pending(site, b, session, 1, "two")
    await session.delete(b)
    response = await asyncio.wait_for(request, 10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert isinstance(body, list)
    assert sorted(body, key=lambda m: str(m["id"])) == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": CLOSED_BY_DELETE}},
        {"jsonrpc": "2.0", "id": "two", "error": {"code": -32000, "message": CLOSED_BY_DELETE}},
    ]
    await assert_session_gone(site, session, {1: "closed", "two": "closed"})


async def test_delete_answers_many_requests_spread_over_both_workers(
    site: Site, http: httpx.AsyncClient
) -> None:
    """Requests opened at the same moment on two workers each get their own ledger entry, all pending,
    and one DELETE answers every one of them on the worker that holds it."""
    session = await open_session(http, site.json_worker)
    spread = [(worker, f"{worker.port}-{n}") for worker in site.workers for n in range(8)]
    requests = [
        asyncio.ensure_future(session.post(worker, rpc("tools/call", SLOW, request_id)))
        for worker, request_id in spread
    ]
    everything = [request_id for _worker, request_id in spread]
    await wait_pending(site, site.sse_worker, session, *everything)
    await session.delete(site.sse_worker)
    _done, waiting = await asyncio.wait(requests, timeout=10)
    if waiting:
        for request in waiting:
            request.cancel()
        observer = await open_session(http, site.json_worker)
        left = await observer.ledger_pending(site.sse_worker, of=session.id)
        unanswered = [
            request_id for (_w, request_id), r in zip(spread, requests, strict=True) if r in waiting
        ]
        pytest.fail(f"unanswered 10 s after the DELETE: {unanswered}; pending in the ledger: {left}")
    answers = [message for request in requests for message in messages_of(request.result())]
    assert sorted(str(m["id"]) for m in answers) == sorted(everything)
    assert {json.dumps(m["error"]) for m in answers} == {
        json.dumps({"code": -32000, "message": CLOSED_BY_DELETE})
    }
    await assert_session_gone(site, session, dict.fromkeys(everything, "closed"))


async def assert_session_gone(site: Site, session: McpSession, expected: dict[int | str, str]) -> None:
    """After a DELETE: every worker answers 404, nothing is pending, each row has its state."""
    for worker in site.workers:
        response = await session.post(worker, rpc("ping", None, 99))
        assert response.status_code == 404, response.text
    observer = await open_session(session.http, site.sse_worker)

    async def drained() -> bool:
        return await observer.ledger_pending(site.json_worker, of=session.id) == []

    # Closed requests are recorded behind their answers (``LEDGER_FLUSH_INTERVAL``): wait, don't read once.
    await wait_for(drained, "the ledger to record every closed request")
    if site.uses_database_ledger:

        async def recorded() -> bool:
            rows = await ledger_rows(site.database, session.id)
            # The probe's own row may still be pending: its settlement is written behind its answer.
            return not any(r["state"] == "pending" and k != "s:ledger-probe" for k, r in rows.items())

        await wait_for(recorded, "every row of the session to leave pending")
        rows = await ledger_rows(site.database, session.id)
        for request_id, state in expected.items():
            assert rows[request_key(request_id)]["state"] == state
            assert rows[request_key(request_id)]["outcome"] == {
                "error": {"code": -32000, "message": CLOSED_BY_DELETE}
            }


# -- 3. an elicitation answered through another worker ----------------------------------------------------


async def test_elicitation_answer_reaches_the_worker_that_waits(site: Site, http: httpx.AsyncClient) -> None:
    a, b = site.sse_worker, site.json_worker
    session = await open_session(http, b, capabilities={"elicitation": {}})
    call = rpc("tools/call", {"name": "test_elicitation", "arguments": {"message": "Who are you?"}}, 5)
    content = {"username": "ada", "email": "ada@example.org"}
    async with asyncio.timeout(10), session.stream(a, call) as response:
        assert response.status_code == 200
        events = sse_events(response)
        question = await anext(events)
        assert question["method"] == "elicitation/create"
        assert question["params"]["message"] == "Who are you?"
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": content}}
        posted = await session.post(b, answer)
        assert posted.status_code == 202, posted.text
        rest = [message async for message in events]
    assert len(rest) == 1, rest
    assert rest[0]["id"] == 5
    text = rest[0]["result"]["content"][0]["text"]
    assert text == f"User response: action=accept, content={json.dumps(content, separators=(',', ':'))}"
    await assert_settled(site, b, session, {5: "answered"})


# -- 4. notifications reach the GET stream, whichever worker holds it ----------------------------------------


async def test_notifications_reach_the_stream_held_by_another_worker(
    site: Site, http: httpx.AsyncClient
) -> None:
    a, b = site.json_worker, site.sse_worker
    session = await open_session(http, b)
    async with (
        asyncio.timeout(10),
        http.stream("GET", a.url, headers=session.headers("text/event-stream")) as stream,
    ):
        # The headers come after the stream joined its session's group (consumer._get).
        assert stream.status_code == 200
        events = sse_events(stream)
        assert await session.call(b, 1, "resources/subscribe", {"uri": WATCHED_URI}) == {}
        assert await session.call(b, 2, "test/notify", {"uri": WATCHED_URI}) == {"notified": 1}
        assert await anext(events) == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": WATCHED_URI},
        }
        notified = await session.call(b, 3, "test/notify", {"feature": "tools"})
        assert notified["notified"] >= 1
        assert await anext(events) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        # The session's end on another worker closes the stream.
        await session.delete(b)
        assert [message async for message in events] == []


# -- connections that stay quiet longer than the Redis client's read timeout ---------------------------------


async def test_quiet_connections_outlive_the_redis_read_timeout(
    cluster: Cluster, http: httpx.AsyncClient
) -> None:
    """redis-py 8 gives up reading after 5 s by default, and channels-redis blocks up to 5 s per receive:
    unless the channel layer lifts that timeout, every consumer quiet for ~5 s dies with a 500."""
    site = cluster.sites["db"]
    a, b = site.sse_worker, site.json_worker
    session = await open_session(http, b)
    assert await session.call(b, 1, "resources/subscribe", {"uri": WATCHED_URI}) == {}
    async with (
        asyncio.timeout(20),
        http.stream("GET", a.url, headers=session.headers("text/event-stream")) as stream,
    ):
        assert stream.status_code == 200
        events = sse_events(stream)
        # Six quiet seconds for this POST's consumer on B and for the GET stream's consumer on A.
        answer = await session.call(b, 2, "tools/call", {"name": "slow", "arguments": {"seconds": 6}})
        assert answer["content"][0]["text"] == "slept 6.0"
        assert await session.call(b, 3, "test/notify", {"uri": WATCHED_URI}) == {"notified": 1}
        assert await anext(events) == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": WATCHED_URI},
        }
    await assert_settled(site, b, session, {2: "answered"})


# -- 5. a worker dies holding a request ---------------------------------------------------------------------


async def test_killed_worker_leaves_a_lease_that_a_survivor_settles(
    cluster: Cluster, http: httpx.AsyncClient
) -> None:
    doomed, survivor = cluster.doomed, cluster.survivor
    session = await open_session(http, survivor)  # the survivor has served a request: its upkeep runs
    request = asyncio.ensure_future(session.post(doomed, rpc("tools/call", SLOW, 1)))
    key = request_key(1)

    async def renewed() -> bool:
        # The living worker renews its lease: still pending after its first lease ran out.
        row = (await ledger_rows(cluster.database, session.id)).get(key)
        if row is None:
            return False
        assert row["state"] == "pending", row
        return bool((row["lease_expires"] - row["created"]).total_seconds() > 2 * KILL_LEASE)

    await wait_for(renewed, "the serving worker to renew its lease")
    worker = (await ledger_rows(cluster.database, session.id))[key]["worker"]
    assert f":{doomed.process.pid}:" in worker

    doomed.process.send_signal(signal.SIGKILL)
    await asyncio.to_thread(doomed.process.wait, 10)
    killed_at = time.monotonic()
    with pytest.raises(httpx.TransportError):
        await asyncio.wait_for(request, 10)

    async def closed() -> bool:
        return bool((await ledger_rows(cluster.database, session.id))[key]["state"] != "pending")

    await wait_for(closed, "a survivor to settle the dead worker's request", within=10 * KILL_LEASE)
    elapsed = time.monotonic() - killed_at
    row = (await ledger_rows(cluster.database, session.id))[key]
    assert row["state"] == "closed", row
    assert row["outcome"] == {"error": {"code": -32000, "message": DEAD_WORKER}}
    assert row["settled_at"] >= row["lease_expires"]  # not before the dead worker's last lease ran out
    assert [
        r for r in (await ledger_rows(cluster.database, session.id)).values() if r["state"] == "pending"
    ] == []
    print(f"orphan settled {elapsed:.2f}s after the kill (LEASE_TIMEOUT {KILL_LEASE}s)")
