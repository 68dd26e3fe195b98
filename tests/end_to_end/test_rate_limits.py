"""Rate limits on live servers: the refusal's exact shape through the official client (both eras), and two
workers on Redis letting exactly the limit through a parallel burst."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from mcp import Client, MCPError

from tests.support.live import LiveServer, shared_site, start_server
from tests.support.multiprocess import open_session
from tests.support.raw import messages_of, rpc
from tests.support.wait import wait_for

ECHO_LIMIT = {"per": "address", "target": "tool:echo", "rate": "2/minute", "name": "echo"}


async def test_the_refusal_through_the_official_client_in_both_eras(
    start: Callable[..., LiveServer],
) -> None:
    server = start({"RATE_LIMITS": [ECHO_LIMIT]})
    async with Client(server.url, mode="legacy") as legacy:
        assert legacy.protocol_version == "2025-11-25"
        for _ in range(2):
            assert not (await legacy.call_tool("echo", {"text": "hi"})).is_error
        with pytest.raises(MCPError) as refused:
            await legacy.call_tool("echo", {"text": "hi"})
        assert not (await legacy.call_tool("search_books", {"query": "Calvino"})).is_error  # not limited
    error = refused.value
    assert error.code == -31429
    retry = error.data["retryAfter"]
    assert isinstance(retry, int)
    assert 1 <= retry <= 60
    assert error.message == f"Rate limit 'echo' exceeded; retry after {retry} seconds"
    assert error.data["limit"] == {
        "name": "echo",
        "per": "address",
        "target": "tool:echo",
        "rate": "2/minute",
        "window": "rate",
        "count": 2,
        "seconds": 60,
    }
    async with Client(server.url) as modern:  # 2026-07-28: the same address, the same count
        assert modern.protocol_version == "2026-07-28"
        with pytest.raises(MCPError) as again:
            await modern.call_tool("echo", {"text": "hi"})
    assert again.value.code == -31429
    assert again.value.data["limit"] == error.data["limit"]  # limited alike: the same limit, the same shape
    assert (
        again.value.message
        == f"Rate limit 'echo' exceeded; retry after {again.value.data['retryAfter']} seconds"
    )


async def test_two_workers_on_redis_let_exactly_the_limit_through(tmp_path: Path) -> None:
    limit = {"per": "address", "target": "tool:echo", "rate": "10/hour", "name": "burst"}
    overrides = {"RATE_LIMITS": [limit], "RATE_LIMIT_RELOAD": 0.5}
    with shared_site() as env:
        workers = [start_server(tmp_path, overrides, name=name, **env) for name in ("a", "b")]
        try:
            async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as http:
                session = await open_session(http, workers[0])

                async def call(n: int) -> dict[str, Any]:
                    body = rpc("tools/call", {"name": "echo", "arguments": {"text": str(n)}}, n)
                    response = await session.post(workers[n % 2], body)
                    (answer,) = [m for m in messages_of(response) if m.get("id") == n]
                    return answer

                answers = await asyncio.gather(*(call(n) for n in range(1, 51)))
                outcomes = await wait_for(
                    lambda: settled_calls(env["DATABASE_URL"], session.id), "the 50 calls in the ledger"
                )
                # a row staff add in the admin (here written straight into its table) limits the other
                # worker within RATE_LIMIT_RELOAD seconds, with no restart
                await add_row(env["DATABASE_URL"])

                async def refused_on_b() -> dict[str, Any] | None:
                    body = rpc("tools/call", {"name": "search_books", "arguments": {"query": "x"}}, "s")
                    (answer,) = messages_of(await session.post(workers[1], body))
                    return answer if "error" in answer else None

                row_refusal = await wait_for(refused_on_b, "the admin's row applied on worker b")
        finally:
            for worker in workers:
                worker.stop()
    passed = [a for a in answers if "result" in a]
    refused = [a for a in answers if "error" in a]
    assert len(passed) == 10
    assert len(refused) == 40
    assert {a["error"]["code"] for a in refused} == {-31429}
    assert row_refusal["error"]["data"]["limit"]["name"] == "admin row"
    # each call recorded once: 10 answered with a result, 40 rate_limited with the refusal as their outcome
    assert sorted(outcomes.values()) == sorted(["answered result"] * 10 + ["rate_limited -31429"] * 40)


async def add_row(database: str) -> None:
    async with await psycopg.AsyncConnection.connect(database) as connection:
        await connection.execute(
            "INSERT INTO mcp_server_ratelimit (name, per, target, rate, enabled, updated)"
            " VALUES ('admin row', 'address', 'tool:search_books', '1/hour', true, now())"
        )
        await connection.commit()


async def settled_calls(database: str, session_id: str) -> dict[str, str] | None:
    """``tools/call`` rows of the session, settled: request key -> "<state> result" or "<state> <code>"."""
    async with await psycopg.AsyncConnection.connect(database) as connection:
        cursor = await connection.execute(
            "SELECT request_key, state, outcome FROM mcp_server_ledgerentry"
            " WHERE session_id = %s AND method = 'tools/call'",
            (session_id,),
        )
        rows = await cursor.fetchall()
    if len(rows) != 50 or any(state == "pending" for _, state, _ in rows):
        return None
    return {
        key: f"{state} " + ("result" if "result" in out else str(out["error"]["code"]))
        for key, state, out in rows
    }


async def test_the_demo_sites_low_limit(start: Callable[..., LiveServer]) -> None:
    from tests.settings import DEMO_RATE_LIMITS

    server = start({"RATE_LIMITS": DEMO_RATE_LIMITS})
    async with Client(server.url) as client:
        for _ in range(5):
            assert not (await client.call_tool("get_book", {"book_id": 1})).is_error
        with pytest.raises(MCPError) as refused:
            await client.call_tool("get_book", {"book_id": 1})
    assert refused.value.code == -31429
    assert refused.value.data["limit"]["name"] == "demo: get_book, anonymous"
    assert 1 <= refused.value.data["retryAfter"] <= 60
