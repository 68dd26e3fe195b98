"""Benchmark: write calls through a live Daphne worker, sequential and concurrent, on SQLite and PostgreSQL.

Each call is ``write_author`` (tests/testapp/mcp.py): one transaction that reads, writes and claims its
answer (``ctx.claim_answer``), as a write tool does. The promise ("Writes and the guarantee"): every
call succeeds, none waits on the ledger writer, each within a second. Prints, per database setup and phase,
one line: calls, ok, failures, p50, p99 and max latency in ms, how many took over a second, the worker's CPU
time per call (user + system of its process over the phase, divided by the calls: the figure that does not
depend on what else the machine runs), the client's own CPU time per call, and whether the worker logged lock
trouble ("database is locked", a failed ledger write).

The client is the raw-socket one of ``bench/loadgen.py`` (HTTP/1.1 keep-alive, one connection and one
session each; no HTTP library): driving 200 connections costs it a fraction of a millisecond of CPU per
call, printed as ``client_cpu_ms``, so it is not what the latencies measure. Each call's latency runs from
writing its request to reading its whole reply. The concurrent phase opens its sessions first, then sends
every call at once.

The worker runs as deployed: ``DEBUG`` off (``--debug`` turns it on: Django then records every query, and
on SQLite quotes each one's parameters with one more query, inside the write lock).

    .venv/bin/python bench/writes.py                         # 1,000 sequential + 200 concurrent, all setups
    .venv/bin/python bench/writes.py --setups sqlite-default --sequential 100 --concurrent 40
    .venv/bin/python bench/writes.py --tool add_author      # the demo's ModelForm tool, as a signed-in user
    .venv/bin/python bench/writes.py --tool drf_books_restock --setups postgresql
    .venv/bin/python bench/writes.py --tool add_author --server uvicorn --workers 2   # the Deploying recipe

The worker is one Daphne process (what ``runserver`` serves with Channels) unless ``--server uvicorn``, which
runs the documented *Deploying* command (``uvicorn … --workers N``); the CPU figure then sums its processes.

``--tool`` picks the write, each through the path a site would use:

- ``write_author``: a handler's own ``write_transaction`` and ``ctx.claim_answer()`` (tests/testapp/mcp.py);
- ``add_author``: ``expose_form(mcp, AuthorForm)`` (project/catalogue/mcp.py), a ModelForm tool;
- ``shelf_create``: ``expose_model(..., writes=True)`` (tests/authapp/mcp.py), a model write tool;
- ``drf_books_create`` and ``drf_books_restock``: a DRF viewset's ``create`` and a detail ``@action``
  (tests/drfapp/api.py), each caller restocking a book of its own.

The signed-in ones (all but ``write_author``) run as a superuser with an ``mcp_token``, made on the
worker's database first; a caller whose write needs a row (an author, a book) makes it before the phase.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

# ``mcp_server.checks`` reaches the models (the apps' views' CSP check): Django is set up first, as the test
# site (the servers this script starts have their own settings, from their environment).
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from bench.loadgen import Connection, replies_in  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402
from mcp_server.checks import SQLITE_OPTIONS  # noqa: E402
from tests.support.admin import create_superuser  # noqa: E402
from tests.support.auth import manage  # noqa: E402
from tests.support.live import DAPHNE, LiveServer, postgres_database, start_command  # noqa: E402

SETUPS = ("sqlite-readme", "sqlite-default", "postgresql")
WRITE_TOOLS = ("write_author", "add_author", "shelf_create", "drf_books_create", "drf_books_restock")
SIGNED_IN_TOOLS = WRITE_TOOLS[1:]
"""Tools that need a user with permissions: called with a bearer token of a superuser."""
LOCK_TROUBLE = ("database is locked", "ledger write failed", "deadlock")


def server_command(server: str, workers: int) -> tuple[str, ...]:
    """Daphne (one process, as ``runserver`` serves), or uvicorn with ``workers`` processes (the documented
    *Deploying* recipe: ``--workers`` as many as the machine's cores)."""
    if server == "daphne":
        return DAPHNE
    return ("uvicorn", "project.asgi:application", "--host", "127.0.0.1", "--port", "{port}",
            "--workers", str(workers), "--no-access-log")  # fmt: skip


@contextlib.contextmanager
def worker(
    setup: str, directory: Path, *, debug: bool = False, command: tuple[str, ...] = DAPHNE
) -> Iterator[LiveServer]:
    """The test site served on ``setup``'s database (``DEBUG`` off unless ``debug``)."""
    env: dict[str, str] = {"DJANGO_DEBUG": "1" if debug else "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    with contextlib.ExitStack() as stack:
        if setup == "postgresql":
            env["DATABASE_URL"] = stack.enter_context(postgres_database())
        else:
            options = SQLITE_OPTIONS if setup == "sqlite-readme" else {}
            env["MCP_TEST_SQLITE_OPTIONS"] = json.dumps(options)
        server = start_command(directory / setup, command, {}, name=setup, env=env)
        try:
            yield server
        finally:
            server.stop()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its live children (uvicorn's workers), in seconds."""
    total = 0.0
    for each in (pid, *children_of(pid)):
        with contextlib.suppress(OSError):
            total += cpu_seconds(each)
    return total


def children_of(pid: int) -> list[int]:
    """The ids of a process's children (Linux ``/proc``)."""
    with contextlib.suppress(OSError):
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


FAILURES: list[str] = []
"""What the failed calls got (the first few are printed)."""


class Caller:
    """Calls one tool over one connection (one session), numbering the requests."""

    def __init__(self, connection: Connection, tool: str) -> None:
        self.connection = connection
        self.tool = tool
        self.next_id = 0
        self.prefix = f"{id(self) % 16**8:x}"
        self.row: int | None = None
        """The author (``shelf_create``) or book (``drf_books_restock``) this caller's writes use."""

    async def prepare(self) -> None:
        """Make the row this caller's writes need, if any (before the phase is timed)."""
        if self.tool == "shelf_create":
            self.row = await self._made("write_author", {"name": f"Author {self.prefix}"})
        elif self.tool == "drf_books_restock":
            self.row = (await self._made("drf_books_create", self._book("Restocked")))["id"]

    def _book(self, title: str) -> dict[str, Any]:
        self.next_id += 1
        isbn = f"{self.prefix}-{self.next_id}"
        return {"title": title, "author": {"name": "Bench"}, "year": 2001, "isbn": isbn}

    def arguments(self, name: str) -> dict[str, Any]:
        """The next call's arguments: unique where the write refuses a duplicate (names, ISBNs)."""
        unique = f"{self.prefix}-{self.next_id}"
        if self.tool == "add_author":
            return {"name": f"{name} {unique}"}
        if self.tool == "shelf_create":
            return {"title": name, "author": self.row, "year": 2001, "isbn": unique}
        if self.tool == "drf_books_create":
            return self._book(name)
        if self.tool == "drf_books_restock":
            return {"pk": self.row, "copies": 1}
        return {"name": name} if self.tool == "write_author" else {"text": name}

    async def _made(self, tool: str, arguments: dict[str, Any]) -> Any:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call"}
        _status, headers, body = await self.connection.post(
            {**message, "params": {"name": tool, "arguments": arguments}}
        )
        (reply,) = [m for m in replies_in(headers, body) if m.get("id") == self.next_id]
        assert not reply["result"].get("isError"), reply
        return reply["result"]["structuredContent"].get("result", reply["result"]["structuredContent"])

    async def call(self, name: str) -> tuple[bool, float]:
        """One ``tools/call``: whether exactly one successful reply came for its id, and the seconds taken."""
        self.next_id += 1
        arguments = self.arguments(name)
        request_id = self.next_id
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": self.tool, "arguments": arguments},
        }
        started = time.perf_counter()
        try:
            status, headers, body = await self.connection.post(message)
        except (OSError, asyncio.IncompleteReadError) as exc:
            FAILURES.append(repr(exc)[:300])
            return False, time.perf_counter() - started
        seconds = time.perf_counter() - started
        mine = [m for m in replies_in(headers, body) if m.get("id") == request_id and "method" not in m]
        ok = status == 200 and len(mine) == 1 and not mine[0].get("result", {"isError": True}).get("isError")
        if not ok:
            FAILURES.append(f"HTTP {status}: {body[:300]!r}")
        return ok, seconds


def figures(results: list[tuple[bool, float]]) -> dict[str, Any]:
    """Counts and latency percentiles (ms) of one phase."""
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


async def measured(
    pid: int, calls: int, run: Callable[[], Awaitable[list[tuple[bool, float]]]]
) -> dict[str, Any]:
    """Run one phase; its figures with the worker's and the client's CPU ms per call."""
    server_before, client_before, started = process_cpu_seconds(pid), time.process_time(), time.perf_counter()
    results = await run()
    wall = time.perf_counter() - started
    server_cpu = process_cpu_seconds(pid) - server_before
    client_cpu = time.process_time() - client_before
    return {
        **figures(results),
        "wall_s": round(wall, 2),
        "server_cpu_ms": round(server_cpu / calls * 1000, 2),
        "client_cpu_ms": round(client_cpu / calls * 1000, 2),
    }


def superuser_token(server: LiveServer) -> str:
    """A superuser on the worker's database and a plain ``mcp_token`` for it."""
    username = create_superuser(server, "bench")
    return manage(server, "mcp_token", "create", username, "--name", "bench").strip()


async def opened(server: LiveServer, tool: str, bearer: str | None = None) -> Caller:
    connection = Connection("127.0.0.1", server.port, "/mcp", bearer=bearer)
    await connection.open()
    caller = Caller(connection, tool)
    await caller.prepare()
    return caller


async def drive(server: LiveServer, tool: str, sequential: int, concurrent: int) -> dict[str, dict[str, Any]]:
    """The sequential phase on one session, then ``concurrent`` sessions calling at once."""
    pid = server.process.pid
    bearer = superuser_token(server) if tool in SIGNED_IN_TOOLS else None
    first = await opened(server, tool, bearer)

    async def one_by_one() -> list[tuple[bool, float]]:
        return [await first.call(f"Sequential {i % 50}") for i in range(sequential)]

    phases = {"sequential": await measured(pid, sequential, one_by_one)}
    callers = [await opened(server, tool, bearer) for _ in range(concurrent)]

    async def at_once() -> list[tuple[bool, float]]:
        return list(await asyncio.gather(*(c.call(f"Concurrent {i % 50}") for i, c in enumerate(callers))))

    phases["concurrent"] = await measured(pid, concurrent, at_once)
    for caller in [first, *callers]:
        with contextlib.suppress(OSError):
            await caller.connection.close()
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--sequential", type=int, default=1000)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument(
        "--tool",
        default="write_author",
        help=f"one of {', '.join(WRITE_TOOLS)} (see above); or a tool taking `text` (echo), to compare",
    )
    parser.add_argument("--debug", action="store_true", help="run the worker with DEBUG on")
    parser.add_argument(
        "--server",
        choices=("daphne", "uvicorn"),
        default="daphne",
        help="daphne: one process (as runserver serves); uvicorn: the documented Deploying recipe",
    )
    parser.add_argument("--workers", type=int, default=2, help="uvicorn's worker processes (default 2)")
    args = parser.parse_args()
    command = server_command(args.server, args.workers)
    with tempfile.TemporaryDirectory(prefix="mcp-bench-writes-") as tmp:
        for setup in args.setups:
            with worker(setup, Path(tmp), debug=args.debug, command=command) as server:
                phases = asyncio.run(drive(server, args.tool, args.sequential, args.concurrent))
                trouble = [line for line in server.log().splitlines() if any(t in line for t in LOCK_TROUBLE)]
            for phase, numbers in phases.items():
                line = {
                    "setup": setup,
                    "tool": args.tool,
                    "server": server_label(args),
                    "phase": phase,
                    **numbers,
                }
                print(json.dumps({**line, "lock_trouble": len(trouble)}), flush=True)
            for failure in FAILURES[:3]:
                print("  failed:", failure)
            FAILURES.clear()


def server_label(args: argparse.Namespace) -> str:
    return "daphne" if args.server == "daphne" else f"uvicorn x{args.workers}"


if __name__ == "__main__":
    main()
