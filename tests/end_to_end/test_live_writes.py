"""Write calls through a live worker on SQLite: none waits on the ledger writer while it holds the lock, and
SIGTERM ends the worker in bounded time under concurrent writes (docs: "Writes and the guarantee", I11).

``write_author`` (tests/testapp/mcp.py) reads, writes and claims its answer in one ``write_transaction``.
The servers run with the documented SQLite options (WAL, ``IMMEDIATE``) but a 3 s lock timeout, and with
Django's default options (deferred transactions, a rollback journal, 5 s): a claim that waited for the ledger
batch holding its row would stall until that timeout and leave ``database is locked`` in the log, and a
deferred transaction that read first would fail at once. Every call must succeed, nothing of that kind may
be logged, and each request must have exactly one ledger row.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_server.transports.shutdown import EXIT_MARGIN
from tests.support.live import LiveServer, start_server, stop_process
from tests.support.raw import RawSession, open_session, rpc
from tests.support.wait import wait_for

DOCUMENTED_OPTIONS = {
    "timeout": 3,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
SQLITE_OPTIONS = {"documented": DOCUMENTED_OPTIONS, "django-default": {}}

GRACE, STORE_TIMEOUT = 3.0, 2.0
LEASE = 2.0
"""The SIGTERM test's lease: what a worker ended by its watchdog left pending is a survivor's after it."""
LOCK_TROUBLE = ("database is locked", "ledger write failed", "lost at shutdown")


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[LiveServer]]:
    started: list[LiveServer] = []
    yield started
    for server in started:
        stop_process(server.process, grace=2.0)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=120) as client:
        yield client


def serve(
    servers: list[LiveServer], directory: Path, options: dict[str, Any], **overrides: Any
) -> LiveServer:
    server = start_server(directory, overrides, MCP_TEST_SQLITE_OPTIONS=json.dumps(options))
    servers.append(server)
    return server


def rows(server: LiveServer) -> list[tuple[str, str]]:
    """``(request id, state)`` of the ledger's ``tools/call`` rows."""
    database = server.env["DATABASE_URL"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(database, timeout=30)) as db:
        query = "select request_key, state from mcp_server_ledgerentry where method = 'tools/call'"
        return db.execute(query).fetchall()


async def write(session: RawSession, name: str, rollback: bool = False) -> dict[str, Any]:
    return await session.call_tool("write_author", {"name": name, "rollback": rollback})


@pytest.mark.parametrize("options", sorted(SQLITE_OPTIONS))
async def test_sequential_and_concurrent_writes_all_succeed(
    servers: list[LiveServer], tmp_path: Path, http: httpx.AsyncClient, options: str
) -> None:
    """100 sequential and 40 concurrent writes (a tenth rolled back after the claim): every call answered
    with its result, no lock trouble logged, one row per request."""
    server = serve(servers, tmp_path, SQLITE_OPTIONS[options])
    session = await open_session(http, server.url)
    answers = [await write(session, f"Author {i % 7}", rollback=i % 10 == 0) for i in range(100)]
    others = [await open_session(http, server.url) for _ in range(4)]
    answers += await asyncio.gather(
        *(write(others[i % 4], f"Author {i % 5}", rollback=i % 10 == 0) for i in range(40))
    )
    failed = [a for a in answers if "error" in a or a["result"].get("isError")]
    assert failed == [], server.log()
    log = server.log()
    assert not [line for line in log.splitlines() if any(t in line for t in LOCK_TROUBLE)], log

    async def all_written() -> bool:  # written behind the request path: a pending row's settlement may follow
        recorded = rows(server)
        return len(recorded) >= 140 and {state for _key, state in recorded} == {"answered"}

    await wait_for(all_written, within=30)
    recorded = rows(server)
    assert len(recorded) == 140, recorded
    assert {state for _key, state in recorded} == {"answered"}


async def test_sigterm_under_concurrent_writes_ends_the_worker_in_bounded_time(
    servers: list[LiveServer], tmp_path: Path, http: httpx.AsyncClient
) -> None:
    """20 clients write without pause and a sync tool blocks a thread for two minutes; SIGTERM must end
    the worker within SHUTDOWN_GRACE + STORE_TIMEOUT (plus the watchdog's margin and slack for a loaded
    machine), with no ledger record lost: each is written settled, or, when the watchdog ends the worker
    with a write still in its transaction (the blocked thread keeps the graceful end from finishing), left
    pending under a lease that a survivor settles once it runs out."""
    server = serve(
        servers,
        tmp_path,
        DOCUMENTED_OPTIONS,
        SHUTDOWN_GRACE=GRACE,
        STORE_TIMEOUT=STORE_TIMEOUT,
        LEASE_TIMEOUT=LEASE,
    )
    sessions = [await open_session(http, server.url) for _ in range(20)]
    stop, flowing = asyncio.Event(), asyncio.Event()
    done: list[int] = []

    async def writer(session: RawSession, n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                answer = await write(session, f"Writer {n} {i}")
            except (httpx.HTTPError, AssertionError):
                return  # the worker is gone
            if "error" in answer:
                return  # answered -32000 by the shutdown
            done.append(n)
            if len(done) >= 40:
                flowing.set()
            i += 1

    blocked = asyncio.create_task(
        sessions[0].post(rpc("tools/call", {"name": "blocking_sleep", "arguments": {"seconds": 120}}, 7))
    )
    await sessions[0].wait_pending(7)
    writers = [asyncio.create_task(writer(s, n)) for n, s in enumerate(sessions[1:])]
    await asyncio.wait_for(flowing.wait(), 120)  # writes are going through
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    bound = GRACE + STORE_TIMEOUT + EXIT_MARGIN
    try:
        await asyncio.to_thread(server.process.wait, bound + 10.0)  # slack: a shared, loaded machine
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {bound + 10}s after SIGTERM:\n{server.log()}") from None
    took = time.monotonic() - signalled
    stop.set()
    await asyncio.gather(*writers, return_exceptions=True)
    blocked.cancel()
    await asyncio.gather(blocked, return_exceptions=True)
    log = server.log()
    assert "lost at shutdown" not in log, log
    survivor = start_server(
        tmp_path,
        {"LEASE_TIMEOUT": LEASE},
        name="survivor",
        DATABASE_URL=server.env["DATABASE_URL"],
        MCP_TEST_SQLITE_OPTIONS=json.dumps(DOCUMENTED_OPTIONS),
    )
    servers.append(survivor)
    await open_session(http, survivor.url)  # under Daphne (no ASGI lifespan) a worker's upkeep starts then

    async def nothing_pending() -> bool:
        return not [row for row in await asyncio.to_thread(rows, server) if row[1] == "pending"]

    await wait_for(nothing_pending, within=10 * LEASE)  # the survivor's upkeep runs every third of a lease
    recorded = rows(server)
    assert len(recorded) >= len(done) + 1, (took, log)
