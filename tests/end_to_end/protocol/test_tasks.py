"""The tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) on a live server, raw HTTP: a
``tools/call`` answered with a task, ``tasks/get``, ``tasks/update``, ``tasks/cancel``, the removed
``tasks/result`` and ``tasks/list``, the gate, the routing header, the ledger and ownership."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from mcp_server.wire.errors import TOO_MANY_TASKS
from tests.support.admin import query
from tests.support.auth import bearer, make_fixtures
from tests.support.live import LiveServer
from tests.support.tasks import TASKS, TaskClient
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio

NOT_FOUND = -32602


@pytest.fixture(scope="module", params=["auto", "sse", "json"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": request.param})


@pytest.fixture
def client(server: LiveServer) -> TaskClient:
    return TaskClient(f"{server.base}/conformance/mcp")


async def test_discover_advertises_the_extension(client: TaskClient) -> None:
    result = await client.result("server/discover", {})
    assert result["capabilities"]["extensions"] == {TASKS: {}}
    assert "tasks" not in result["capabilities"]


async def test_create_get_and_complete(client: TaskClient, server: LiveServer) -> None:
    created = await client.create("slow_compute", {"seconds": 0.5, "label": "sum"})
    assert created["status"] == "working"
    assert len(created["taskId"]) >= 32
    for key in ("createdAt", "lastUpdatedAt"):
        datetime.fromisoformat(created[key])
    assert created["ttlMs"] == 3_600_000
    assert created["pollIntervalMs"] == 500
    assert not {"task", "result", "error", "inputRequests", "requestState"} & set(created)
    task_id = created["taskId"]
    first = await client.get(task_id)  # durable at once: the row exists before the answer
    assert first["resultType"] == "complete"
    assert first["taskId"] == task_id
    assert first["status"] in ("working", "completed")
    done = await client.wait(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "sum: computed after 0.5s"
    assert done["result"]["resultType"] == "complete"
    assert "requestState" not in done

    rows = query(
        server, "SELECT status, tool, owner, worker, result FROM mcp_server_task WHERE id = ?", task_id
    )
    assert rows[0]["status"] == "completed"
    assert rows[0]["tool"] == "slow_compute"
    assert rows[0]["owner"] == "anonymous"
    assert rows[0]["worker"]

    async def recorded() -> bool:
        found = query(server, "SELECT outcome FROM mcp_server_ledgerentry WHERE name = ?", "slow_compute")
        return any(json.loads(r["outcome"] or "null") == _task_outcome(task_id) for r in found)

    await wait_for(recorded)  # the call is a settled ledger answer naming its task


def _task_outcome(task_id: str) -> dict[str, Any]:
    return {"result": True, "resultType": "task", "task": task_id}


async def test_tool_error_completes_and_protocol_error_fails(client: TaskClient) -> None:
    tool_error = await client.create("failing_job")
    done = await client.wait(tool_error["taskId"], "completed", "failed")
    assert done["status"] == "completed"
    assert done["result"]["isError"] is True
    protocol = await client.create("protocol_error_job")
    failed = await client.wait(protocol["taskId"], "completed", "failed")
    assert failed["status"] == "failed"
    assert "result" not in failed
    assert failed["error"] == {"code": -32603, "message": "protocol_error_job failed on purpose"}


async def test_cancel_is_acknowledged_and_idempotent(client: TaskClient) -> None:
    task_id = (await client.create("slow_compute", {"seconds": 60}))["taskId"]
    ack = await client.result("tasks/cancel", {"taskId": task_id})
    assert {k for k in ack if k != "_meta"} == {"resultType"}
    assert ack["resultType"] == "complete"
    cancelled = await client.get(task_id)
    assert cancelled["status"] == "cancelled"
    again = await client.result("tasks/cancel", {"taskId": task_id})
    assert again["resultType"] == "complete"
    assert (await client.get(task_id))["status"] == "cancelled"


async def test_input_required_then_update_resumes(client: TaskClient) -> None:
    task_id = (await client.create("confirm_delete", {"filename": "a.txt"}))["taskId"]
    parked = await client.wait(task_id, "input_required", within=5)
    assert list(parked["inputRequests"]) == ["confirm"]
    assert parked["inputRequests"]["confirm"]["method"] == "elicitation/create"
    bad = {"taskId": task_id, "inputResponses": {"confirm": 12345}}
    await client.error("tasks/update", bad, 400, -32602)  # a malformed answer to an outstanding ask
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}, "stray": {"ignored": True}}
    ack = await client.result("tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert {k for k in ack if k != "_meta"} == {"resultType"}
    done = await client.wait(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Deleted a.txt"


async def test_partial_answers_leave_the_others_outstanding(client: TaskClient) -> None:
    task_id = (await client.create("multi_input"))["taskId"]
    parked = await client.wait(task_id, "input_required", within=5)
    assert set(parked["inputRequests"]) == {"name", "color"}
    name = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    await client.result("tasks/update", {"taskId": task_id, "inputResponses": name})
    after = await client.get(task_id)
    assert after["status"] == "input_required"
    assert list(after["inputRequests"]) == ["color"]
    color = {"color": {"action": "accept", "content": {"color": "green"}}}
    await client.result("tasks/update", {"taskId": task_id, "inputResponses": color})
    done = await client.wait(task_id, "completed")
    assert done["result"]["content"][0]["text"] == "Ada likes green"


async def test_input_rounds_before_the_task(client: TaskClient) -> None:
    first = await client.result("tools/call", {"name": "test_tool_with_task", "arguments": {}})
    assert first["resultType"] == "input_required"
    assert "taskId" not in first
    answers = {"user_name": {"action": "accept", "content": {"name": "Alice"}}}
    retry = {
        "name": "test_tool_with_task",
        "arguments": {},
        "inputResponses": answers,
        "requestState": first["requestState"],
    }
    created = await client.result("tools/call", retry)
    assert created["resultType"] == "task"
    assert "requestState" not in created
    done = await client.wait(created["taskId"], "completed")
    assert "Alice" in done["result"]["content"][0]["text"]


async def test_without_the_extension(server: LiveServer) -> None:
    plain = TaskClient(f"{server.base}/conformance/mcp", capabilities={})
    sync = await plain.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
    assert sync["resultType"] == "complete"
    assert sync["content"]
    error = await plain.error("tools/call", {"name": "failing_job", "arguments": {}}, 400, -32021)
    assert error["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    gated: list[tuple[str, dict[str, Any]]] = [
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": {}}),
        ("tasks/cancel", {}),
    ]
    for method, extra in gated:
        await plain.error(method, {"taskId": "gate-test", **extra}, 400, -32021)


async def test_unknown_removed_and_mismatched(client: TaskClient) -> None:
    await client.error("tasks/get", {"taskId": "no-such-task"}, 400, NOT_FOUND)
    await client.error("tasks/cancel", {"taskId": "no-such-task"}, 400, NOT_FOUND)
    for removed in ("tasks/result", "tasks/list"):
        await client.error(removed, {"taskId": "x"}, 404, -32601, name="x")
    task_id = (await client.create("slow_compute", {"seconds": 30}))["taskId"]
    await client.error("tasks/get", {"taskId": task_id}, 400, -32020, name="another-task")
    other_server = TaskClient(client.url.replace("/conformance/mcp", "/mcp"))
    await other_server.error("tasks/get", {"taskId": task_id}, 400, NOT_FOUND)  # bound to its server
    await client.result("tasks/cancel", {"taskId": task_id})


async def test_a_sync_tool_ignores_the_legacy_task_param(client: TaskClient) -> None:
    params = {"name": "greet", "arguments": {"name": "sep-2243"}, "task": {"ttl": 1000, "pollInterval": 10}}
    result = await client.result("tools/call", params)
    assert result["resultType"] == "complete"
    assert result["content"][0]["text"] == "Hello, sep-2243!"


async def test_a_task_is_its_owners_alone(start: Callable[..., LiveServer]) -> None:
    server = start({"RESPONSE_MODE": "auto"})
    fixtures = make_fixtures(server)
    url = f"{server.base}/conformance/mcp"
    alice = TaskClient(url, headers=bearer(fixtures["tokens"]["alice"]))
    bob = TaskClient(url, headers=bearer(fixtures["tokens"]["bob"]))
    anonymous = TaskClient(url)
    task_id = (await alice.create("slow_compute", {"seconds": 30}))["taskId"]
    assert (await alice.get(task_id))["status"] == "working"
    for stranger in (bob, anonymous):
        for method in ("tasks/get", "tasks/cancel"):
            error = await stranger.error(method, {"taskId": task_id}, 400, NOT_FOUND)
            assert error["message"] == f"Task not found: {task_id}"  # the same answer as for no task
    assert (await alice.get(task_id))["status"] == "working"  # the strangers' cancels did nothing
    row = query(server, "SELECT owner, user_id FROM mcp_server_task WHERE id = ?", task_id)[0]
    assert row["owner"] == f"user:{row['user_id']}"
    await alice.result("tasks/cancel", {"taskId": task_id})
    assert (await alice.get(task_id))["status"] == "cancelled"


async def test_a_worker_shutting_down_fails_the_tasks_it_runs(start: Callable[..., LiveServer]) -> None:
    server = start({"RESPONSE_MODE": "auto"})
    client = TaskClient(f"{server.base}/conformance/mcp")
    task_id = (await client.create("slow_compute", {"seconds": 600}))["taskId"]
    assert (await client.get(task_id))["status"] == "working"
    server.stop()  # SIGTERM: a graceful shutdown
    assert server.process.returncode is not None
    row = query(server, "SELECT status, error, lease_expires FROM mcp_server_task WHERE id = ?", task_id)[0]
    assert row["status"] == "failed"
    assert json.loads(row["error"]) == {
        "code": -32000,
        "message": "Connection closed: the worker running the task shut down",
    }
    assert row["lease_expires"] is None


def _live_tasks(server: LiveServer) -> int:
    return len(query(server, "SELECT id FROM mcp_server_task WHERE status IN ('working', 'input_required')"))


async def test_live_tasks_are_capped_per_owner_and_per_site(start: Callable[..., LiveServer]) -> None:
    server = start({"RESPONSE_MODE": "auto", "MAX_TASKS_PER_OWNER": 2, "MAX_TASKS": 3})
    url = f"{server.base}/conformance/mcp"
    here, there = TaskClient(url), TaskClient(url, local_address="127.0.0.2")
    alice = TaskClient(url, headers=bearer(make_fixtures(server)["tokens"]["alice"]))
    slow = {"name": "slow_compute", "arguments": {"seconds": 60}}
    mine = [(await here.create("slow_compute", {"seconds": 60}))["taskId"] for _ in range(2)]
    response, message = await here.post("tools/call", slow)  # the answer carries the call's id (post)
    assert response.status_code == 429
    assert message["error"] == {
        "code": TOO_MANY_TASKS,
        "message": "Too many live tasks for address 127.0.0.1: 2, at most 2 (MAX_TASKS_PER_OWNER); wait for "
        "one to end or cancel one with tasks/cancel",
        "data": {"limit": 2, "live": 2, "setting": "MAX_TASKS_PER_OWNER"},
    }
    assert _live_tasks(server) == 2  # no task row, no handler

    async def refusal_recorded() -> bool:
        rows = query(server, "SELECT outcome FROM mcp_server_ledgerentry WHERE state = 'answered'")
        outcomes = [json.loads(r["outcome"] or "null") or {} for r in rows]
        return any(o.get("error", {}).get("code") == TOO_MANY_TASKS for o in outcomes)

    await wait_for(refusal_recorded)  # settled as any error is, in the ledger too
    # Anonymous callers count by address: another one has its own quota, within the site's.
    theirs = (await there.create("slow_compute", {"seconds": 60}))["taskId"]
    response, message = await alice.post("tools/call", slow)
    assert response.status_code == 429
    assert message["error"]["data"] == {"limit": 3, "live": 3, "setting": "MAX_TASKS"}
    assert message["error"]["message"].startswith("Too many live tasks for this server: 3, at most 3")
    await here.result("tasks/cancel", {"taskId": mine[0]})  # an ended task frees its place
    alices = (await alice.create("slow_compute", {"seconds": 60}))["taskId"]
    for client, task_id in ((here, mine[1]), (there, theirs), (alice, alices)):
        await client.result("tasks/cancel", {"taskId": task_id})


async def test_a_task_ends_at_its_ttl_working_or_parked_and_is_pruned(
    start: Callable[..., LiveServer],
) -> None:
    server = start({"RESPONSE_MODE": "auto", "TASK_TTL": 2.0, "LEASE_TIMEOUT": 3.0})
    client = TaskClient(f"{server.base}/conformance/mcp")
    parked = (await client.create("confirm_delete", {"filename": "a"}))["taskId"]
    working = (await client.create("slow_compute", {"seconds": 600}))["taskId"]
    assert (await client.wait(parked, "input_required", within=5))["ttlMs"] == 2000
    for task_id in (parked, working):
        failed = await client.wait(task_id, "failed", "completed", "cancelled", within=15)
        assert failed["status"] == "failed"
        assert failed["error"] == {
            "code": -32001,
            "message": "Task timed out: still live after 2s, its maximum duration (TASK_MAX_DURATION, else "
            "TASK_TTL)",
        }

    async def pruned() -> bool:  # the upkeep deletes ended tasks past their TTL (every LEASE_TIMEOUT / 3)
        return not query(server, "SELECT id FROM mcp_server_task WHERE id IN (?, ?)", parked, working)

    await wait_for(pruned, within=30)  # kept 5 s after it ended (ENDED_KEPT)
    await client.error("tasks/get", {"taskId": parked}, 400, NOT_FOUND)
