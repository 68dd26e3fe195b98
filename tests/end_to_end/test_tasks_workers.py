"""Tasks across workers of one site (PostgreSQL + Redis): a task created on one worker is polled, answered
and cancelled through another, outlives a restart of the worker that ran it, and is failed by a survivor
within the lease when its worker is killed."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.live import LiveServer, shared_site, start_server
from tests.support.tasks import TaskClient
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio

LEASE = 1.0
"""``LEASE_TIMEOUT`` of every worker here: a killed worker's task must be failed within a few of these."""
DEAD_WORKER = "Connection closed: the worker serving it stopped"


@dataclass
class Workers:
    database: str
    env: dict[str, str]
    directory: Path
    servers: dict[str, LiveServer]
    overrides: dict[str, Any]

    def client(self, name: str, **options: Any) -> TaskClient:
        return TaskClient(f"{self.servers[name].base}/conformance/mcp", **options)

    def restart(self, name: str) -> LiveServer:
        self.servers[name].stop()
        self.servers[name] = start_server(self.directory, self.overrides, name=f"{name}-again", **self.env)
        return self.servers[name]


LEDGERS = {
    "db": "mcp_server.stores.ledger.database.DatabaseLedger",
    "cache": "mcp_server.stores.ledger.cache.CacheLedger",
}


@pytest.fixture(scope="module", params=list(LEDGERS))
def workers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """Workers ``a``, ``b`` and ``doomed`` of one site on PostgreSQL and Redis, with the database ledger or
    the cache ledger (tasks are on the database either way)."""
    directory = tmp_path_factory.mktemp("tasks-workers")
    overrides = {"RESPONSE_MODE": "auto", "LEASE_TIMEOUT": LEASE, "LEDGER_BACKEND": LEDGERS[request.param]}
    with shared_site() as env, ThreadPoolExecutor(3) as pool:
        names = ("a", "b", "doomed")
        futures = {n: pool.submit(start_server, directory, overrides, name=n, **env) for n in names}
        servers = {name: future.result() for name, future in futures.items()}
        site = Workers(env["DATABASE_URL"], env, directory, servers, overrides)
        try:
            yield site
        finally:
            list(pool.map(LiveServer.stop, site.servers.values()))


async def task_row(database: str, task_id: str) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(database) as connection:
        cursor = await connection.execute(
            "SELECT status, worker, created, lease_expires, error, updated FROM mcp_server_task"
            " WHERE id = %s",
            (task_id,),
        )
        row = await cursor.fetchone()
    assert row is not None, task_id
    columns = ("status", "worker", "created", "lease_expires", "error", "updated")
    return dict(zip(columns, row, strict=True))


async def test_a_task_runs_on_one_worker_and_is_served_by_another(workers: Workers) -> None:
    a, b = workers.client("a"), workers.client("b")
    task_id = (await a.create("confirm_delete", {"filename": "report.pdf"}))["taskId"]
    assert f":{workers.servers['a'].process.pid}:" in (await task_row(workers.database, task_id))["worker"]
    parked = await b.wait(task_id, "input_required", within=5)  # polled on the other worker
    assert list(parked["inputRequests"]) == ["confirm"]
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    await b.result("tasks/update", {"taskId": task_id, "inputResponses": answer})  # answered there too
    done = await b.wait(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Deleted report.pdf"
    assert (await a.get(task_id)) == {**done, "_meta": (await a.get(task_id))["_meta"]}


async def test_cancel_through_another_worker(workers: Workers) -> None:
    a, b = workers.client("a"), workers.client("b")
    task_id = (await a.create("slow_compute", {"seconds": 60}))["taskId"]
    assert (await b.get(task_id))["status"] == "working"
    await b.result("tasks/cancel", {"taskId": task_id})
    assert (await a.get(task_id))["status"] == "cancelled"
    row = await task_row(workers.database, task_id)
    assert row["status"] == "cancelled"
    assert row["lease_expires"] is None


async def test_killed_worker_leaves_its_task_failed_within_the_lease(workers: Workers) -> None:
    doomed, survivor = workers.servers["doomed"], workers.client("b")
    task_id = (await workers.client("doomed").create("slow_compute", {"seconds": 600}))["taskId"]

    async def renewed() -> bool:  # the living worker renews the task's lease
        row = await task_row(workers.database, task_id)
        assert row["status"] == "working", row
        return bool((row["lease_expires"] - row["created"]).total_seconds() > 2 * LEASE)

    await wait_for(renewed)
    doomed.process.send_signal(signal.SIGKILL)
    await asyncio.to_thread(doomed.process.wait, 10)
    killed_at = time.monotonic()
    failed = await survivor.wait(task_id, "failed", "completed", "cancelled", within=10 * LEASE)
    elapsed = time.monotonic() - killed_at
    assert failed["status"] == "failed", failed
    assert failed["error"] == {"code": -32000, "message": DEAD_WORKER}
    row = await task_row(workers.database, task_id)
    assert row["updated"] >= row["created"]
    assert row["status"] == "failed"
    print(f"task failed {elapsed:.2f}s after the kill (LEASE_TIMEOUT {LEASE}s)")


async def test_a_task_outlives_a_restart_of_the_worker_that_ran_it(workers: Workers) -> None:
    task_id = (await workers.client("a").create("slow_compute", {"seconds": 0.2, "label": "kept"}))["taskId"]
    done = await workers.client("b").wait(task_id, "completed")
    await asyncio.to_thread(workers.restart, "a")
    again = await workers.client("a").get(task_id)
    assert again["status"] == "completed"
    assert again["result"]["content"] == done["result"]["content"]
    await asyncio.to_thread(workers.restart, "b")  # and the worker that answered the polls
    assert (await workers.client("b").get(task_id))["result"]["content"][0][
        "text"
    ] == "kept: computed after 0.2s"


async def test_the_limit_of_live_tasks_holds_across_workers(tmp_path: Path) -> None:
    overrides = {"RESPONSE_MODE": "auto", "MAX_TASKS_PER_OWNER": 2}
    with shared_site() as env:
        a = start_server(tmp_path, overrides, name="limit-a", **env)
        b = start_server(tmp_path, overrides, name="limit-b", **env)
        try:
            on_a = TaskClient(f"{a.base}/conformance/mcp")
            on_b = TaskClient(f"{b.base}/conformance/mcp")
            first = (await on_a.create("slow_compute", {"seconds": 60}))["taskId"]
            second = (await on_b.create("slow_compute", {"seconds": 60}))["taskId"]
            for client in (on_a, on_b):  # each worker counts the other's tasks: the store's count
                slow = {"name": "slow_compute", "arguments": {"seconds": 60}}
                error = await client.error("tools/call", slow, 429, -32004)
                assert error["data"] == {"limit": 2, "live": 2, "setting": "MAX_TASKS_PER_OWNER"}
            await on_b.result("tasks/cancel", {"taskId": first})  # cancelled through the other worker
            third = (await on_a.create("slow_compute", {"seconds": 60}))["taskId"]
            for task_id in (second, third):
                await on_a.result("tasks/cancel", {"taskId": task_id})
        finally:
            a.stop()
            b.stop()
