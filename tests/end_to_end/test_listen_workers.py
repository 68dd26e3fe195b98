"""``subscriptions/listen`` across worker processes: two Daphne workers of one site (PostgreSQL ledger, Redis
channel layer); a change made on one worker reaches the listen streams held by the other, filtered per
stream and tagged with its subscription id, and the listen request's ledger row is settled when the client
closes the stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support.listen import SUBSCRIPTION, listening, notify
from tests.support.live import LiveServer, require_services, two_workers
from tests.support.wait import wait_for

pytestmark = pytest.mark.asyncio

WATCHED_URI = "catalogue://stats"  # a resource of the default server, readable by anyone


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer, str]]:
    """Worker A (JSON responses) and worker B (SSE) of one site, and the site's database URL."""
    require_services()
    with two_workers(tmp_path_factory.mktemp("listen-workers")) as workers:
        yield workers


def rows(database: str, sql: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(database, row_factory=dict_row) as db:
        return list(db.execute(sql, params).fetchall())


async def test_a_list_change_on_one_worker_reaches_a_listener_on_another(
    workers: tuple[LiveServer, LiveServer, str],
) -> None:
    a, b, _ = workers
    async with listening(a, {"toolsListChanged": True}, "on-a") as stream:
        await stream.next()  # the acknowledgement
        await notify(b, feature="prompts")  # not asked for
        await notify(b, feature="tools")
        changed = await stream.next()
        assert changed["method"] == "notifications/tools/list_changed"
        assert changed["params"]["_meta"][SUBSCRIPTION] == "on-a"


async def test_a_resource_update_reaches_each_worker_s_streams_that_asked(
    workers: tuple[LiveServer, LiveServer, str],
) -> None:
    a, b, _ = workers
    async with (
        listening(b, {"resourceSubscriptions": [WATCHED_URI]}, 1) as on_b,
        listening(a, {"resourceSubscriptions": [WATCHED_URI]}, 1) as on_a,
        listening(a, {"promptsListChanged": True}, 2) as prompts_on_a,
    ):
        for stream in (on_b, on_a, prompts_on_a):
            await stream.next()
        await notify(a, uri="test://elsewhere")  # subscribed by nobody
        await notify(a, uri=WATCHED_URI)
        await notify(b, feature="prompts")  # the prompts stream's first: the update passed it over
        for stream in (on_b, on_a):
            updated = await stream.next()
            assert updated["method"] == "notifications/resources/updated"
            assert updated["params"]["uri"] == WATCHED_URI
            assert updated["params"]["_meta"][SUBSCRIPTION] == 1
        assert (await prompts_on_a.next())["method"] == "notifications/prompts/list_changed"


async def test_closing_the_stream_settles_the_listen_row(workers: tuple[LiveServer, LiveServer, str]) -> None:
    a, _, database = workers

    def states() -> list[str]:
        found = rows(database, "SELECT state FROM mcp_server_ledgerentry WHERE request_key = 's:row-check'")
        return [row["state"] for row in found]

    async def pending() -> bool:
        return states() == ["pending"]

    async def cancelled() -> bool:
        return states() == ["cancelled"]

    async with listening(a, {"toolsListChanged": True}, "row-check") as stream:
        await stream.next()
        await wait_for(pending)
    await wait_for(cancelled)
