"""Two live workers of one site (PostgreSQL, Redis): a window that recovers on both once it is over, and
limits staff change in the admin form of one worker taking effect on the other, with no restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.admin import admin_client, create_superuser, csrf_token
from tests.support.live import LiveServer, shared_site, start_server
from tests.support.multiprocess import McpSession, open_session
from tests.support.raw import messages_of, rpc
from tests.support.wait import wait_for

WINDOW = {"per": "address", "target": "tool:echo", "rate": "2/20s", "name": "twenty seconds"}


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[LiveServer]]:
    overrides = {"RATE_LIMITS": [WINDOW], "RATE_LIMIT_RELOAD": 0.5}
    with shared_site() as env:
        started = [start_server(tmp_path, overrides, name=name, **env) for name in ("a", "b")]
        try:
            yield started
        finally:
            for worker in started:
                worker.stop()


async def call(session: McpSession, worker: LiveServer, tool: str, n: int) -> dict[str, Any]:
    arguments = {"text": "x"} if tool == "echo" else {"query": "x"}
    body = rpc("tools/call", {"name": tool, "arguments": arguments}, n)
    (answer,) = [m for m in messages_of(await session.post(worker, body)) if m.get("id") == n]
    return answer


async def test_a_window_recovers_on_both_workers_once_it_is_over(workers: list[LiveServer]) -> None:
    a, b = workers
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
        session = await open_session(http, a)
        answers = [await call(session, worker, "echo", n) for n, worker in enumerate((a, b, a), 1)]
        refused_at = time.monotonic()
        on_b = await call(session, b, "echo", 4)  # the other worker counts the same window

        async def passes() -> dict[str, Any] | None:
            answer = await call(session, b, "echo", int(time.monotonic() * 1000))
            return answer if "result" in answer else None

        recovered = await wait_for(passes, "the window to end", within=45)
        waited = time.monotonic() - refused_at
        again = await call(session, a, "echo", 5)  # a's count is the same new window: 2 of 2
        over = await call(session, b, "echo", 6)
    assert ["result" in m for m in answers] == [True, True, False]
    retry = answers[2]["error"]["data"]["retryAfter"]
    assert 1 <= retry <= 20
    assert on_b["error"]["code"] == -31429
    assert "result" in recovered
    assert waited <= 20 + 10  # the window ends when Redis expires it, not later
    assert "result" in again
    assert over["error"]["data"]["limit"]["name"] == "twenty seconds"


async def row_id(server: LiveServer, name: str) -> int:
    async with await psycopg.AsyncConnection.connect(server.env["DATABASE_URL"]) as connection:
        cursor = await connection.execute("SELECT id FROM mcp_server_ratelimit WHERE name = %s", (name,))
        found = await cursor.fetchone()
    assert found is not None
    return int(found[0])


async def save_row(client: httpx.AsyncClient, path: str, **fields: str) -> None:
    """Submit the admin's add or change form of a rate limit, as staff do in a browser."""
    page = await client.get(path)
    assert page.status_code == 200, page.text
    data = {"csrfmiddlewaretoken": csrf_token(page.text), **fields}
    saved = await client.post(path, data=data)
    assert saved.status_code == 302, saved.text  # redirected to the list: the form accepted it


async def test_a_change_in_one_workers_admin_applies_on_the_other(workers: list[LiveServer]) -> None:
    a, b = workers
    create_superuser(a)
    row = {"name": "searches", "per": "address", "target": "tool:search_books", "rate": "1/hour"}
    admin = await admin_client(a.base)
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
            session = await open_session(http, b)
            assert "result" in await call(session, b, "search_books", 1)
            assert "result" in await call(session, b, "search_books", 2)  # no limit on it yet
            await save_row(admin, "/admin/mcp_server/ratelimit/add/", **row, burst="", enabled="on")
            n = iter(range(100, 10_000))

            async def refused_on_b() -> dict[str, Any] | None:
                answer = await call(session, b, "search_books", next(n))
                return answer if "error" in answer else None

            refusal = await wait_for(refused_on_b, "worker a's new row applied on worker b", within=30)
            bad = await admin.post(
                "/admin/mcp_server/ratelimit/add/",
                data={
                    "csrfmiddlewaretoken": csrf_token(
                        (await admin.get("/admin/mcp_server/ratelimit/add/")).text
                    ),
                    **row,
                    "name": "zero",
                    "rate": "0/hour",
                },
            )
            pk = await row_id(a, "searches")
            await save_row(admin, f"/admin/mcp_server/ratelimit/{pk}/change/", **row, burst="")  # disabled

            async def passes_on_b() -> dict[str, Any] | None:
                answer = await call(session, b, "search_books", next(n))
                return answer if "result" in answer else None

            await wait_for(passes_on_b, "the disabled row applied on worker b", within=30)
    finally:
        await admin.aclose()
    assert refusal["error"]["code"] == -31429
    assert refusal["error"]["data"]["limit"] == {
        "name": "searches",
        "per": "address",
        "target": "tool:search_books",
        "rate": "1/hour",
        "window": "rate",
        "count": 1,
        "seconds": 3600,
    }
    assert bad.status_code == 200  # the form is shown again: a zero rate is refused
    assert "the count must be between 1 and" in bad.text
