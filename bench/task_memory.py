"""What tasks cost a live server: the memory of many tasks with large arguments once they end, and the CPU
of an idle server holding parked tasks.

    .venv/bin/python bench/task_memory.py                      # 1000 tasks of 1 MB, 150 parked, 10 s idle
    .venv/bin/python bench/task_memory.py --tasks 200 --parked 50 --idle 5

Starts its own server (Daphne, SQLite, the test site, the task limits off). Memory: ``--tasks`` tasks of
``confirm_delete`` whose argument is ``--mb`` MB, created in waves of ``--wave`` (each task parks
``input_required``, holding its argument), then cancelled with ``tasks/cancel``; prints the server's RSS
before, at the peak of each wave and after every hundred tasks ended (a task that kept its memory, or freed
it only at a full collection, shows as RSS growing with the count), then what a full collection (the test
site's ``test/collect``) still frees. The server runs with ``DEBUG`` off (``DEBUG`` keeps every query, 1 MB
parameters included) and glibc's mmap threshold fixed at 64 KiB (``--glibc-default`` leaves it dynamic:
freed 1 MB blocks then stay in the heap, and RSS shows the high-water mark rather than what is referenced).
CPU: ``--parked`` tasks parked
``input_required``, then the server's CPU seconds over ``--idle`` seconds of silence, beside the same
measure with no task. A script that prints figures, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import rss_kib  # noqa: E402
from bench.proc import cpu_seconds  # noqa: E402
from tests.support.live import DAPHNE, LiveServer, start_command  # noqa: E402
from tests.support.raw import messages_of, rpc, sessionless_headers, sessionless_meta  # noqa: E402
from tests.support.wait import wait_for  # noqa: E402

CAPABILITIES: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}


class Client:
    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.ids = http, url, 0

    async def call(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        self.ids += 1
        meta = sessionless_meta(CAPABILITIES, {"name": "task-bench", "version": "1"})
        body = rpc(method, {**params, "_meta": meta}, self.ids)
        response = await self.http.post(self.url, json=body, headers=sessionless_headers(method, name))
        message = messages_of(response)[-1]
        if "result" not in message:
            raise RuntimeError(f"{method}: {message}")
        return dict(message["result"])

    async def create(self, filename: str) -> str:
        params = {"name": "confirm_delete", "arguments": {"filename": filename}}
        return str((await self.call("tools/call", params, "confirm_delete"))["taskId"])

    async def status(self, task_id: str) -> str:
        return str((await self.call("tasks/get", {"taskId": task_id}, task_id))["status"])

    async def cancel(self, task_id: str) -> None:
        await self.call("tasks/cancel", {"taskId": task_id}, task_id)


async def parked(client: Client, task_ids: list[str], within: float = 60.0) -> None:
    """Wait until every task is parked input_required (the script polls; the server does not)."""

    async def all_parked() -> bool:
        statuses = [await client.status(task_id) for task_id in task_ids]
        return all(status == "input_required" for status in statuses)

    await wait_for(all_parked, f"{len(task_ids)} tasks parked input_required", within=within, every=0.05)


async def memory(server: LiveServer, client: Client, args: argparse.Namespace) -> None:
    pid = server.process.pid
    payload = "m" * (args.mb * 1024 * 1024)
    warm = [await client.create("warm-up") for _ in range(5)]
    await parked(client, warm)
    for task_id in warm:
        await client.cancel(task_id)
    base = rss_kib(pid)
    print(f"memory: {args.tasks} tasks of {args.mb} MB arguments, waves of {args.wave}")
    print(f"  RSS before: {base / 1024:.0f} MB")
    ended, peak = 0, base
    started = time.monotonic()
    while ended < args.tasks:
        count = min(args.wave, args.tasks - ended)
        wave = await asyncio.gather(*(client.create(payload) for _ in range(count)))
        await parked(client, list(wave))
        peak = max(peak, rss_kib(pid))
        await asyncio.gather(*(client.cancel(task_id) for task_id in wave))
        ended += count
        if ended % 100 == 0 or ended == args.tasks:
            print(
                f"  {ended:5d} ended: RSS {rss_kib(pid) / 1024:.0f} MB (+{(rss_kib(pid) - base) / 1024:.0f})"
            )
    await asyncio.sleep(1.0)  # let the last handlers unwind
    after = rss_kib(pid)
    print(f"  peak RSS (a wave live): {peak / 1024:.0f} MB; after all ended: {after / 1024:.0f} MB")
    print(f"  held after the run: {(after - base) / 1024:.0f} MB, in {time.monotonic() - started:.1f} s")
    collect = Client(client.http, f"{server.base}/mcp")
    freed = await collect.call("test/collect", {}, "")
    released = (freed["rss_before"] - freed["rss_after"]) / 1024
    print(f"  a full collection then: {freed['collected']} objects freed, RSS -{released:.0f} MB")


async def idle_cpu(server: LiveServer, client: Client, args: argparse.Namespace) -> None:
    pid = server.process.pid
    await asyncio.sleep(1.0)
    before = cpu_seconds(pid)
    await asyncio.sleep(args.idle)
    empty = cpu_seconds(pid) - before
    task_ids = list(await asyncio.gather(*(client.create(f"f{i}") for i in range(args.parked))))
    await parked(client, task_ids)
    await asyncio.sleep(1.0)
    before = cpu_seconds(pid)
    await asyncio.sleep(args.idle)
    busy = cpu_seconds(pid) - before
    print(
        f"idle CPU over {args.idle:g} s: {empty:.2f} s with no task, {busy:.2f} s with {args.parked} parked"
    )
    print(
        f"  ({busy / args.idle * 100:.1f}% of a core with the parked tasks; RSS {rss_kib(pid) / 1024:.0f} MB)"
    )
    for task_id in task_ids:
        await client.cancel(task_id)


async def main(args: argparse.Namespace) -> None:
    overrides = {"RESPONSE_MODE": "json", "MAX_TASKS_PER_OWNER": None, "MAX_TASKS": None}
    with tempfile.TemporaryDirectory() as directory:
        production = {"DJANGO_DEBUG": "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}  # DEBUG logs every query
        if not args.glibc_default:  # freed large blocks go back to the OS: RSS shows what is still referenced
            production["MALLOC_MMAP_THRESHOLD_"] = "65536"
        server = start_command(Path(directory), DAPHNE, overrides, name="tasks", env=production)
        try:
            limits = httpx.Limits(max_connections=32)
            async with httpx.AsyncClient(timeout=60, limits=limits) as http:
                client = Client(http, f"{server.base}/conformance/mcp")
                if args.tasks:
                    await memory(server, client, args)
                if args.parked:
                    await idle_cpu(server, client, args)
        finally:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000, help="tasks with large arguments (0: skip)")
    parser.add_argument("--mb", type=int, default=1, help="MB of each task's argument")
    parser.add_argument("--wave", type=int, default=50, help="tasks live at once")
    parser.add_argument("--parked", type=int, default=150, help="parked tasks for the idle CPU (0: skip)")
    parser.add_argument(
        "--glibc-default",
        action="store_true",
        help="leave glibc's dynamic mmap threshold on (RSS then keeps the high-water mark of freed blocks)",
    )
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle measured")
    asyncio.run(main(parser.parse_args()))
