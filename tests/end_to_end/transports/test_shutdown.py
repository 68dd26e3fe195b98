"""Graceful shutdown on SIGTERM under Uvicorn (and Daphne for open GET streams), against real servers.

The docs: "On SIGTERM (Daphne) or ASGI lifespan shutdown a worker answers its in-flight requests with -32000
within SHUTDOWN_GRACE". Uvicorn sends lifespan shutdown only once every open response is complete, so a
request in flight, or a GET stream a client keeps open, would hold Uvicorn's exit for as long as they
last; the signal itself must start the shutdown. Every wait here is for a response, a stream's end or the
process's exit, under a timeout measured against the configured grace.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live import (
    ROOT,
    LiveServer,
    base_env,
    free_port,
    migrated_template,
    start_server,
    stop_process,
    wait_for_port,
)
from tests.support.raw import messages_of, open_session, rpc

GRACE = 10.0
"""SHUTDOWN_GRACE of the servers here: every step of a shutdown must end well within it."""

SHUTTING_DOWN = {"code": -32000, "message": "Connection closed: server shutting down"}


def start_uvicorn(directory: Path, overrides: dict[str, Any]) -> LiveServer:
    """Uvicorn serving the test site on 127.0.0.1, with its own SQLite file (ledger in the database)."""
    directory.mkdir(parents=True, exist_ok=True)
    database = directory / "uvicorn.sqlite3"
    shutil.copy(migrated_template(directory), database)
    env = base_env(database, overrides)
    port = free_port()
    log_path = directory / f"uvicorn-{port}.log"
    command = ["-m", "uvicorn", "project.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, *command], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    server = LiveServer(port=port, process=process, log_path=log_path, env=env)
    try:
        wait_for_port(port, process)
    except Exception:
        server.stop()
        raise RuntimeError(f"uvicorn failed to start:\n{server.log()}") from None
    return server


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[str, dict[str, Any]], LiveServer]]:
    """Start servers by kind ("uvicorn" or "daphne"); each is stopped at the end of the test."""
    started: list[LiveServer] = []

    def _start(kind: str, overrides: dict[str, Any]) -> LiveServer:
        directory = tmp_path / f"{kind}-{len(started)}"
        if kind == "uvicorn":
            server = start_uvicorn(directory, overrides)
        else:
            server = start_server(directory, overrides, name="daphne")
        started.append(server)
        return server

    yield _start
    for server in started:
        stop_process(server.process, grace=2.0)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60) as client:
        yield client


def ledger_rows(server: LiveServer) -> list[tuple[str, str, str]]:
    """``(method, name, state)`` of every ledger row of the server's database."""
    database = server.env["DATABASE_URL"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(database)) as db:
        return db.execute("select method, name, state from mcp_server_ledgerentry").fetchall()


def exit_code(server: LiveServer, started: float) -> int:
    """Wait for the process to exit, within the grace counted from ``started``."""
    try:
        return server.process.wait(timeout=max(0.1, GRACE - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {GRACE}s after SIGTERM:\n{server.log()}") from None


# Uvicorn re-raises the signal it caught once its graceful shutdown is over (with the default handler
# restored), so its process ends by SIGTERM; Daphne exits 0.
EXIT_CODES = {"uvicorn": -signal.SIGTERM, "daphne": 0}


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_uvicorn_sigterm_answers_a_request_in_flight_within_the_grace(
    serve: Callable[[str, dict[str, Any]], LiveServer], http: httpx.AsyncClient, mode: str
) -> None:
    server = serve("uvicorn", {"RESPONSE_MODE": mode, "SHUTDOWN_GRACE": GRACE})
    session = await open_session(http, server.url)
    call = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 600}}, 61))
    )
    await session.wait_pending(61)
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        response = await asyncio.wait_for(call, GRACE)
    except TimeoutError:
        raise AssertionError(f"no answer within the grace of {GRACE}s:\n{server.log()}") from None
    assert response.status_code == 200
    [answer] = messages_of(response)
    assert answer == {"jsonrpc": "2.0", "id": 61, "error": SHUTTING_DOWN}
    assert exit_code(server, signalled) == EXIT_CODES["uvicorn"]
    assert time.monotonic() - signalled < GRACE
    assert ("tools/call", "slow", "closed") in ledger_rows(server)
    assert [row for row in ledger_rows(server) if row[2] == "pending"] == []
    assert "Application shutdown complete" in server.log()  # the lifespan shutdown ran too


@pytest.mark.parametrize("kind", ["uvicorn", "daphne"])
async def test_sigterm_ends_an_open_get_stream_and_the_server_exits(
    serve: Callable[[str, dict[str, Any]], LiveServer], http: httpx.AsyncClient, kind: str
) -> None:
    """A client's standalone GET stream (the official client keeps one open) does not hold the exit."""
    server = serve(kind, {"SHUTDOWN_GRACE": GRACE})
    session = await open_session(http, server.url)
    headers = session.headers(accept="text/event-stream")
    async with http.stream("GET", server.url, headers=headers) as stream:
        assert stream.status_code == 200
        chunks = stream.aiter_text()
        opening = await anext(chunks)  # the stream is open: its priming event (2025-11-25)
        assert opening.startswith("id: g"), opening
        assert "\ndata: \n" in opening, opening
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(GRACE):
                rest = [chunk async for chunk in chunks]  # ends when the server ends the stream
        except TimeoutError:
            raise AssertionError(f"the GET stream outlived the grace of {GRACE}s:\n{server.log()}") from None
    assert "".join(rest).strip() == ""  # no event, just the end
    assert exit_code(server, signalled) == EXIT_CODES[kind]
    assert [row for row in ledger_rows(server) if row[2] == "pending"] == []
