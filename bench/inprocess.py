"""This project's ASGI application driven in process, without an HTTP server: what a call costs it alone.

``tools/call`` echo at concurrency ``--concurrency`` on uvloop, each call a POST handed to the application as
an ASGI server would hand it (2026-07-28 requests: no session). Prints the CPU time per call (every thread of
the process, the ledger writer's included, and each thread's share), what the cyclic garbage collector did
meanwhile (passes per generation and their time), and with ``--cycles`` the objects each call left to the
collector (run with the collector off: none is the goal), or with ``--profile N`` the N functions of most own
time (``cProfile``).

    .venv/bin/python bench/inprocess.py                      # 20,000 calls, c16
    .venv/bin/python bench/inprocess.py --cycles --calls 2000
    .venv/bin/python bench/inprocess.py --profile 40 --calls 10000
    .venv/bin/python bench/inprocess.py --hold-lock          # the event loop alone (the writer falls behind)

It found the reference cycle every request used to leave (49 objects a call, a sixth of its CPU in the
collector's passes): see the benchmarks page.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.proc import cpu_seconds  # noqa: E402

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-inprocess", "version": "1.0"},
}
HEADERS = [
    (b"host", b"localhost"),
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", MODERN.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"echo"),
]


class Collector:
    """The collector's passes per generation and their time, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.passes = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        self.passes[generation] += 1
        self.seconds[generation] += time.perf_counter() - self._started


async def call(application: Any, request_id: int) -> None:
    """One ``tools/call`` POST through the application; fails unless it is answered 200."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}, "_meta": META},
        },
        separators=(",", ":"),
    ).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [*HEADERS, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    bodies = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []
    answered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if bodies:
            return bodies.pop()
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application(scope, receive, send)
    answered.set()
    if not sent or sent[0].get("status") != 200:
        raise RuntimeError(f"not answered 200: {sent[:1]}")


async def drive(application: Any, calls: int, concurrency: int, *, hold_lock: bool = False) -> None:
    async def worker(first: int) -> None:
        for n in range(calls // concurrency):
            await call(application, first + n)
            if hold_lock:
                continue
            # What a server's event loop does between callbacks: it lets go of the interpreter lock while it
            # polls its sockets. Without it this loop never does, and the ledger writer's thread, starved of
            # the lock, wrote next to nothing: its records piled up (20,000 after 20,000 calls), its CPU was
            # missing from the figure, and the collector's full passes walked the pile (~9 ms each).
            # (``os.sched_yield`` let go too briefly: the writer still fell behind.) ``--hold-lock``: as
            # before, the event loop's own cost alone, steadier for comparing changes to the request path.
            time.sleep(0)  # noqa: ASYNC251

    await asyncio.gather(*(worker(k * 10_000_000) for k in range(concurrency)))


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, by thread name."""
    out: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.native_id is None:  # (not started)
            continue
        try:
            out[thread.name] = cpu_seconds(thread=thread.native_id)
        except OSError:  # (ended meanwhile, or no /proc)
            continue
    return out


def cyclic_garbage() -> Counter[str]:
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    found = Counter(type(o).__qualname__ for o in gc.garbage)
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()
    return found


async def measure(application: Any, args: argparse.Namespace) -> None:
    await drive(application, 512, 16)  # warm-up: the runtime starts, the caches fill
    if args.cycles:
        gc.collect()
        gc.disable()
    collector = Collector()
    gc.callbacks.append(collector)
    profile = None
    if args.profile:
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    threads_before = thread_cpu()
    cpu, wall = time.process_time(), time.perf_counter()
    await drive(application, args.calls, args.concurrency, hold_lock=args.hold_lock)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    threads = {name: seconds - threads_before.get(name, 0.0) for name, seconds in thread_cpu().items()}
    if profile is not None:
        import pstats

        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
    gc.callbacks.remove(collector)
    print(
        f"{args.calls} calls at c{args.concurrency}: {cpu / args.calls * 1e6:.1f} us CPU a call, "
        f"{args.calls / wall:.0f} calls/s"
    )
    busy = {name: seconds for name, seconds in threads.items() if seconds > 0}
    shares = ", ".join(f"{name} {seconds / args.calls * 1e6:.1f} us" for name, seconds in busy.items())
    print(f"  of which, by thread: {shares}")
    spent = sum(collector.seconds)
    print(
        f"collector: passes {collector.passes}, ms {[round(s * 1000, 1) for s in collector.seconds]}, "
        f"{spent / args.calls * 1e6:.1f} us a call"
    )
    if args.cycles:
        garbage = cyclic_garbage()
        gc.enable()
        print(f"cyclic garbage: {sum(garbage.values()) / args.calls:.2f} objects a call")
        for name, count in garbage.most_common(20):
            print(f"  {count / args.calls:6.2f} {name}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--cycles", action="store_true", help="collector off: count what each call leaves it")
    parser.add_argument("--profile", type=int, default=0, help="print the N functions of most own time")
    parser.add_argument(
        "--hold-lock",
        action="store_true",
        help="never let go of the interpreter lock between calls: the event loop's cost alone (the ledger "
        "writer falls behind, and its records pile up)",
    )
    args = parser.parse_args()

    from tests.support.live import migrated_template

    workdir = Path(tempfile.mkdtemp(prefix="mcp-bench-inprocess-"))
    try:
        database = workdir / "bench.sqlite3"
        shutil.copy(migrated_template(workdir), database)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
        os.environ.update(
            DATABASE_URL=f"sqlite:///{database}",
            DJANGO_DEBUG="0",
            DJANGO_ALLOWED_HOSTS="localhost",
            MCP_TEST_OVERRIDES=json.dumps({"RESPONSE_MODE": "auto"}),
        )
        import django

        django.setup()
        import uvloop

        from project.asgi import application

        uvloop.run(measure(application, args))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
