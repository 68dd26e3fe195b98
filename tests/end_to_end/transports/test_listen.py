"""``subscriptions/listen`` at 2026-07-28 on a live server, raw HTTP: the acknowledgement first, every
notification tagged with the subscription id, only the kinds asked for, keep-alive comments, the ledger
row settled when the client closes the stream, the ``complete`` result at shutdown; and
``resources/subscribe`` gone at this revision."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged

from tests.support.admin import query
from tests.support.listen import SUBSCRIPTION, TIMEOUT, call, headers, listening, meta, notify
from tests.support.live import LiveServer
from tests.support.raw import MODERN, messages_of, rpc
from tests.support.tasks import WITH_TASKS, TaskClient
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio

TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture(scope="module", params=["auto", "sse", "json"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": request.param, "KEEPALIVE_INTERVAL": 0.3})


@pytest.mark.parametrize("request_id", [17, "listen-a"])
async def test_the_acknowledgement_comes_first_and_every_notification_is_tagged(
    server: LiveServer, request_id: int | str
) -> None:
    async with listening(server, {"toolsListChanged": True}, request_id) as stream:
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        tag = ack["params"]["_meta"][SUBSCRIPTION]
        assert tag == request_id
        assert type(tag) is type(request_id)
        await notify(server, feature="tools")
        changed = await stream.next()
        assert changed["method"] == "notifications/tools/list_changed"
        assert changed["params"]["_meta"][SUBSCRIPTION] == request_id
        assert "id" not in changed
    assert "id:" not in "".join(stream.comments)


async def test_a_tool_registered_and_removed_at_run_time_is_announced(server: LiveServer) -> None:
    async with listening(server, {"toolsListChanged": True}, "registry") as stream:
        await stream.next()
        answer = await call(server, "test/churn_tool", {})
        assert "result" in answer, answer
        for _ in ("registered", "removed"):
            changed = await stream.next()
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"][SUBSCRIPTION] == "registry"


async def test_the_official_client_listens(server: LiveServer) -> None:
    async with Client(server.url) as client:
        assert client.protocol_version == MODERN
        async with client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed
            assert subscription.honored.prompts_list_changed
            await client.call_tool("test_trigger_prompt_change", {})
            assert isinstance(await asyncio.wait_for(anext(subscription), TIMEOUT), PromptsListChanged)
            await client.call_tool("test_trigger_tool_change", {})
            assert isinstance(await asyncio.wait_for(anext(subscription), TIMEOUT), ToolsListChanged)


async def test_only_the_kinds_asked_for_are_sent(server: LiveServer) -> None:
    asked = {"promptsListChanged": True, "resourceSubscriptions": ["catalogue://books"]}
    async with listening(server, asked) as s:
        ack = await s.next()
        assert ack["params"]["notifications"] == asked
        await notify(server, feature="tools")  # not asked for
        await notify(server, feature="resources")  # not asked for (resourcesListChanged)
        await notify(server, uri="catalogue://stats")  # another resource
        await notify(server, feature="prompts")  # asked for: proves the three before were passed over
        assert (await s.next())["method"] == "notifications/prompts/list_changed"
        await notify(server, uri="catalogue://books/7")  # under the subscribed prefix (its template)
        updated = await s.next()
        assert updated["method"] == "notifications/resources/updated"
        assert updated["params"]["uri"] == "catalogue://books/7"
        assert updated["params"]["_meta"][SUBSCRIPTION] == 1


async def test_the_honoured_subset_leaves_out_what_is_not_delivered(server: LiveServer) -> None:
    asked = {"toolsListChanged": True, "resourcesListChanged": False, "somethingElse": True}
    async with listening(server, asked) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"toolsListChanged": True}


async def test_a_uri_the_acknowledgement_cannot_carry_is_left_out_of_it(server: LiveServer) -> None:
    """A lone surrogate (valid in the request JSON, not in UTF-8): the acknowledgement failed with -32603."""
    asked = {"resourceSubscriptions": ["catalogue://books/1\ud800", "catalogue://books"]}
    async with listening(server, asked) as stream:
        ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"] == {"resourceSubscriptions": ["catalogue://books"]}


async def test_task_ids_need_the_tasks_extension(server: LiveServer) -> None:
    payload = rpc("subscriptions/listen", {"notifications": {"taskIds": ["t1"]}, "_meta": meta()}, 5)
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        response = await client.post(server.url, json=payload, headers=headers("subscriptions/listen"))
    assert response.status_code == 400
    error = messages_of(response)[-1]
    assert error["id"] == 5
    assert error["error"]["code"] == -32021
    assert TASKS in error["error"]["data"]["requiredCapabilities"]["extensions"]
    declared: dict[str, Any] = {"extensions": {TASKS: {}}}
    async with listening(server, {"taskIds": ["t1"], "toolsListChanged": True}, 6, declared) as stream:
        ack = await stream.next()  # no such task (of this caller): not honoured
        assert ack["params"]["notifications"] == {"toolsListChanged": True}


async def test_a_listener_hears_of_the_status_of_its_tasks(server: LiveServer) -> None:
    """``taskIds``: the caller's own tasks only, each status change as ``notifications/tasks`` (the
    DetailedTask), tagged like every notification of the stream."""
    tasks = TaskClient(server.url)
    created = await tasks.create("slow_compute", {"seconds": 1.0, "label": "listened"})
    task_id = created["taskId"]
    asked = {"taskIds": [task_id, "not-a-task-of-this-caller"]}
    async with listening(server, asked, "tasks-listen", WITH_TASKS) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        status = await stream.next()
        assert status["method"] == "notifications/tasks"
        assert status["params"]["_meta"][SUBSCRIPTION] == "tasks-listen"
        assert status["params"]["taskId"] == task_id
        assert status["params"]["status"] == "completed"
        assert status["params"]["result"]["content"][0]["text"] == "listened: computed after 1s"


async def test_a_quiet_stream_gets_keep_alive_comments(server: LiveServer) -> None:
    async with listening(server, {"toolsListChanged": True}) as stream:
        await stream.next()
        assert (await stream.comment()).startswith(": ping")


async def test_closing_the_stream_settles_its_ledger_row_cancelled(server: LiveServer) -> None:
    def states() -> list[str]:
        rows = query(server, "SELECT state FROM mcp_server_ledgerentry WHERE request_key = 's:close-me'")
        return [row["state"] for row in rows]

    async def pending() -> bool:
        return states() == ["pending"]

    async def cancelled() -> bool:
        return states() == ["cancelled"]

    async def listeners() -> int:
        return int((await call(server, "test/stats", {}))["result"]["listeners"])

    async def none_open() -> bool:
        return await listeners() == 0

    await wait_for(none_open)  # streams of earlier tests closed
    async with listening(server, {"toolsListChanged": True}, "close-me") as stream:
        await stream.next()
        await wait_for(pending)
        assert await listeners() == 1
    await wait_for(cancelled)
    await wait_for(none_open)  # the stream left this worker's table


async def test_resources_subscribe_is_gone_at_2026(server: LiveServer) -> None:
    for method in ("resources/subscribe", "resources/unsubscribe"):
        params = {"uri": "test://static-text", "_meta": meta()}
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            response = await client.post(server.url, json=rpc(method, params, 3), headers=headers(method))
        assert response.status_code == 404
        assert messages_of(response)[-1]["error"]["code"] == -32601


async def test_shutdown_answers_the_listen_request_with_its_complete_result(
    start: Callable[..., LiveServer],
) -> None:
    own = start({"SHUTDOWN_GRACE": 5.0})
    async with listening(own, {"toolsListChanged": True}, 41) as stream:
        await stream.next()
        own.process.terminate()  # SIGTERM: a graceful shutdown
        final = await stream.next()
    assert final["id"] == 41
    assert final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"][SUBSCRIPTION] == 41
    await asyncio.to_thread(own.process.wait, TIMEOUT)
    rows = query(own, "SELECT state, outcome FROM mcp_server_ledgerentry WHERE request_key = 'i:41'")
    assert [row["state"] for row in rows] == ["answered"]  # settled once: by its complete result
