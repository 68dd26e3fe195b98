"""Benchmark: tools/call through a real Daphne server at several concurrency levels, for each ledger backend.

Prints, per backend and concurrency: throughput, p50/p99 latency, and the counts of requests sent,
answered, cancelled, duplicated, missing, and left pending (in the worker's memory and in the ledger).
A share of the calls are slow and cancelled by the client, to exercise settlement without a reply.
Then the cost of the ledger itself: microseconds per request (open + settle) for each backend, in process,
and of the event store (resumable SSE streams): per event, on the request path and written behind.

    .venv/bin/python bench/bench.py                  # SQLite + local-memory cache
    .venv/bin/python bench/bench.py --postgres --redis
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.live import DAPHNE, LiveServer, start_command  # noqa: E402
from tests.support.raw import content_type, messages_of, open_session, rpc  # noqa: E402

BACKENDS = {
    "database": "mcp_server.stores.ledger.database.DatabaseLedger",
    "cache": "mcp_server.stores.ledger.cache.CacheLedger",
}


@dataclass
class Counts:
    sent: int = 0
    answered: int = 0
    cancelled: int = 0
    duplicated: int = 0
    missing: int = 0
    latencies: list[float] = field(default_factory=list)


async def worker(
    server: LiveServer, http: httpx.AsyncClient, requests: int, cancel_every: int, counts: Counts
) -> None:
    session = await open_session(http, server.url)
    for n in range(requests):
        request_id = session.next_id()
        cancel = cancel_every and n % cancel_every == cancel_every - 1
        params = (
            {"name": "slow", "arguments": {"seconds": 5}}
            if cancel
            else {"name": "echo", "arguments": {"text": "x"}}
        )
        counts.sent += 1
        started = time.perf_counter()
        call = asyncio.create_task(session.post(rpc("tools/call", params, request_id)))
        if cancel:
            await session.wait_pending(request_id)
            await session.cancel(request_id)
        try:
            response = await call
        except httpx.HTTPError:
            counts.missing += 1
            continue
        counts.latencies.append(time.perf_counter() - started)
        replies = [m for m in messages_of(response) if m.get("id") == request_id and "method" not in m]
        if len(replies) > 1:
            counts.duplicated += 1
        elif replies:
            counts.answered += 1
        elif cancel and (response.status_code == 202 or content_type(response) == "text/event-stream"):
            counts.cancelled += 1  # no reply: a bodiless 202, or (sse) a stream that ended without one
        else:
            counts.missing += 1
    await session.delete()


async def drive(server: LiveServer, concurrency: int, total: int, cancel_every: int) -> dict[str, Any]:
    counts = Counts()
    limits = httpx.Limits(max_connections=concurrency * 2 + 4, max_keepalive_connections=concurrency * 2 + 4)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        per_worker = max(1, total // concurrency)
        started = time.perf_counter()
        await asyncio.gather(
            *(worker(server, http, per_worker, cancel_every, counts) for _ in range(concurrency))
        )
        elapsed = time.perf_counter() - started
        probe = await open_session(http, server.url)
        stats = await probe.stats()
        await probe.delete()
    latencies = sorted(counts.latencies)
    return {
        "rps": counts.sent / elapsed,
        "p50": statistics.median(latencies) * 1000 if latencies else 0.0,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else 0.0,
        "counts": counts,
        "pending_memory": stats["inflight"],
        "pending_ledger": stats["ledger_pending"],
    }


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def ledger_cost(env: dict[str, str], rounds: int) -> dict[str, float]:
    """Microseconds per request (open + settle) of each backend, measured in this process."""
    os.environ.update(
        {k: v for k, v in env.items() if k in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    )
    os.environ["MCP_TEST_OVERRIDES"] = "{}"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from mcp_server.ledger import LedgerRecord, State, request_key
    from mcp_server.stores.ledger.cache import CacheLedger
    from mcp_server.stores.ledger.database import DatabaseLedger

    async def measure(ledger: Any) -> float:
        started = time.perf_counter()
        for n in range(rounds):
            record = LedgerRecord(
                session_id=None, request_key=request_key(n), method="tools/call", name="echo"
            )
            await ledger.aopen(record)
            await ledger.asettle(record, State.ANSWERED, {"result": True})
        return (time.perf_counter() - started) / rounds * 1e6

    return {
        "database": asyncio.run(measure(DatabaseLedger({}))),
        "cache": asyncio.run(measure(CacheLedger({"RETENTION": 60}))),
    }


def event_store_cost(rounds: int, batch: int = 100) -> dict[str, float]:
    """Microseconds per SSE event of each event store, measured in this process (after
    :func:`ledger_cost`, which set Django up): ``queue`` what the request path pays
    (:meth:`EventWriter.add`), the rest what the writer's thread pays to write batches of ``batch`` events
    (the database's executemany, the cache's keys)."""
    from django.core.cache import caches

    from mcp_server.runtime.event_writer import EventWriter
    from mcp_server.stores.events.base import EventStore, StoredEvent
    from mcp_server.stores.events.cache import CacheEventStore
    from mcp_server.stores.events.database import DatabaseEventStore

    data = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}'

    def events(stream: str) -> list[StoredEvent]:
        return [StoredEvent("bench-session", stream, n, data) for n in range(1, rounds + 1)]

    async def queue_cost() -> float:
        writer = EventWriter(DatabaseEventStore({}), interval=3600)
        rows = events("pqueue")
        started = time.perf_counter()
        for row in rows:
            writer.add(row)
        elapsed = time.perf_counter() - started
        await writer.aclose(grace=30)
        return elapsed / rounds * 1e6

    def write_cost(store: EventStore, stream: str) -> float:
        rows = events(stream)
        started = time.perf_counter()
        for start in range(0, rounds, batch):
            store.write(rows[start : start + batch])
        return (time.perf_counter() - started) / rounds * 1e6

    caches["default"].clear()
    options = {"RETENTION": 60, "MAX_EVENTS": rounds + 1}
    return {
        "queue": asyncio.run(queue_cost()),
        "database": write_cost(DatabaseEventStore(options), "pdb"),
        "cache": write_cost(CacheEventStore(options), "pcache"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated levels (default 1,8,32)")
    parser.add_argument("--requests", type=int, default=400, help="requests per level (default 400)")
    parser.add_argument("--cancel-every", type=int, default=10, help="cancel one call in N (0: none)")
    parser.add_argument("--mode", default="auto", choices=["auto", "json", "sse"])
    parser.add_argument("--postgres", action="store_true", help="database on local PostgreSQL")
    parser.add_argument("--redis", action="store_true", help="channel layer and cache on local Redis")
    parser.add_argument("--ledger-rounds", type=int, default=2000)
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated ledger backends")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="mcp-bench-"))
    env: dict[str, str] = {}
    if args.redis:
        env["REDIS_URL"] = "redis://127.0.0.1:6379/9"  # the benchmark's own database, emptied first
        import redis

        redis.Redis.from_url(env["REDIS_URL"]).flushdb()
    if args.postgres:
        env["DATABASE_URL"] = _postgres_database()

    print(
        f"mode={args.mode} requests/level={args.requests} cancel 1 in {args.cancel_every} "
        f"db={'postgres' if args.postgres else 'sqlite'} layer/cache={'redis' if args.redis else 'memory'}"
    )
    header = (
        f"{'ledger':9} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'sent':>6} {'answered':>8} "
        f"{'cancelled':>9} {'dup':>4} {'missing':>7} {'pend mem':>8} {'pend ledger':>11} {'rss KiB':>9}"
    )
    print(header)
    for name in args.backends.split(","):
        path = BACKENDS[name]
        overrides = {"RESPONSE_MODE": args.mode, "LEDGER_BACKEND": path}
        server = start_command(workdir, DAPHNE, overrides, name=f"bench-{name}", env=env)
        try:
            asyncio.run(drive(server, 4, 100, 0))  # warm-up
            for level in levels:
                result = asyncio.run(drive(server, level, args.requests, args.cancel_every))
                c = result["counts"]
                print(
                    f"{name:9} {level:>4} {result['rps']:>8.0f} {result['p50']:>8.1f} {result['p99']:>8.1f} "
                    f"{c.sent:>6} {c.answered:>8} {c.cancelled:>9} {c.duplicated:>4} {c.missing:>7} "
                    f"{result['pending_memory']:>8} {result['pending_ledger']:>11} "
                    f"{rss_kib(server.process.pid):>9}"
                )
        finally:
            server.stop()
    cost_env = {"DJANGO_SETTINGS_MODULE": "tests.settings", **env}
    cost_env.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'ledger-cost.sqlite3'}")
    costs = ledger_cost(cost_env, args.ledger_rounds)
    print(
        f"ledger cost per request (open + settle, in process, {args.ledger_rounds} rounds): "
        + ", ".join(f"{k} {v:.0f} µs" for k, v in costs.items())
    )
    events = event_store_cost(args.ledger_rounds)
    print(
        f"event store cost per SSE event ({args.ledger_rounds} events, batches of 100): request path "
        f"{events.pop('queue'):.1f} µs; written behind: "
        + ", ".join(f"{k} {v:.0f} µs" for k, v in events.items())
    )


def _postgres_database() -> str:
    import uuid

    import psycopg

    name = f"mcp_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgres://postgres@127.0.0.1:5432/{name}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return url


if __name__ == "__main__":
    main()
