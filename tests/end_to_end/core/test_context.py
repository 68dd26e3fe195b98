"""``Context`` over HTTP, against live servers: a progress token, and a client's error answer that reaches the
handler through another worker (the same in this process: ``tests/core/test_context.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer, require_services, shared_site, start_server
from tests.support.raw import RawSession, messages_of, open_session, rpc, sse_events

CLIENT_ERROR = {"code": -32042, "message": "The user closed the dialog", "data": {"where": "test"}}


# -- live: progress tokens over HTTP -------------------------------------------------------------------------


@pytest.fixture
async def session(live_server: LiveServer) -> AsyncIterator[RawSession]:
    async with httpx.AsyncClient(timeout=20) as http:
        yield await open_session(http, live_server.url)


async def call_progress(session: RawSession, token: Any) -> list[dict[str, Any]]:
    params = {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": token}}
    response = await session.post(rpc("tools/call", params, 9))
    assert response.status_code == 200, response.text
    return messages_of(response)


async def test_progress_notifications_carry_the_token_over_http(session: RawSession) -> None:
    messages = await call_progress(session, "p-1")
    assert [m.get("params") for m in messages[:-1]] == [
        {"progressToken": "p-1", "progress": 1, "total": 2, "message": "step 1"},
        {"progressToken": "p-1", "progress": 2, "total": 2, "message": "step 2"},
    ]
    assert messages[-1]["id"] == 9
    assert messages[-1]["result"]["content"] == [{"type": "text", "text": "done"}]


async def test_a_boolean_progress_token_gets_no_progress(session: RawSession) -> None:
    # The response is the last message of its POST: no progress can follow it.
    messages = await call_progress(session, True)
    assert [m.get("method") for m in messages] == [None]
    assert messages[0]["result"]["content"] == [{"type": "text", "text": "done"}]


async def test_a_progress_token_utf8_cannot_carry_gets_no_progress_and_the_call_is_served(
    session: RawSession,
) -> None:
    """A lone surrogate: the handler's progress used to fail the call with -32603 (the fuzzers found it)."""
    params = {"name": "progress", "arguments": {"steps": 2}, "_meta": {"progressToken": "p-\ud800"}}
    body = json.dumps(rpc("tools/call", params, 9)).encode()  # the surrogate as its JSON escape
    response = await session.http.post(session.url, content=body, headers=session.headers())
    assert response.status_code == 200, response.text
    messages = messages_of(response)
    assert [m.get("method") for m in messages] == [None]
    assert messages[0]["result"]["content"] == [{"type": "text", "text": "done"}]


# -- live: a client's error answer reaches the handler through another worker -------------------------------


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two workers of one site: PostgreSQL for sessions, Redis for the channel layer and the cache."""
    require_services()
    directory: Path = tmp_path_factory.mktemp("context-workers")
    with shared_site() as env:
        a = start_server(directory, {"RESPONSE_MODE": "sse"}, name="ctx-a", **env)
        try:
            b = start_server(directory, {"RESPONSE_MODE": "json"}, name="ctx-b", **env)
        except BaseException:
            a.stop()
            raise
        try:
            yield a, b
        finally:
            a.stop()
            b.stop()


@pytest.mark.parametrize(
    ("reply", "structured"),
    [
        ({"error": CLIENT_ERROR}, {"error": CLIENT_ERROR}),
        ({"result": {"action": "accept", "content": {"name": "Ada"}}}, None),
    ],
    ids=["error", "result"],
)
async def test_the_clients_answer_reaches_the_handler_through_another_worker(
    two_workers: tuple[LiveServer, LiveServer], reply: dict[str, Any], structured: dict[str, Any] | None
) -> None:
    a, b = two_workers
    async with httpx.AsyncClient(timeout=20) as http:
        on_b = await open_session(http, b.url, capabilities={"elicitation": {}})
        on_a = RawSession(http, a.url, on_b.id)
        call = rpc("tools/call", {"name": "feature_elicit", "arguments": {"message": "Your name?"}}, 5)
        async with (
            asyncio.timeout(15),
            http.stream("POST", a.url, json=call, headers=on_a.headers()) as response,
        ):
            assert response.status_code == 200
            stream = sse_events(response)
            question = await anext(stream)
            assert question["method"] == "elicitation/create"
            assert question["params"]["message"] == "Your name?"
            posted = await on_b.post({"jsonrpc": "2.0", "id": question["id"], **reply})
            assert posted.status_code == 202, posted.text
            rest = [message async for message in stream]
    assert len(rest) == 1, rest
    assert rest[0]["id"] == 5
    expected = structured if structured is not None else {"answer": reply["result"]}
    assert rest[0]["result"]["structuredContent"] == expected
