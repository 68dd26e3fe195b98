"""Tasks between two runtimes of one process (an in-memory channel layer, one database): a cancel through
one stops the handler running on the other, and each status change reaches the workers watching the task
(the hook ``subscriptions/listen`` uses for ``notifications/tasks``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from mcp_server.core.context import Context, SessionState
from mcp_server.core.tasks import TaskRecord
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.messages import TaskStatus
from project.mcp_servers import conformance
from tests.support.raw import MODERN
from tests.support.tasks import WITH_TASKS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

LAYER = "default"


@pytest.fixture
async def pair(settings: Any) -> AsyncIterator[tuple[Runtime, Runtime]]:
    settings.CHANNEL_LAYERS = {LAYER: {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    ledger = DatabaseLedger({})
    made = [Runtime(worker_id=name, ledger=ledger, channel_layer_alias=LAYER) for name in ("a", "b")]
    for runtime in made:
        await runtime.start()
    yield made[0], made[1]
    for runtime in made:
        await runtime.tasks.shutdown()
        await runtime.aclose()


def call(runtime: Runtime, tool: str, arguments: dict[str, Any]) -> Context:
    return Context(
        server=conformance,
        session=SessionState(id=None, protocol_version=MODERN, client_capabilities=WITH_TASKS),
        request_id=1,
        method="tools/call",
        params={"name": tool, "arguments": arguments},
        peer=object(),  # a task never uses its call's peer
        runtime=runtime,
    )


async def until(condition: Callable[[], bool], changed: asyncio.Event, within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not condition():
            changed.clear()
            await changed.wait()


async def test_a_cancel_through_b_stops_the_handler_running_on_a(pair: tuple[Runtime, Runtime]) -> None:
    a, b = pair
    tool = conformance.tools["slow_compute"]
    created = await a.tasks.start(call(a, "slow_compute", {"seconds": 30}), tool, {})
    task_id = created["taskId"]
    running = a.tasks.running[task_id]
    assert task_id not in b.tasks.running
    assert await b.tasks.cancel(task_id)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(running, 5)
    record = await b.tasks.store.aget(task_id)
    assert record is not None
    assert record.status == "cancelled"
    assert task_id not in a.tasks.running


async def test_status_changes_reach_the_workers_watching_the_task(pair: tuple[Runtime, Runtime]) -> None:
    a, b = pair
    heard: list[TaskStatus] = []
    changed = asyncio.Event()

    async def listener(message: TaskStatus) -> None:
        heard.append(message)
        changed.set()

    b.tasks.status_listeners.append(listener)
    written: list[str] = []  # what A's store writes, told in A's process (the local side of the hook)

    def local(record: TaskRecord) -> None:
        written.append(record.status)
        changed.set()

    a.tasks.store.on_change(local)
    tool = conformance.tools["confirm_delete"]
    created = await a.tasks.start(call(a, "confirm_delete", {"filename": "f"}), tool, {})
    task_id = created["taskId"]
    await until(lambda: "input_required" in written, changed)
    await b.tasks.watch(task_id)  # from now on B hears every change, whichever worker writes it
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    await b.tasks.store.aanswer(task_id, answer)
    # A, parked, watches its task too: B's write wakes it at once (A never polls the store: without the
    # message it would wait for its upkeep's next lease renewal, LEASE_TIMEOUT / 3 = 10 s).
    woken_within = 1.5
    await until(lambda: any(m.task["status"] == "working" for m in heard), changed, within=woken_within)
    await until(lambda: any(m.task["status"] == "completed" for m in heard), changed)
    assert {m.task_id for m in heard} == {task_id}
    statuses = [m.task["status"] for m in heard]
    assert statuses[-2:] == ["working", "completed"]  # resumed by A with the answer, then done
    assert heard[-1].task["result"]["content"][0]["text"] == "Deleted f"
    await b.tasks.unwatch(task_id)


async def test_a_task_watched_twice_is_heard_until_its_last_unwatch(pair: tuple[Runtime, Runtime]) -> None:
    """Two watchers of one task on one worker (two listen streams, say): when one stops watching, the other
    still hears every status change."""
    a, b = pair
    heard: list[TaskStatus] = []
    changed = asyncio.Event()

    async def listener(message: TaskStatus) -> None:
        heard.append(message)
        changed.set()

    b.tasks.status_listeners.append(listener)
    written: list[str] = []

    def local(record: TaskRecord) -> None:
        written.append(record.status)
        changed.set()

    a.tasks.store.on_change(local)
    tool = conformance.tools["confirm_delete"]
    created = await a.tasks.start(call(a, "confirm_delete", {"filename": "g"}), tool, {})
    task_id = created["taskId"]
    await until(lambda: "input_required" in written, changed)
    assert await b.tasks.watch(task_id)
    assert await b.tasks.watch(task_id)
    await b.tasks.unwatch(task_id)  # one watcher left
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    await b.tasks.store.aanswer(task_id, answer)
    await until(lambda: any(m.task["status"] == "completed" for m in heard), changed)
    assert heard[-1].task["result"]["content"][0]["text"] == "Deleted g"
    await b.tasks.unwatch(task_id)
