"""The database task store: one terminal status wins, concurrent answers all land, the orphans of a dead
worker are failed and the upkeep renews what runs here, and every status change reaches the listeners
(the hook ``subscriptions/listen`` uses for ``notifications/tasks``)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_server.core.tasks import TaskRecord, new_task_id
from mcp_server.ledger import get_ledger
from mcp_server.runtime.upkeep import Upkeep
from mcp_server.stores.tasks.database import DatabaseTaskStore

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

ASK = {"method": "elicitation/create", "params": {"mode": "form", "message": "?", "requestedSchema": {}}}


async def make(
    store: DatabaseTaskStore,
    worker: str = "w1",
    lease: float = 30.0,
    *,
    owner: str = "anonymous",
    address: str = "",
    deadline: float | None = None,
) -> TaskRecord:
    now = timezone.now()
    record = TaskRecord(
        task_id=new_task_id(),
        server="default",
        owner=owner,
        client_address=address,
        deadline=now + timedelta(seconds=deadline) if deadline is not None else None,
        tool="t",
        created=now,
        updated=now,
        ttl_ms=60_000,
        worker=worker,
        lease_expires=now + timedelta(seconds=lease),
    )
    await store.acreate(record)
    return record


async def test_one_terminal_status_wins_and_listeners_hear_each_change() -> None:
    store = DatabaseTaskStore()
    heard: list[tuple[str, str]] = []
    store.on_change(lambda record: heard.append((record.task_id, record.status)))
    task = await make(store)
    assert await store.aask(task.task_id, {"k": ASK})
    assert await store.aresume(task.task_id)
    wins = await asyncio.gather(
        store.afinish(task.task_id, "completed", result={"content": []}),
        store.afinish(task.task_id, "cancelled"),
        store.afinish(task.task_id, "failed", error={"code": -1, "message": "x"}),
    )
    assert sorted(wins) == [False, False, True]
    final = await store.aget(task.task_id)
    assert final is not None
    assert not await store.aask(task.task_id, {"other": ASK})  # a terminal task never changes again
    assert (await store.aget(task.task_id)) == final
    statuses = [status for task_id, status in heard if task_id == task.task_id]
    assert statuses == ["working", "input_required", "working", final.status]


async def test_concurrent_answers_all_land_and_unasked_keys_are_ignored() -> None:
    store = DatabaseTaskStore()
    task = await make(store)
    keys = [f"k{i}" for i in range(6)]
    await store.aask(task.task_id, dict.fromkeys(keys, ASK))
    answer = {"action": "accept", "content": {}}
    await asyncio.gather(*(store.aanswer(task.task_id, {key: answer, "never-asked": 1}) for key in keys))
    after = await store.aget(task.task_id)
    assert after is not None
    assert set(after.input_responses) == set(keys)
    assert after.outstanding() == {}
    assert after.status == "input_required"  # until the task's worker takes the answers and resumes it
    assert after.detailed()["inputRequests"] == {}


async def test_upkeep_renews_its_tasks_fails_orphans_and_prunes() -> None:
    store = DatabaseTaskStore()
    mine = await make(store, worker="alive")
    orphan = await make(store, worker="dead", lease=-1.0)  # its lease ran out: its worker died
    never_started = await make(store, worker="alive", lease=-1.0)  # this worker's, but not running here
    stopped: list[str] = []
    upkeep = Upkeep(
        get_ledger(),
        "alive",
        tasks=store,
        running_tasks=lambda: {mine.task_id, "cancelled-meanwhile"},
        stop_tasks=lambda ids: stopped.extend(ids),
    )
    done = await upkeep.keep_tasks(timezone.now(), timedelta(seconds=30))
    assert done["tasks_renewed"] == 1
    assert done["tasks_failed"] == 2
    assert getattr(await store.aget(never_started.task_id), "status", None) == "failed"
    assert stopped == ["cancelled-meanwhile"]
    failed = await store.aget(orphan.task_id)
    assert failed is not None
    assert failed.status == "failed"
    assert failed.error == {"code": -32000, "message": "Connection closed: the worker serving it stopped"}
    renewed = await store.aget(mine.task_id)
    assert renewed is not None
    assert renewed.status == "working"
    assert renewed.lease_expires is not None
    assert renewed.lease_expires > mine.lease_expires  # type: ignore[operator]
    later = timezone.now() + timedelta(minutes=5)  # past the TTL of both: the ended one is deleted
    assert (await upkeep.keep_tasks(later, timedelta(seconds=30), orphans=False))["tasks_pruned"] == 2
    assert await store.aget(orphan.task_id) is None
    assert await store.aget(mine.task_id) is not None  # a live task is never pruned


async def test_live_tasks_are_counted_per_owner_an_anonymous_one_by_address() -> None:
    store = DatabaseTaskStore()
    for owner in ("user:1", "user:1", "user:2"):
        await make(store, owner=owner)
    await make(store, address="10.0.0.1")
    ended = await make(store, address="10.0.0.1")
    assert await store.afinish(ended.task_id, "completed", result={"content": []})  # no longer counted
    assert await store.acount_live("user:1", "") == (2, 4)
    assert await store.acount_live("anonymous", "10.0.0.1") == (1, 4)
    assert await store.acount_live("anonymous", "10.0.0.2") == (0, 4)


async def test_upkeep_fails_the_tasks_past_their_deadline_wherever_they_run() -> None:
    store = DatabaseTaskStore()
    heard: list[tuple[str, str]] = []
    store.on_change(lambda record: heard.append((record.task_id, record.status)))
    here = await make(store, worker="alive", deadline=-5.0)
    assert await store.aask(here.task_id, {"k": ASK})  # parked input_required: it ends all the same
    elsewhere = await make(store, worker="other", deadline=-5.0)  # on a live worker that missed it
    on_time = await make(store, worker="alive", deadline=60.0)
    stopped: list[str] = []
    rechecked: list[bool] = []

    async def recheck() -> int:
        rechecked.append(True)
        return 0

    upkeep = Upkeep(
        get_ledger(),
        "alive",
        tasks=store,
        running_tasks=lambda: {here.task_id, on_time.task_id},
        stop_tasks=lambda ids: stopped.extend(ids),
        recheck_tasks=recheck,
    )
    done = await upkeep.keep_tasks(timezone.now(), timedelta(seconds=30), orphans=False)
    assert done["tasks_overdue"] == 2
    assert stopped == [here.task_id]  # its handler here stops; the other worker's finds it ended
    assert rechecked == [True]  # the parked tasks here read the store again (a lost message's fallback)
    for task in (here, elsewhere):
        failed = await store.aget(task.task_id)
        assert failed is not None
        assert failed.status == "failed"
        assert failed.error is not None
        assert failed.error["code"] == -32001
        assert (task.task_id, "failed") in heard  # told as any status change (notifications/tasks)
    assert getattr(await store.aget(on_time.task_id), "status", None) == "working"
