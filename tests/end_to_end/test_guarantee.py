"""The reply guarantee (invariants I1-I7), proven against real servers.

Each of the two failures that motivate the project has a reproduction here, written so that it fails on a
server without the guarantee: a handler that returns nothing, a JSON-mode POST whose session ends or whose
request is cancelled while it is in flight.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import RawSession, messages_of, open_session, rpc

LEDGERS = {
    "database-ledger": "mcp_server.stores.ledger.database.DatabaseLedger",
    "cache-ledger": "mcp_server.stores.ledger.cache.CacheLedger",
}


@pytest.fixture(scope="module", params=sorted(LEDGERS))
def json_server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    """A JSON-mode server, once with each ledger backend."""
    return start({"RESPONSE_MODE": "json", "LEDGER_BACKEND": LEDGERS[request.param]})


@pytest.fixture(scope="module")
def sse_server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": "sse"})


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def session_on(server: LiveServer, http: httpx.AsyncClient, version: str = "2025-11-25") -> RawSession:
    return await open_session(http, server.url, version)


# -- I2: empty is an error ---------------------------------------------------------------------------------


async def test_raw_method_returning_none_gets_one_internal_error(any_mode_server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        session = await session_on(any_mode_server, http)
        answer = await session.request("test/none", {}, request_id=7)
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32603
    assert "test/none" in answer["error"]["message"]


async def test_tool_returning_none_is_an_empty_result(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    answer = await session.call_tool("returns_none")
    assert answer["result"]["content"] == []
    assert not answer["result"].get("isError")


# -- I3: failures are answers ------------------------------------------------------------------------------


async def test_raw_method_raising_gets_one_internal_error(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    answer = await session.request("test/raise", {})
    assert answer["error"]["code"] == -32603
    assert "raw failure" not in answer["error"]["message"]  # no exception text outside DEBUG data


# -- I4: session end answers -32000, in the request's envelope ---------------------------------------------


async def test_delete_while_json_post_in_flight_answers_minus_32000(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    call = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 5))
    )
    await session.wait_pending(5)
    deleted = await http.delete(json_server.url, headers=session.headers())
    assert deleted.status_code == 200
    response = await asyncio.wait_for(call, 10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict), "a single request keeps its object envelope"
    assert body["id"] == 5
    assert body["error"]["code"] == -32000
    assert body["error"]["message"].startswith("Connection closed")


async def test_delete_while_json_batch_in_flight_answers_each_id(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http, version="2025-03-26")
    batch = [rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, i) for i in (11, 12)]
    call = asyncio.create_task(session.post(batch))
    await session.wait_pending(11)
    await session.wait_pending(12)
    assert (await http.delete(json_server.url, headers=session.headers())).status_code == 200
    response = await asyncio.wait_for(call, 10)
    body = response.json()
    assert isinstance(body, list), "a batch keeps its array envelope"
    assert sorted(m["id"] for m in body) == [11, 12]
    assert {m["error"]["code"] for m in body} == {-32000}


async def test_sse_post_gets_error_event_then_closes_on_session_end(
    sse_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(sse_server, http)
    call = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 3))
    )
    await session.wait_pending(3)
    await http.delete(sse_server.url, headers=session.headers())
    response = await asyncio.wait_for(call, 10)
    assert [(m["id"], m["error"]["code"]) for m in messages_of(response)] == [(3, -32000)]


async def test_requests_after_delete_get_404(json_server: LiveServer, http: httpx.AsyncClient) -> None:
    session = await session_on(json_server, http)
    await http.delete(json_server.url, headers=session.headers())
    assert (await session.post(rpc("ping", {}, 1))).status_code == 404


# -- I5: cancel settles ------------------------------------------------------------------------------------


async def test_cancel_on_json_post_returns_202_and_leaves_nothing(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    call = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 21))
    )
    await session.wait_pending(21)
    await session.cancel(21)
    response = await asyncio.wait_for(call, 10)
    assert response.status_code == 202
    assert response.content == b""
    stats = await session.stats()
    assert stats["pending"] == []
    assert stats["inflight"] == 0


async def test_cancel_in_batch_answers_only_the_siblings(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http, version="2025-03-26")
    batch = [
        rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 31),
        rpc("tools/call", {"name": "slow", "arguments": {"seconds": 0.5}}, 32),
    ]
    call = asyncio.create_task(session.post(batch))
    await session.wait_pending(31)
    await session.cancel(31)
    body = (await asyncio.wait_for(call, 10)).json()
    assert [m["id"] for m in body] == [32]
    assert body[0]["result"]["content"][0]["text"] == "slept 0.5"


async def test_a_batch_whose_members_are_all_cancelled_is_202_without_a_body(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    """I5 for a batch: nothing left to answer is a 202 with no body, not ``200 []`` (an empty array is no
    JSON-RPC answer at all)."""
    session = await session_on(json_server, http, version="2025-03-26")
    slow = {"name": "slow", "arguments": {"seconds": 30}}
    call = asyncio.create_task(session.post([rpc("tools/call", slow, 33), rpc("tools/call", slow, 34)]))
    await session.wait_pending(33, 34)
    await session.cancel(33)
    await session.cancel(34)
    response = await asyncio.wait_for(call, 10)
    assert response.status_code == 202
    assert response.content == b""
    assert (await session.stats())["pending"] == []


async def test_cancel_on_sse_post_closes_the_stream_without_reply(
    sse_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(sse_server, http)
    call = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 41))
    )
    await session.wait_pending(41)
    await session.cancel(41)
    response = await asyncio.wait_for(call, 10)
    assert response.status_code == 200
    assert [m for m in messages_of(response) if m.get("id") == 41] == []


async def test_a_thousand_cancels_leave_nothing_behind(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    baseline = await session.stats()
    statuses: list[int] = []
    for first in range(1, 1001, 50):
        ids = range(first, first + 50)
        slow = {"name": "slow", "arguments": {"seconds": 60}}
        calls = [asyncio.create_task(session.post(rpc("tools/call", slow, i))) for i in ids]
        await session.wait_pending(*ids)
        await asyncio.gather(*(session.cancel(i) for i in ids))
        statuses += [response.status_code for response in await asyncio.wait_for(asyncio.gather(*calls), 20)]
    assert statuses == [202] * 1000
    after = await session.stats()
    assert after["pending"] == []
    assert after["inflight"] == 0
    assert after["outbound"] == 0
    assert after["tasks"] <= baseline["tasks"] + 2, "no task is left running per cancelled request"


# -- I7: deadlines -----------------------------------------------------------------------------------------


async def test_per_tool_deadline_answers_minus_32001(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    answer = await session.call_tool("short_deadline", {"seconds": 30})
    assert answer["error"]["code"] == -32001
    assert (await session.stats())["inflight"] == 0


async def test_global_deadline(start: Callable[..., LiveServer], http: httpx.AsyncClient) -> None:
    server = start({"RESPONSE_MODE": "json", "REQUEST_TIMEOUT": 0.3})
    session = await session_on(server, http)
    answer = await session.call_tool("slow", {"seconds": 30})
    assert answer["error"]["code"] == -32001


# -- ledger rules ------------------------------------------------------------------------------------------


async def test_duplicate_pending_id_is_rejected_without_harming_the_original(
    json_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await session_on(json_server, http)
    original = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 1}}, 51))
    )
    await session.wait_pending(51)
    duplicate = await session.post(rpc("ping", {}, 51))
    assert duplicate.json()["error"]["code"] == -32600
    body = (await asyncio.wait_for(original, 10)).json()
    assert body["id"] == 51
    assert body["result"]["content"][0]["text"] == "slept 1.0"


# -- stateless mode ----------------------------------------------------------------------------------------


async def test_stateless_mode_keeps_the_guarantee(
    start: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = start({"RESPONSE_MODE": "json", "STATELESS": True, "REQUEST_TIMEOUT": 0.5})
    session = await open_session(http, server.url)
    assert session.id is None
    assert session.init_result["protocolVersion"] == "2025-11-25"
    assert (await session.request("test/none", {}))["error"]["code"] == -32603
    assert (await session.call_tool("echo", {"text": "hi"}))["result"]["content"][0]["text"] == "hi"
    assert (await session.call_tool("slow", {"seconds": 30}))["error"]["code"] == -32001
    assert (await http.get(server.url, headers={"Accept": "text/event-stream"})).status_code == 405


# -- graceful shutdown -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_sigterm_answers_in_flight_requests(
    mode: str, start: Callable[..., LiveServer], http: httpx.AsyncClient
) -> None:
    server = start({"RESPONSE_MODE": mode})
    session = await session_on(server, http)
    call = asyncio.create_task(
        session.post(rpc("tools/call", {"name": "slow", "arguments": {"seconds": 30}}, 61))
    )
    await session.wait_pending(61)
    server.process.send_signal(signal.SIGTERM)
    response = await asyncio.wait_for(call, 10)
    [answer] = messages_of(response)
    assert answer["id"] == 61
    assert answer["error"] == {"code": -32000, "message": "Connection closed: server shutting down"}
    assert server.process.wait(timeout=10) == 0
