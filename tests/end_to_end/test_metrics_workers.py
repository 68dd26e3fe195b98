"""``/metrics`` of a site served by two Uvicorn worker processes on PostgreSQL and Redis, in
``prometheus_client``'s multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, empty at start), as the documented
*Prometheus* section says to run it.

N tool calls, served by both workers, and K slow calls still pending: every scrape, whichever worker
answers it, counts the N calls (each worker counted its own share; the scrape adds up their files) and
reports K pending, the number the admin's live page shows at the same moment (its WebSocket snapshot).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from tests.support.admin import admin_client, create_superuser
from tests.support.live import LiveServer, shared_site, start_command
from tests.support.raw import RawSession, open_session, rpc
from tests.support.wait import wait_for

UVICORN = (
    "uvicorn",
    "project.asgi:application",
    "--workers",
    "2",
    "--host",
    "127.0.0.1",
    "--port",
    "{port}",
    "--no-access-log",
)
"""The documented production command (``python -m`` it, ``{port}`` filled in)."""

SLOW = 3
"""K: the slow calls left pending while the site is scraped."""


@dataclass
class Site:
    server: LiveServer
    database: str
    multiproc: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("metrics-workers")
    multiproc = directory / "prometheus"
    multiproc.mkdir()  # empty at the start, as a deploy leaves it
    with shared_site() as env:
        env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(multiproc)}
        server = start_command(directory, UVICORN, name="uvicorn", env=env)
        try:
            create_superuser(server)
            yield Site(server, env["DATABASE_URL"], multiproc)
        finally:
            server.stop()


def rows(database: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(database) as connection:
        return list(connection.execute(sql).fetchall())


def pids(database: str, method: str, name: str) -> set[str]:
    """The worker processes that served those requests (worker ids are ``host:pid:suffix``)."""
    found = rows(
        database,
        f"select distinct worker from mcp_server_ledgerentry where method = '{method}' and name = '{name}'",
    )
    return {worker.split(":")[-2] for (worker,) in found}


def scraped(text: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def value(samples: dict[str, list[Any]], name: str, **labels: str) -> float:
    found = samples.get(name, [])
    return float(sum(s.value for s in found if all(s.labels.get(k) == v for k, v in labels.items())))


async def scrape(base: str) -> dict[str, list[Any]]:
    """One scrape on a connection of its own (either worker may accept it), from loopback as the demo's
    ``METRICS_ACCESS`` requires."""
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(f"{base}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return scraped(response.text)


async def live_snapshot(base: str) -> dict[str, Any]:
    """What the admin's *Pending requests* page gets: one snapshot from its WebSocket, signed in as staff."""
    client = await admin_client(base)
    try:
        session = client.cookies["sessionid"]
    finally:
        await client.aclose()
    async with websockets.connect(
        f"{base.replace('http://', 'ws://')}/mcp-admin/live/",
        additional_headers={"Cookie": f"sessionid={session}", "Origin": base},
        open_timeout=30,
    ) as socket:
        snapshot: dict[str, Any] = json.loads(await socket.recv())
    return snapshot


async def call_until_both_workers_served(session: RawSession, database: str) -> int:
    """Echo calls in tens until the ledger shows both workers served some; returns how many were made."""
    made = 0

    async def both_served() -> bool:
        nonlocal made
        for _ in range(10):
            answer = await session.call_tool("echo", {"text": "counted"})
            assert answer["result"]["content"][0]["text"] == "counted", answer
            made += 1
        return len(pids(database, "tools/call", "echo")) >= 2

    await wait_for(both_served, "both workers to serve echo calls", within=90)
    return made


async def test_counters_and_gauges_agree_across_two_workers(site: Site) -> None:
    server, database = site.server, site.database
    fresh = httpx.Limits(max_keepalive_connections=0)  # a connection per request: either worker takes it
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=300), limits=fresh) as http:
        session = await open_session(http, server.url)
        calls = await call_until_both_workers_served(session, database)
        slow = [
            asyncio.create_task(
                session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 120}}, n))
            )
            for n in range(1, SLOW + 1)
        ]

        async def all_pending() -> bool:
            found = rows(database, "select count(*) from mcp_server_ledgerentry where state = 'pending'")
            return bool(found[0][0] == SLOW)

        try:
            await wait_for(all_pending, "the slow calls to be pending in the ledger", within=30)
            for _ in range(6):  # several scrapes, each on a fresh connection: the same figures every time
                samples = await scrape(server.base)
                counted = dict(
                    mcp_method_name="tools/call", gen_ai_tool_name="echo", mcp_server_outcome="answered"
                )
                assert value(samples, "mcp_server_settlements_total", **counted) == calls
                assert value(samples, "mcp_server_operation_duration_seconds_count", **counted) == calls
                assert (
                    value(samples, "mcp_server_operation_duration_seconds_bucket", le="+Inf", **counted)
                    == calls
                )
                assert value(samples, "mcp_server_settlements_total", mcp_method_name="initialize") == 1
                pending = value(samples, "mcp_server_pending_requests")
                assert pending == SLOW
                assert value(samples, "mcp_server_pending_requests", gen_ai_tool_name="slow") == SLOW
                assert value(samples, "mcp_server_oldest_pending_request_age_seconds") > 0
                assert value(samples, "mcp_server_open_sessions") == 1
                assert "mcp_server_ledger_writer_queue" in samples
                assert "mcp_server_ledger_writer_lag_seconds" in samples
            snapshot = await live_snapshot(server.base)
            assert snapshot["pending_total"] == pending == SLOW
            assert sorted(row["name"] for row in snapshot["pending"]) == ["slow"] * SLOW
        finally:
            await session.delete()  # the slow calls are answered -32000
            await asyncio.gather(*slow)
    samples = await scrape(server.base)
    closed = value(
        samples, "mcp_server_settlements_total", gen_ai_tool_name="slow", mcp_server_outcome="closed"
    )
    assert closed == SLOW
    files = {p.name for p in site.multiproc.iterdir()}
    assert len({name for name in files if name.startswith("counter_")}) == 2  # one per worker
    assert len({name for name in files if name.startswith("histogram_")}) == 2
