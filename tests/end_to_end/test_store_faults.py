"""I11 — faults are bounded: a database or a cache that stops answering delays a request by at most its
deadline, and once the store is back the ledger converges.

Live Daphne workers serve one site on a PostgreSQL and a Redis the module starts for itself
(:mod:`tests.support.stores`): those are paused (``SIGSTOP``: the sockets stay open, nothing answers),
restarted and killed mid-traffic. Never the machine's own, which other tests use at the same time.

- ``behind``: the database ledger written behind the request path; sessions read from the database on every
  request (``SESSION_CACHE_TTL`` 0), so the session lookup is the store wait.
- ``through``: the database ledger written through (``LEDGER_FLUSH_INTERVAL`` 0), sessions cached: the
  ledger's open is the store wait.
- ``cache``: the cache ledger (on Redis) written through.

Every wait on a response is bounded by the deadline plus a margin (:data:`BOUND`): a hang fails the test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.admin import create_superuser
from tests.support.auth import manage
from tests.support.live import LiveServer, start_server
from tests.support.raw import LATEST, mcp_headers, messages_of, rpc, sessionless_headers, sessionless_meta
from tests.support.stores import PostgresServer, RedisServer, throwaway_postgres, throwaway_redis
from tests.support.wait import wait_for

STORE_TIMEOUT = 1.0
REQUEST_TIMEOUT = 6.0
BOUND = REQUEST_TIMEOUT + 2.0
"""Every response must come within the deadline plus this margin; the waits below give up after it."""
CACHE_LEDGER = "mcp_server.stores.ledger.cache.CacheLedger"
COMMON = {
    "RESPONSE_MODE": "json",
    "STORE_TIMEOUT": STORE_TIMEOUT,
    "REQUEST_TIMEOUT": REQUEST_TIMEOUT,
    "LEASE_TIMEOUT": 2.0,
}
WORKERS = {
    "behind": {**COMMON, "SESSION_CACHE_TTL": 0},
    "through": {**COMMON, "LEDGER_FLUSH_INTERVAL": 0, "SESSION_CACHE_TTL": 600.0},
    "cache": {
        **COMMON,
        "LEDGER_FLUSH_INTERVAL": 0,
        "SESSION_CACHE_TTL": 600.0,
        "LEDGER_BACKEND": CACHE_LEDGER,
    },
}
ECHO = {"name": "echo", "arguments": {"text": "hi"}}
WIDTH = 16
"""Concurrent requests in a round: more than a worker's threads, so each thread's connection is used."""
LEDGER_DOWN = "Store unavailable: the ledger"


def slow(seconds: float) -> dict[str, Any]:
    return {"name": "slow", "arguments": {"seconds": seconds}}


@dataclass
class Site:
    postgres: PostgresServer
    redis: RedisServer
    database: str
    workers: dict[str, LiveServer]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with throwaway_postgres() as postgres, throwaway_redis() as redis:
        database = postgres.create_database("mcp_faults")
        directory: Path = tmp_path_factory.mktemp("faults")
        env = {"DATABASE_URL": database, "REDIS_URL": redis.url()}
        with ThreadPoolExecutor(len(WORKERS)) as pool:
            futures = {
                name: pool.submit(start_server, directory, overrides, name=name, **env)
                for name, overrides in WORKERS.items()
            }
            workers = {name: future.result() for name, future in futures.items()}
        try:
            yield Site(postgres, redis, database, workers)
        finally:
            for worker in workers.values():
                worker.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(BOUND)) as client:
        yield client


@pytest.fixture(autouse=True)
def _no_500(site: Site) -> Iterator[None]:
    """Whatever a test does to the stores, no worker answers 500 (the endpoint logs each one)."""
    before = {name: len(worker.log()) for name, worker in site.workers.items()}
    yield
    for name, worker in site.workers.items():
        log = worker.log()[before[name] :]
        assert "MCP endpoint failed" not in log, f"{name} answered 500:\n{log[-3000:]}"


# -- the client side --------------------------------------------------------------------------------------


@dataclass
class Timed:
    response: httpx.Response
    seconds: float

    @property
    def status(self) -> int:
        return self.response.status_code


async def timed(request: Awaitable[httpx.Response]) -> Timed:
    """The response and how long it took; a response later than :data:`BOUND` fails the test."""
    started = time.monotonic()
    async with asyncio.timeout(BOUND):
        response = await request
    return Timed(response, time.monotonic() - started)


async def open_session(http: httpx.AsyncClient, worker: LiveServer) -> str:
    params = {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "faults", "version": "1"}}
    response = await http.post(worker.url, json=rpc("initialize", params, 0), headers=mcp_headers())
    assert response.status_code == 200, response.text
    session_id = str(response.headers["mcp-session-id"])
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(worker.url, json=note, headers=headers(session_id))).status_code == 202
    return session_id


def headers(session_id: str | None, accept: str = "application/json, text/event-stream") -> dict[str, str]:
    return mcp_headers(session_id, version=LATEST, accept=accept)


def call(
    http: httpx.AsyncClient, worker: LiveServer, session_id: str, request_id: int, params: Any = None
) -> Awaitable[httpx.Response]:
    body = rpc("tools/call", ECHO if params is None else params, request_id)
    return http.post(worker.url, json=body, headers=headers(session_id))


def answer(timed_response: Timed, request_id: int | str) -> dict[str, Any]:
    """The one JSON-RPC answer to ``request_id`` (checked to be alone), from an HTTP 200 in time."""
    assert timed_response.status == 200, timed_response.response.text
    assert timed_response.seconds < REQUEST_TIMEOUT, timed_response.seconds
    found = [
        m for m in messages_of(timed_response.response) if m.get("id") == request_id and "method" not in m
    ]
    assert len(found) == 1, timed_response.response.text
    return found[0]


def store_error(timed_response: Timed, request_id: int, store: str) -> None:
    error = answer(timed_response, request_id)["error"]
    assert error["code"] == -32603, error
    assert error["message"].startswith(f"Store unavailable: the {store}"), error


def refused(timed_response: Timed, store: str = "") -> None:
    """HTTP 503 with a JSON-RPC error naming the store, in time, never a 500 or a hang."""
    response = timed_response.response
    assert timed_response.status == 503, response.text
    assert timed_response.seconds < REQUEST_TIMEOUT, timed_response.seconds
    assert response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert error["message"].startswith(f"Service Unavailable: Store unavailable: the {store}"), error


def result_text(timed_response: Timed, request_id: int) -> str:
    reply = answer(timed_response, request_id)
    assert "result" in reply, reply
    return str(reply["result"]["content"][0]["text"])


async def stream_status(http: httpx.AsyncClient, worker: LiveServer, session_id: str) -> Timed:
    """GET: the status of the standalone stream (closed at once when it opens)."""
    started = time.monotonic()
    async with (
        asyncio.timeout(BOUND),
        http.stream("GET", worker.url, headers=headers(session_id, "text/event-stream")) as response,
    ):
        await response.aread() if response.status_code != 200 else None
        return Timed(response, time.monotonic() - started)


def delete(http: httpx.AsyncClient, worker: LiveServer, session_id: str) -> Awaitable[httpx.Response]:
    return http.delete(worker.url, headers=headers(session_id))


# -- the ledger -------------------------------------------------------------------------------------------


async def ledger_rows(site: Site, *session_ids: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows of these sessions in the database ledger, by ``(session, request key)``."""
    async with await psycopg.AsyncConnection.connect(site.database, connect_timeout=5) as connection:
        cursor = await connection.execute(
            "SELECT session_id, request_key, state, outcome FROM mcp_server_ledgerentry"
            " WHERE session_id = ANY(%s)",
            (list(session_ids),),
        )
        return {(s, k): {"state": state, "outcome": o} for s, k, state, o in await cursor.fetchall()}


async def wait_pending(site: Site, *keys: tuple[str, str]) -> None:
    """Until each ``(session, request key)`` is pending in the database ledger."""

    async def pending() -> bool:
        rows = await ledger_rows(site, *{s for s, _ in keys})
        return all(rows.get(key, {}).get("state") == "pending" for key in keys)

    await wait_for(pending, within=BOUND)


async def wait_converged(site: Site, *session_ids: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Until nothing of these sessions is pending in the database ledger (the store came back)."""

    async def converged() -> bool:
        rows = await ledger_rows(site, *session_ids)
        return bool(rows) and all(row["state"] != "pending" for row in rows.values())

    await wait_for(converged, within=4 * BOUND)
    return await ledger_rows(site, *session_ids)


# -- PostgreSQL -------------------------------------------------------------------------------------------


async def test_a_postgres_that_stops_answering(site: Site, http: httpx.AsyncClient) -> None:
    behind, through = site.workers["behind"], site.workers["through"]
    sb, st, st_ended = await asyncio.gather(
        open_session(http, behind), open_session(http, through), open_session(http, through)
    )
    in_flight = [
        asyncio.ensure_future(timed(call(http, behind, sb, 1, slow(2)))),
        asyncio.ensure_future(timed(call(http, through, st, 1, slow(2)))),
    ]
    await wait_pending(site, (sb, "i:1"), (st, "i:1"))
    init = rpc(
        "initialize",
        {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}},
        0,
    )
    with site.postgres.paused():
        (b_post, b_get, b_delete, t_post, t_init, t_delete) = await asyncio.gather(
            timed(call(http, behind, sb, 2)),
            stream_status(http, behind, sb),
            timed(delete(http, behind, sb)),
            timed(call(http, through, st, 2)),
            timed(http.post(through.url, json=init, headers=mcp_headers())),
            timed(delete(http, through, st_ended)),
        )
        b_slow, t_slow = await asyncio.gather(*in_flight)
    refused(b_post, "database")  # the session lookup: no request can be answered
    refused(b_get, "database")
    refused(b_delete, "database")
    store_error(t_post, 2, "ledger")  # the session was cached: the request is answered with the error
    store_error(t_init, 0, "database")
    assert "mcp-session-id" not in t_init.response.headers
    refused(t_delete, "session store")
    assert result_text(b_slow, 1) == "slept 2.0"  # in flight: answered as if nothing happened
    assert result_text(t_slow, 1) == "slept 2.0"

    rows = await wait_converged(site, sb, st)
    assert rows[(st, "i:2")] == {
        "state": "answered",
        "outcome": {"error": {"code": -32603, "message": t_post.response.json()["error"]["message"]}},
    }, "the open that timed out landed once the database answered, and was settled behind it"
    assert (sb, "i:2") not in rows  # refused before it reached the ledger
    again = await asyncio.gather(
        *(timed(call(http, w, s, n)) for w, s in ((behind, sb), (through, st)) for n in (1, 2))
    )
    assert [result_text(t, n) for t, n in zip(again, (1, 2, 1, 2), strict=True)] == ["hi"] * 4  # ids reusable
    assert (await timed(delete(http, through, st_ended))).status == 200  # the DELETE that failed, again
    assert (await stream_status(http, behind, sb)).status == 200


async def test_a_restarted_postgres(site: Site, http: httpx.AsyncClient) -> None:
    """Every connection breaks: the workers reconnect, and what was answered meanwhile is not left pending."""
    behind, through = site.workers["behind"], site.workers["through"]
    sb, st = await asyncio.gather(open_session(http, behind), open_session(http, through))
    in_flight = [
        asyncio.ensure_future(timed(call(http, behind, sb, 1, slow(1.5)))),
        asyncio.ensure_future(timed(call(http, through, st, 1, slow(1.5)))),
    ]
    await wait_pending(site, (sb, "i:1"), (st, "i:1"))
    site.postgres.stop()
    try:
        b_post, t_post = await asyncio.gather(
            timed(call(http, behind, sb, 2)), timed(call(http, through, st, 2))
        )
        b_slow, t_slow = await asyncio.gather(*in_flight)
    finally:
        site.postgres.start()
    refused(b_post, "database")
    store_error(t_post, 2, "ledger")
    assert result_text(b_slow, 1) == "slept 1.5"
    assert result_text(t_slow, 1) == "slept 1.5"
    rows = await wait_converged(site, sb, st)
    assert rows[(st, "i:1")]["state"] == "answered"
    again = await asyncio.gather(*(timed(call(http, w, s, 2)) for w, s in ((behind, sb), (through, st))))
    assert [result_text(t, 2) for t in again] == ["hi", "hi"]  # reconnected; the ids are free


def bearer_for(worker: LiveServer) -> str:
    """A superuser on the site's database and a plain ``mcp_token`` of theirs (``manage.py mcp_token``)."""
    return manage(
        worker, "mcp_token", "create", create_superuser(worker, "faults"), "--name", "faults"
    ).strip()


async def test_token_authenticated_requests_recover_after_a_restarted_postgres(
    site: Site, http: httpx.AsyncClient
) -> None:
    """Authentication reads the token (and its user) on every request, and a form tool writes, in the
    request path's threads. After a restart every connection those threads held is broken: each thread
    drops a broken connection and opens a new one, so requests recover, on every thread (rounds wider than
    the pool), with no 500 meanwhile."""
    worker = site.workers["behind"]
    token = await asyncio.to_thread(bearer_for, worker)
    auth = {"Authorization": f"Bearer {token}"}

    def signed_in(request_id: int) -> Awaitable[httpx.Response]:
        name, arguments = (
            ("whoami", {}) if request_id % 2 else ("add_author", {"name": f"Faults {request_id}"})
        )
        body = rpc(
            "tools/call", {"name": name, "arguments": arguments, "_meta": sessionless_meta()}, request_id
        )
        return http.post(worker.url, json=body, headers=sessionless_headers("tools/call", name, **auth))

    async def round_of(first_id: int) -> list[Timed]:
        return list(await asyncio.gather(*(timed(signed_in(first_id + i)) for i in range(WIDTH))))

    def succeeded(reply: Timed, request_id: int) -> bool:
        result = answer(reply, request_id).get("result")
        if result is None or result.get("isError"):
            return False
        content = result["structuredContent"]
        return bool(
            content["user"] == "faults" if request_id % 2 else content["name"] == f"Faults {request_id}"
        )

    def all_succeeded(first_id: int, replies: list[Timed]) -> bool:
        assert all(r.status in (200, 401, 503) for r in replies), [r.response.text for r in replies]
        return all(r.status == 200 and succeeded(r, first_id + i) for i, r in enumerate(replies))

    assert all_succeeded(100, await round_of(100))
    site.postgres.restart()
    next_id = 1000

    async def recovered() -> bool:
        nonlocal next_id
        first, next_id = next_id, next_id + WIDTH
        return all_succeeded(first, await round_of(first))

    await wait_for(recovered, within=BOUND)
    for _ in range(3):  # every thread's connection works again, not only some
        first, next_id = next_id, next_id + WIDTH
        replies = await round_of(first)
        assert all_succeeded(first, replies), [r.response.text for r in replies]


# -- Redis ------------------------------------------------------------------------------------------------


async def cache_ledger_pending(http: httpx.AsyncClient, worker: LiveServer, session_id: str) -> list[Any]:
    response = await timed(
        http.post(worker.url, json=rpc("test/ledger_pending", {}, "probe"), headers=headers(session_id))
    )
    return list(answer(response, "probe")["result"]["pending"])


async def test_a_redis_that_stops_answering(site: Site, http: httpx.AsyncClient) -> None:
    behind, cache = site.workers["behind"], site.workers["cache"]
    sb, sb_ended, sc = await asyncio.gather(
        open_session(http, behind), open_session(http, behind), open_session(http, cache)
    )
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}
    with site.redis.paused():
        b_get, b_delete, b_post, b_cancel, c_post = await asyncio.gather(
            stream_status(http, behind, sb),
            timed(delete(http, behind, sb_ended)),
            timed(call(http, behind, sb, 1)),
            timed(http.post(behind.url, json=cancel, headers=headers(sb))),
            timed(call(http, cache, sc, 1)),
        )
    refused(b_get, "channel layer")  # the stream cannot be routed to
    refused(b_delete, "session store")  # the other workers cannot be told
    assert result_text(b_post, 1) == "hi"  # nothing on Redis in its way
    assert b_cancel.status == 202  # told nobody: remembered here
    assert b_cancel.seconds < REQUEST_TIMEOUT
    store_error(c_post, 1, "ledger")

    async def converged() -> bool:
        return await cache_ledger_pending(http, cache, sc) == []

    await wait_for(converged, within=4 * BOUND)
    assert result_text(await timed(call(http, cache, sc, 1)), 1) == "hi"  # the id is free
    assert (await stream_status(http, behind, sb)).status == 200


async def test_a_killed_redis(site: Site, http: httpx.AsyncClient) -> None:
    behind, cache = site.workers["behind"], site.workers["cache"]
    sb, sb_ended, sc = await asyncio.gather(
        open_session(http, behind), open_session(http, behind), open_session(http, cache)
    )
    site.redis.kill()
    try:
        b_get, b_delete, *posts = await asyncio.gather(
            stream_status(http, behind, sb),
            timed(delete(http, behind, sb_ended)),
            *(timed(call(http, behind, sb, n)) for n in (1, 2, 3)),
            *(timed(call(http, cache, sc, n)) for n in (1, 2)),
        )
    finally:
        site.redis.restart()
    refused(b_get, "channel layer")
    refused(b_delete, "session store")
    assert [result_text(t, n) for t, n in zip(posts[:3], (1, 2, 3), strict=True)] == ["hi"] * 3
    for t, n in zip(posts[3:], (1, 2), strict=True):
        store_error(t, n, "ledger")  # one answer each
    assert (await stream_status(http, behind, sb)).status == 200  # Redis is back (empty)
    assert result_text(await timed(call(http, cache, sc, 3)), 3) == "hi"
    await wait_for(lambda: workers_in_group(site, len(site.workers)), within=BOUND)  # each rejoined
    # A DELETE through one worker reaches a request another one holds again.
    sx = await open_session(http, behind)
    held = asyncio.ensure_future(timed(call(http, cache, sx, 1, slow(30))))
    await wait_for(lambda: holds(http, cache, sx, 1), within=BOUND)
    assert (await timed(delete(http, behind, sx))).status == 200
    closed = answer(await held, 1)["error"]
    assert closed == {"code": -32000, "message": "Connection closed: session terminated by the client"}


async def workers_in_group(site: Site, count: int) -> bool:
    """Whether ``count`` workers are members of the workers' channel-layer group (a zset on Redis)."""
    import redis.asyncio as aioredis

    from mcp_server.wire.messages import WORKERS_GROUP

    client = aioredis.Redis.from_url(site.redis.url(), socket_timeout=2)
    try:
        return bool(await client.zcard(f"asgi:group:{WORKERS_GROUP}") == count)
    finally:
        await client.aclose()


async def holds(http: httpx.AsyncClient, worker: LiveServer, session_id: str, request_id: int) -> bool:
    """Whether ``worker`` holds ``request_id`` of the session in flight (the test app's ``test/stats``)."""
    body = rpc("test/stats", {}, "stats")
    stats = answer(await timed(http.post(worker.url, json=body, headers=headers(session_id))), "stats")
    return request_id in stats["result"]["pending"]


@pytest.mark.django_db(transaction=True)
async def test_a_worker_joins_a_channel_layer_that_was_down_at_its_start() -> None:
    """The runtime starts while its Redis is down (it answers all the same), and joins the workers' group
    once Redis is back, without a restart."""
    import redis.asyncio as aioredis
    from django.test import override_settings

    from mcp_server.runtime import Runtime
    from mcp_server.wire.messages import WORKERS_GROUP

    with throwaway_redis() as redis:
        host = {"address": redis.url(), "socket_timeout": 15, "socket_connect_timeout": 1}
        layers = {"faults": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [host]}}}
        redis.kill()
        with override_settings(CHANNEL_LAYERS=layers, MCP_SERVER={"STORE_TIMEOUT": STORE_TIMEOUT}):
            runtime = Runtime(channel_layer_alias="faults")
            started = time.monotonic()
            await runtime.start()
            assert time.monotonic() - started < 2 * STORE_TIMEOUT + 1  # bounded, not a hang
            redis.restart()
            client = aioredis.Redis.from_url(redis.url(), socket_timeout=2)

            async def joined() -> bool:
                return bool(await client.zscore(f"asgi:group:{WORKERS_GROUP}", runtime.channel) is not None)

            try:
                await wait_for(joined, within=BOUND)
            finally:
                await client.aclose()
                await runtime.aclose()
