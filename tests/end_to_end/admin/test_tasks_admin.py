"""The admin's tasks (2026-07-28 tasks extension): live ones listed first, and *Cancel selected tasks*,
which settles a running task ``cancelled`` and stops it on the worker that runs it (a live server)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.support.admin import admin_client, admin_log, create_superuser, query, run_action
from tests.support.live import LiveServer
from tests.support.tasks import TaskClient

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    live = start({"RESPONSE_MODE": "auto"})
    create_superuser(live)
    return live


@pytest.fixture
async def admin(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    client = await admin_client(server.base)
    yield client
    await client.aclose()


async def test_live_tasks_first_and_cancel(server: LiveServer, admin: httpx.AsyncClient) -> None:
    client = TaskClient(f"{server.base}/conformance/mcp")
    finished = (await client.create("slow_compute", {"seconds": 0}))["taskId"]
    await client.wait(finished, "completed")
    running = (await client.create("slow_compute", {"seconds": 60}))["taskId"]
    parked = (await client.create("confirm_delete", {"filename": "x"}))["taskId"]
    await client.wait(parked, "input_required", within=5)

    page = await admin.get("/admin/mcp_server/task/")
    assert page.status_code == 200, page.text
    order = sorted((page.text.find(task_id[:12]), task_id) for task_id in (finished, running, parked))
    assert [task_id for _, task_id in order][-1] == finished  # the ended task after the live ones
    assert "Cancel selected tasks" in page.text

    done = await run_action(admin, "task", "cancel_tasks", [running, parked, finished])
    assert done.status_code == 302, done.text
    for task_id in (running, parked):
        task = await client.get(task_id)
        assert task["status"] == "cancelled"
        assert task["statusMessage"] == "Cancelled by an operator"
        assert admin_log(server, task_id)
    assert (await client.get(finished))["status"] == "completed"  # an ended task is left alone
    assert not admin_log(server, finished)
    rows = query(server, "SELECT status FROM mcp_server_task WHERE id IN (?, ?)", running, parked)
    assert [r["status"] for r in rows] == ["cancelled", "cancelled"]
    detail = await admin.get(f"/admin/mcp_server/task/{running}/change/")
    assert detail.status_code == 200
    assert "slow_compute" in detail.text
