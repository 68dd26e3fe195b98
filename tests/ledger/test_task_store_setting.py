"""``TASK_STORE_BACKEND`` chooses the task store at each place that makes one, through the one loader
(:func:`mcp_server.stores.tasks.new_task_store`): a worker's runtime, the admin's cancel action and
``manage.py mcp_prune``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from typing import Any, ClassVar

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from mcp_server.admin_live.operations import acancel_tasks
from mcp_server.core.tasks import CANCELLED, COMPLETED, TaskRecord, new_task_id
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.stores.tasks import new_task_store
from mcp_server.stores.tasks.database import DatabaseTaskStore

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "tests.ledger.test_task_store_setting.CountingTaskStore"


class CountingTaskStore(DatabaseTaskStore):
    """The database store, counting the calls each place makes on its own instance."""

    made: ClassVar[list[CountingTaskStore]] = []

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        CountingTaskStore.made.append(self)

    async def afinish(self, task_id: str, status: str, **kwargs: Any) -> bool:
        self.calls.append(f"afinish:{status}")
        return await super().afinish(task_id, status, **kwargs)

    async def aprune(self, now: Any) -> int:
        self.calls.append("aprune")
        return await super().aprune(now)


@pytest.fixture
def counting() -> Iterator[list[CountingTaskStore]]:
    CountingTaskStore.made.clear()
    with override_settings(MCP_SERVER={**settings.MCP_SERVER, "TASK_STORE_BACKEND": PATH}):
        yield CountingTaskStore.made
    CountingTaskStore.made.clear()


def task(*, status: str = "working", age: float = 0.0, ttl_ms: int = 60_000) -> TaskRecord:
    then = timezone.now() - timedelta(seconds=age)
    record = TaskRecord(
        task_id=new_task_id(), server="default", owner="anonymous", tool="t", created=then, updated=then
    )
    record.status, record.ttl_ms = status, ttl_ms
    async_to_sync(DatabaseTaskStore().acreate)(record)
    return record


def test_the_default_is_the_database_store() -> None:
    assert type(new_task_store()) is DatabaseTaskStore
    assert new_task_store() is not new_task_store()  # each caller's own: its listeners are its own


@pytest.mark.asyncio
async def test_a_runtime_runs_its_tasks_on_the_configured_store(counting: list[CountingTaskStore]) -> None:
    runtime = Runtime(worker_id="w-store", ledger=DatabaseLedger({}))
    try:
        assert counting == [runtime.tasks.store]
    finally:
        await runtime.aclose()


def test_the_admin_cancel_goes_through_the_configured_store(counting: list[CountingTaskStore]) -> None:
    live = task()
    assert async_to_sync(acancel_tasks)([live.task_id]) == [live.task_id]
    [store] = counting
    assert store.calls == [f"afinish:{CANCELLED}"]
    stored = async_to_sync(DatabaseTaskStore().aget)(live.task_id)
    assert stored is not None
    assert stored.status == CANCELLED


def test_mcp_prune_prunes_through_the_configured_store(counting: list[CountingTaskStore]) -> None:
    ended = task(status=COMPLETED, age=3600, ttl_ms=1000)
    out = StringIO()
    call_command("mcp_prune", "--skip-sessions", stdout=out)
    [store] = counting
    assert "aprune" in store.calls
    assert "pruned 1 tasks past their TTL" in out.getvalue()
    assert async_to_sync(DatabaseTaskStore().aget)(ended.task_id) is None
