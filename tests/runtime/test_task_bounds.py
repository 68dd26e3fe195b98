"""What bounds a task, in process: the limits of live tasks counted in the shared store (two runtimes, one
database), the deadline of a working or parked task (its timer, told through the store's listeners), a
parked task that sleeps on its event rather than polling the store, and a task's memory released by
reference counting once it ends (``gc`` disabled around the run)."""

from __future__ import annotations

import asyncio
import tracemalloc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.http import HttpRequest

from mcp_server.core.context import Context, SessionState
from mcp_server.core.tasks import TaskRecord
from mcp_server.registry.server import MCPServer
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.wire.errors import REQUEST_TIMEOUT, TOO_MANY_TASKS, JSONRPCError
from project.mcp_servers import conformance
from tests.support.raw import MODERN
from tests.support.tasks import WITH_TASKS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

MB = 1024 * 1024

probe = MCPServer("task-bounds-probe", key="task-bounds-probe")
PROBED: list[weakref.ref[Context]] = []
"""The context each run of the probe tool was given."""


@probe.tool(name="probe", structured_output=False, task="optional")
async def probe_tool(filename: str, ctx: Context) -> str:
    """Confirms like ``confirm_delete``, and lets the test see the context its task was given."""
    if not any(ref() is ctx for ref in PROBED):
        PROBED.append(weakref.ref(ctx))
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM, key="confirm")
    return f"{answer['action']} {len(filename)}"


CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}


async def runtimes(settings: Any, names: tuple[str, ...], layer: bool) -> list[Runtime]:
    if layer:
        settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    alias = "default" if layer else "none"  # no such alias: this process only
    ledger = DatabaseLedger({})
    made = [Runtime(worker_id=name, ledger=ledger, channel_layer_alias=alias) for name in names]
    for runtime in made:
        await runtime.start()
    return made


async def close(made: list[Runtime]) -> None:
    for runtime in made:
        await runtime.tasks.shutdown()
        await runtime.aclose()


@pytest.fixture
async def pair(settings: Any) -> AsyncIterator[tuple[Runtime, Runtime]]:
    made = await runtimes(settings, ("a", "b"), layer=True)
    yield made[0], made[1]
    await close(made)


@pytest.fixture
async def solo(settings: Any) -> AsyncIterator[Runtime]:
    made = await runtimes(settings, ("solo",), layer=False)
    yield made[0]
    await close(made)


def call(
    runtime: Runtime,
    tool: str,
    arguments: dict[str, Any],
    address: str = "10.0.0.1",
    server: MCPServer = conformance,
) -> Context:
    """A ``tools/call`` context as the HTTP transport makes it: the Django request (its body) included."""
    request = HttpRequest()
    request.META["REMOTE_ADDR"] = address
    request._body = b"x" * MB  # what the task must not keep
    params = {"name": tool, "arguments": arguments, "_meta": {"padding": "y" * MB}}
    return Context(
        server=server,
        session=SessionState(id=None, protocol_version=MODERN, client_capabilities=WITH_TASKS),
        request_id=1,
        method="tools/call",
        params=params,
        peer=object(),  # a task never uses its call's peer
        request=request,
        runtime=runtime,
    )


def settings_with(settings: Any, **values: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, **values}


def statuses(runtime: Runtime) -> tuple[dict[str, list[TaskRecord]], asyncio.Event]:
    """Every record the runtime's store writes, by task id, and an event set at each write."""
    seen: dict[str, list[TaskRecord]] = {}
    changed = asyncio.Event()

    def heard(record: TaskRecord) -> None:
        seen.setdefault(record.task_id, []).append(record)
        changed.set()

    runtime.tasks.store.on_change(heard)
    return seen, changed


async def until_status(
    seen: dict[str, list[TaskRecord]], changed: asyncio.Event, task_id: str, status: str, within: float = 10
) -> TaskRecord:
    async with asyncio.timeout(within):
        while True:
            for record in seen.get(task_id, []):
                if record.status == status:
                    return record
            changed.clear()
            await changed.wait()


async def test_the_limits_count_live_tasks_in_the_shared_store(
    pair: tuple[Runtime, Runtime], settings: Any
) -> None:
    a, b = pair
    settings_with(settings, MAX_TASKS_PER_OWNER=2, MAX_TASKS=3)
    tool = conformance.tools["slow_compute"]
    first = await a.tasks.start(call(a, "slow_compute", {"seconds": 60}), tool, {})
    await b.tasks.start(call(b, "slow_compute", {"seconds": 60}), tool, {})
    with pytest.raises(JSONRPCError) as refused:  # the owner's third, on either worker
        await a.tasks.start(call(a, "slow_compute", {"seconds": 60}), tool, {})
    assert refused.value.code == TOO_MANY_TASKS
    assert refused.value.data == {"limit": 2, "live": 2, "setting": "MAX_TASKS_PER_OWNER"}
    assert "address 10.0.0.1" in refused.value.message
    assert set(a.tasks.running) | set(b.tasks.running) == {first["taskId"], *b.tasks.running}
    assert len(a.tasks.running) + len(b.tasks.running) == 2  # no task made, no handler started
    # Anonymous callers count by address: another one may start its own, up to the site's limit.
    await b.tasks.start(call(b, "slow_compute", {"seconds": 60}, address="10.0.0.2"), tool, {})
    with pytest.raises(JSONRPCError) as full:
        await b.tasks.start(call(b, "slow_compute", {"seconds": 60}, address="10.0.0.3"), tool, {})
    assert full.value.data == {"limit": 3, "live": 3, "setting": "MAX_TASKS"}
    assert await b.tasks.cancel(first["taskId"])  # an ended task frees its place, whichever worker ran it
    await b.tasks.start(call(b, "slow_compute", {"seconds": 60}, address="10.0.0.3"), tool, {})


async def test_the_site_limit_holds_alone_and_a_long_address_counts_by_its_stored_part(
    solo: Runtime, settings: Any
) -> None:
    """``MAX_TASKS`` applies with ``MAX_TASKS_PER_OWNER`` off; an anonymous caller's address is kept, counted
    and named in the refusal by its first 100 characters (the column's size)."""
    tool = conformance.tools["slow_compute"]
    settings_with(settings, MAX_TASKS_PER_OWNER=None, MAX_TASKS=2)
    for address in ("10.0.1.1", "10.0.1.1"):  # no cap per owner: one address may hold them all
        await solo.tasks.start(call(solo, "slow_compute", {"seconds": 60}, address=address), tool, {})
    with pytest.raises(JSONRPCError) as full:
        await solo.tasks.start(call(solo, "slow_compute", {"seconds": 60}, address="10.0.1.2"), tool, {})
    assert full.value.data == {"limit": 2, "live": 2, "setting": "MAX_TASKS"}
    long = "a" * 100 + "b" * 50
    settings_with(settings, MAX_TASKS_PER_OWNER=1, MAX_TASKS=None)
    created = await solo.tasks.start(call(solo, "slow_compute", {"seconds": 60}, address=long), tool, {})
    record = await solo.tasks.store.aget(created["taskId"])
    assert record is not None
    assert record.client_address == long[:100]
    with pytest.raises(JSONRPCError) as mine:
        await solo.tasks.start(call(solo, "slow_compute", {"seconds": 60}, address=long), tool, {})
    assert mine.value.data == {"limit": 1, "live": 1, "setting": "MAX_TASKS_PER_OWNER"}
    assert f"for address {long[:100]}:" in mine.value.message
    for task_id in list(solo.tasks.running):
        assert await solo.tasks.cancel(task_id)
    await ended(solo)


async def test_a_task_fails_at_its_deadline_working_or_parked(solo: Runtime, settings: Any) -> None:
    settings_with(settings, TASK_MAX_DURATION=0.5)
    seen, changed = statuses(solo)
    working = await solo.tasks.start(
        call(solo, "slow_compute", {"seconds": 600}), conformance.tools["slow_compute"], {}
    )
    parked = await solo.tasks.start(
        call(solo, "confirm_delete", {"filename": "f"}), conformance.tools["confirm_delete"], {}
    )
    await until_status(seen, changed, parked["taskId"], "input_required")
    for created in (working, parked):
        failed = await until_status(seen, changed, created["taskId"], "failed")
        assert failed.error is not None
        assert failed.error["code"] == REQUEST_TIMEOUT
        assert failed.error["message"] == (
            "Task timed out: still live after 0.5s, its maximum duration (TASK_MAX_DURATION, else TASK_TTL)"
        )
        assert failed.lease_expires is None
    await ended(solo)


async def ended(runtime: Runtime) -> None:
    """Wait for the handlers of the runtime's tasks to end."""
    handlers = list(runtime.tasks.running.values())
    if handlers:
        await asyncio.wait(handlers, timeout=10)
    assert not runtime.tasks.running


class Reads:
    """Counts the store reads of one task (the real store, read through)."""

    def __init__(self, runtime: Runtime, task_id: str) -> None:
        self.count = 0
        self.happened = asyncio.Event()
        store = runtime.tasks.store
        original = store.aget

        async def aget(wanted: str) -> TaskRecord | None:
            if wanted == task_id:
                self.count += 1
                self.happened.set()
            return await original(wanted)

        store.aget = aget  # type: ignore[method-assign,assignment]


async def test_a_parked_task_sleeps_until_its_task_changes(solo: Runtime) -> None:
    seen, changed = statuses(solo)
    created = await solo.tasks.start(
        call(solo, "confirm_delete", {"filename": "f"}), conformance.tools["confirm_delete"], {}
    )
    task_id = created["taskId"]
    await until_status(seen, changed, task_id, "input_required")
    reads = Reads(solo, task_id)
    # Parked without a channel layer, it read the store every 0.2 s: now it reads it when woken only.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reads.happened.wait(), 1.0)
    assert reads.count == 0
    assert (await solo.upkeep.round())["tasks_woken"] == 0  # its row did not change: not read again
    assert reads.count == 0
    answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    await solo.tasks.store.aanswer(task_id, answer)  # a write in this process wakes it (no wake() call)
    done = await until_status(seen, changed, task_id, "completed", within=2)
    assert done.result is not None
    assert done.result["content"][0]["text"] == "Deleted f"


async def test_the_upkeep_wakes_a_parked_task_whose_message_was_lost(solo: Runtime) -> None:
    seen, changed = statuses(solo)
    created = await solo.tasks.start(
        call(solo, "confirm_delete", {"filename": "g"}), conformance.tools["confirm_delete"], {}
    )
    task_id = created["taskId"]
    await until_status(seen, changed, task_id, "input_required")
    other = type(solo.tasks.store)()  # another worker's store: this process hears nothing of its write
    await other.aanswer(task_id, {"confirm": {"action": "accept", "content": {"confirm": False}}})
    assert (await solo.upkeep.round())["tasks_woken"] == 1  # its row changed: it reads it again
    done = await until_status(seen, changed, task_id, "completed")
    assert done.result is not None
    assert done.result["content"][0]["text"] == "Kept g"


async def test_a_task_keeps_neither_its_request_nor_its_memory_once_ended(
    solo: Runtime, no_collection: None
) -> None:
    seen, changed = statuses(solo)
    tool = probe.tools["probe"]
    PROBED.clear()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        started: list[tuple[str, weakref.ref[Any], weakref.ref[Any]]] = []
        for _ in range(8):
            ctx = call(solo, "probe", {"filename": "z" * MB}, server=probe)
            created = await solo.tasks.start(ctx, tool, {})
            started.append((created["taskId"], weakref.ref(ctx.request), weakref.ref(ctx)))
            del ctx
        for task_id, request, call_ctx in started:
            await until_status(seen, changed, task_id, "input_required")
            assert request() is None, "a parked task keeps the HTTP request of its call"
            assert call_ctx() is None, "a parked task keeps the context of its call"
        handlers = list(solo.tasks.running.values())
        task_contexts = list(PROBED)
        assert len(task_contexts) == len(started)
        answer = {"confirm": {"action": "accept", "content": {"confirm": False}}}
        answered, cancelled = started[::2], started[1::2]  # the two ways a parked task ends
        for task_id, _request, _ctx in answered:
            await solo.tasks.store.aanswer(task_id, answer)
        for task_id, _request, _ctx in cancelled:
            assert await solo.tasks.cancel(task_id)
        for task_id, _request, _ctx in answered:
            await until_status(seen, changed, task_id, "completed")
        await asyncio.wait(handlers, timeout=10)
        assert not solo.tasks.running
        del handlers
        seen.clear()
        assert [ref() for ref in task_contexts] == [None] * len(started)  # freed by refcount: gc is off
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 2 * MB, f"{held / MB:.1f} MB still held after 8 tasks of 1 MB arguments ended"
