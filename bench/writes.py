"""Benchmark: write calls through a live Daphne worker, sequential and concurrent, on SQLite and PostgreSQL.

Each call is ``write_author`` (tests/testapp/mcp.py): one transaction that reads, writes and claims its
answer (``ctx.claim_answer``), as a write tool does. The README's promise ("Writes and the guarantee"): every
call succeeds, none waits on the ledger writer, each within a second. Prints, per database setup and phase,
one line: calls, ok, failures, p50, p99 and max latency in ms, and whether the worker logged lock trouble
("database is locked", a failed ledger write).

    .venv/bin/python bench/writes.py                         # 1,000 sequential + 200 concurrent, all setups
    .venv/bin/python bench/writes.py --setups sqlite-default --sequential 100 --concurrent 40
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_server.site_checks import SQLITE_OPTIONS  # noqa: E402
from tests.live import LiveServer, postgres_database, start_server  # noqa: E402
from tests.raw import RawSession, open_session  # noqa: E402

SETUPS = ("sqlite-readme", "sqlite-default", "postgresql")
LOCK_TROUBLE = ("database is locked", "ledger write failed", "deadlock")


@contextlib.contextmanager
def worker(setup: str, directory: Path) -> Iterator[LiveServer]:
    env: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        if setup == "postgresql":
            env["DATABASE_URL"] = stack.enter_context(postgres_database())
        else:
            options = SQLITE_OPTIONS if setup == "sqlite-readme" else {}
            env["MCP_TEST_SQLITE_OPTIONS"] = json.dumps(options)
        server = start_server(directory / setup, {}, name=setup, **env)
        try:
            yield server
        finally:
            server.stop()


TOOL = ["write_author"]
"""The tool called (``--tool``: ``echo``, for comparison: the same path without a write)."""

FAILURES: list[str] = []
"""What the failed calls got (the first few are printed)."""


async def call(session: RawSession, name: str) -> tuple[bool, float]:
    started = time.perf_counter()
    try:
        answer = await session.call_tool(
            TOOL[0], {"name": name} if TOOL[0] == "write_author" else {"text": name}
        )
        ok = "result" in answer and not answer["result"].get("isError")
        if not ok:
            FAILURES.append(json.dumps(answer)[:300])
    except (httpx.HTTPError, AssertionError) as exc:
        FAILURES.append(repr(exc)[:300])
        ok = False
    return ok, time.perf_counter() - started


def figures(results: list[tuple[bool, float]]) -> dict[str, Any]:
    latencies = sorted(seconds for _ok, seconds in results)
    ok = sum(1 for good, _s in results if good)

    def at(share: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(share * len(latencies)))] * 1000, 1)

    return {
        "calls": len(results),
        "ok": ok,
        "failures": len(results) - ok,
        "p50_ms": at(0.5),
        "p99_ms": at(0.99),
        "max_ms": round(latencies[-1] * 1000, 1),
        "over_1s": sum(1 for seconds in latencies if seconds > 1.0),
    }


async def drive(server: LiveServer, sequential: int, concurrent: int) -> dict[str, dict[str, Any]]:
    limits = httpx.Limits(max_connections=concurrent + 10, max_keepalive_connections=concurrent + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        session = await open_session(http, server.url)
        results = [await call(session, f"Sequential {i % 50}") for i in range(sequential)]
        sessions = [await open_session(http, server.url) for _ in range(concurrent)]
        together = await asyncio.gather(*(call(s, f"Concurrent {i % 50}") for i, s in enumerate(sessions)))
    return {"sequential": figures(results), "concurrent": figures(list(together))}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--sequential", type=int, default=1000)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument(
        "--tool", default="write_author", help="compare with another tool taking `text` (echo)"
    )
    args = parser.parse_args()
    TOOL[0] = args.tool
    with tempfile.TemporaryDirectory(prefix="mcp-bench-writes-") as tmp:
        for setup in args.setups:
            with worker(setup, Path(tmp)) as server:
                phases = asyncio.run(drive(server, args.sequential, args.concurrent))
                trouble = [line for line in server.log().splitlines() if any(t in line for t in LOCK_TROUBLE)]
            for phase, numbers in phases.items():
                print(json.dumps({"setup": setup, "phase": phase, **numbers, "lock_trouble": len(trouble)}))
            for failure in FAILURES[:3]:
                print("  failed:", failure)
            FAILURES.clear()


if __name__ == "__main__":
    main()
