"""Resumable streams across worker processes (PostgreSQL + Redis, no sticky sessions).

A POST stream cut mid-call at one worker is resumed with ``Last-Event-ID`` at the other: the client gets the
remaining progress notifications and the result exactly once, whichever event store the site uses. A worker
SIGKILLed mid-call: the client resuming at a survivor gets the -32000 the survivor's orphan settlement wrote
into the event store.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.live import REDIS_URL as TEST_REDIS_URL
from tests.support.live import LiveServer, postgres_database, redis_namespace, require_services, start_server
from tests.support.raw import RawSession, open_session
from tests.support.resumable import call, check_rest, events_of
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio

KILL_LEASE = 1.0
DB_EVENTS = "mcp_server.stores.events.database.DatabaseEventStore"
CACHE_EVENTS = "mcp_server.stores.events.cache.CacheEventStore"
DEAD_WORKER = "Connection closed: the worker serving it stopped"


@dataclass
class Cluster:
    database: str
    pairs: dict[str, tuple[LiveServer, LiveServer]]
    doomed: LiveServer
    survivor: LiveServer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    require_services()
    with postgres_database() as database, redis_namespace() as prefix:
        directory: Path = tmp_path_factory.mktemp("resume")
        env = {"DATABASE_URL": database, "REDIS_URL": TEST_REDIS_URL, "MCP_TEST_REDIS_PREFIX": prefix}
        specs: dict[str, dict[str, Any]] = {
            f"{label}-{n}": {"RESPONSE_MODE": "sse", "EVENT_STORE_BACKEND": backend}
            for label, backend in (("db", DB_EVENTS), ("cache", CACHE_EVENTS))
            for n in (1, 2)
        }
        for name in ("doomed", "survivor"):
            specs[name] = {"RESPONSE_MODE": "sse", "LEASE_TIMEOUT": KILL_LEASE}
        with ThreadPoolExecutor(len(specs)) as pool:
            futures = {n: pool.submit(start_server, directory, o, name=n, **env) for n, o in specs.items()}
            started = {n: f.result() for n, f in futures.items()}
        try:
            pairs = {label: (started[f"{label}-1"], started[f"{label}-2"]) for label in ("db", "cache")}
            yield Cluster(database, pairs, started["doomed"], started["survivor"])
        finally:
            with ThreadPoolExecutor(len(started)) as pool:
                list(pool.map(LiveServer.stop, started.values()))


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(20.0)) as client:
        yield client


def at(session: RawSession, server: LiveServer) -> RawSession:
    """The same session, talking to another worker."""
    return RawSession(session.http, server.url, session.id, session.version, session.init_result)


async def resume_at(session: RawSession, last_event_id: str) -> list[Any]:
    headers = session.headers(accept="text/event-stream", **{"Last-Event-ID": last_event_id})
    async with session.http.stream("GET", session.url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        return [event async for event in events_of(response)]


@pytest.mark.parametrize("store", ["db", "cache"])
async def test_cut_at_one_worker_resumed_at_the_other(
    cluster: Cluster, http: httpx.AsyncClient, store: str
) -> None:
    a, b = cluster.pairs[store]
    gate = uuid.uuid4().hex
    session = await open_session(http, a.url)
    async with http.stream("POST", a.url, json=call(gate, 21), headers=session.headers()) as response:
        stream = events_of(response)
        priming, first = await anext(stream), await anext(stream)
    assert first.message["params"]["progress"] == 1
    at_b = at(session, b)
    assert (await at_b.request("test/open_step_gate", {"gate": gate}))["result"] == {"opened": gate}
    stream_id = str(priming.id).rpartition(":")[0]
    events = await resume_at(at_b, str(first.id))
    check_rest(events, stream_id, 1, 21)
    # the response was delivered on the resumed stream only: a second resume from the priming event gets
    # the same single copy, never a second one
    replay = await resume_at(at(session, a), str(priming.id))
    assert [e.message.get("id") for e in replay].count(21) == 1


async def stored_seqs(database: str, stream_id: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(database) as connection:
        cursor = await connection.execute(
            "SELECT seq FROM mcp_server_streamevent WHERE stream_id = %s ORDER BY seq", (stream_id,)
        )
        return [row[0] for row in await cursor.fetchall()]


async def test_killed_worker_resumed_at_a_survivor_yields_the_32000(
    cluster: Cluster, http: httpx.AsyncClient
) -> None:
    doomed, survivor = cluster.doomed, cluster.survivor
    gate = uuid.uuid4().hex  # never opened: the call is still waiting when its worker dies
    session = await open_session(http, survivor.url)  # the survivor has served a request: its upkeep runs
    at_doomed = at(session, doomed)
    async with http.stream("POST", doomed.url, json=call(gate, 31), headers=at_doomed.headers()) as response:
        stream = events_of(response)
        priming, first = await anext(stream), await anext(stream)
        stream_id = str(priming.id).rpartition(":")[0]

        async def first_event_stored() -> bool:  # in PostgreSQL
            return 1 in await stored_seqs(cluster.database, stream_id)

        await wait_for(first_event_stored, every=0.02)
        doomed.process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(doomed.process.wait, 10)
    events = await asyncio.wait_for(resume_at(session, str(first.id)), 20 * KILL_LEASE)
    answers = [e.message for e in events]
    assert answers == [{"jsonrpc": "2.0", "id": 31, "error": {"code": -32000, "message": DEAD_WORKER}}]


@pytest.mark.parametrize("store", ["db", "cache"])
async def test_random_cuts_each_response_exactly_once(
    cluster: Cluster, http: httpx.AsyncClient, store: str
) -> None:
    """Calls cut after a random number of events (the response may already be on its way, or not even the
    priming event read), resumed at a random worker of the two: across both streams, every request id gets
    exactly one response, and every progress step arrives once."""
    import random

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    workers = cluster.pairs[store]
    session = await open_session(http, workers[0].url)
    steps = 5
    for request_id in range(100, 120):
        serving = rng.choice(workers)
        cut_after = rng.randrange(1, steps + 3)  # events read before the cut (the priming event counts)
        params = {"name": "progress", "arguments": {"steps": steps}, "_meta": {"progressToken": "t"}}
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        seen: list[Any] = []
        async with http.stream("POST", serving.url, json=body, headers=session.headers()) as response:
            async for event in events_of(response):
                seen.append(event)
                if len(seen) >= cut_after:
                    break
        answered = [e for e in seen if e.data and e.message.get("id") == request_id]
        if not answered:
            resumed = await resume_at(at(session, rng.choice(workers)), str(seen[-1].id))
            seen += resumed
        messages = [e.message for e in seen if e.data]
        answers = [m for m in messages if m.get("id") == request_id]
        progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
        assert len(answers) == 1, (seed, request_id, messages)
        assert "result" in answers[0], (seed, answers)
        assert progress == list(range(1, steps + 1)), (seed, request_id, progress)
    print(f"seed {seed}: 20 calls cut at random points, each answered exactly once")
