"""``subscriptions/listen`` in process: the honoured filter (only what the server declares; ``taskIds``
gated by the tasks extension), which changes a stream wants, their tags, and the table's delivery and
graceful end."""

from __future__ import annotations

import asyncio

import pytest

from mcp_server.protocol.listen import Listener, covers, honored_filter
from mcp_server.registry.server import MCPServer
from mcp_server.runtime.listeners import ListenerTable
from mcp_server.wire.errors import JSONRPCError
from mcp_server.wire.messages import ListenEvent

TASKS = "io.modelcontextprotocol/tasks"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"

tools_only = MCPServer("listen-tools-only")


@tools_only.tool
async def ping_tool() -> str:
    """A tool, so that the server declares tools (and nothing else)."""
    return "pong"


def test_only_declared_kinds_are_honoured() -> None:
    asked = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["test://a"],
    }
    assert honored_filter(tools_only, asked, {}) == {"toolsListChanged": True}
    assert honored_filter(tools_only, {"toolsListChanged": False}, {}) == {}
    assert honored_filter(tools_only, None, {}) == {}


def test_task_ids_need_the_client_to_declare_the_extension() -> None:
    with pytest.raises(JSONRPCError) as refused:
        honored_filter(tools_only, {"taskIds": ["t"]}, {})
    assert refused.value.code == -32021
    assert refused.value.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    # declared by the client, but the server has no tasks: left out of the honoured subset
    assert honored_filter(tools_only, {"taskIds": ["t"]}, {"extensions": {TASKS: {}}}) == {}


def test_a_subscription_covers_its_uri_and_sub_resources() -> None:
    assert covers(["test://a"], "test://a")
    assert covers(["test://a/"], "test://a/b")
    assert covers(["test://a"], "test://a/b/c")
    assert not covers(["test://a"], "test://ab")
    assert not covers([], "test://a")


async def test_a_listener_wants_what_it_asked_for_of_its_server() -> None:
    listener = Listener(server="s", subscription_id=3, honored={"toolsListChanged": True})
    assert listener.wants(ListenEvent("s", "notifications/tools/list_changed"))
    assert not listener.wants(ListenEvent("other", "notifications/tools/list_changed"))
    assert not listener.wants(ListenEvent("s", "notifications/prompts/list_changed"))
    assert not listener.wants(ListenEvent("s", "notifications/resources/updated", {"uri": "x"}))
    assert not listener.wants(ListenEvent("s", "notifications/progress"))
    tagged = listener.tagged("notifications/resources/updated", {"uri": "x"})
    assert tagged == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "x", "_meta": {SUBSCRIPTION: 3}},
    }


async def test_the_table_delivers_tagged_and_ends_streams_gracefully() -> None:
    table = ListenerTable(lambda: None, lambda: "")
    ended: list[str] = []

    async def stream(name: str, honored: dict[str, object]) -> Listener:
        listener = Listener(server="s", subscription_id=name, honored=honored, task=None)
        await table.add(listener)
        return listener

    tools = await stream("tools", {"toolsListChanged": True})
    uris = await stream("uris", {"resourceSubscriptions": ["test://a"]})
    assert len(table) == 2
    assert table.deliver(ListenEvent("s", "notifications/tools/list_changed")) == 1
    assert table.deliver(ListenEvent("s", "notifications/resources/updated", {"uri": "test://a/1"})) == 1
    tools_message = tools.queue.get_nowait()
    assert tools_message is not None
    assert tools_message["params"]["_meta"][SUBSCRIPTION] == "tools"
    uris_message = uris.queue.get_nowait()
    assert uris_message is not None
    assert uris_message["params"] == {"uri": "test://a/1", "_meta": {SUBSCRIPTION: "uris"}}

    async def run(listener: Listener) -> None:
        while await listener.queue.get() is not None:
            pass
        ended.append(str(listener.subscription_id))
        await table.discard(listener)

    runs = []
    for listener in (tools, uris):
        listener.task = asyncio.create_task(run(listener))
        runs.append(listener.task)
    assert await table.finish(grace=5.0) == 2
    assert sorted(ended) == ["tools", "uris"]
    assert len(table) == 0
    await asyncio.gather(*runs)
