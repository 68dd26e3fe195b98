"""I10 over HTTP: any body gets a 4xx or exactly one JSON-RPC answer per request id, in every response mode,
and the ledger records what was sent, on SQLite and PostgreSQL, with the database and the cache ledger.

Bodies are written as raw bytes (``json.dumps`` escapes a lone surrogate as ``\\ud800`` and NUL as
``\\u0000``: valid JSON), and every response is read as a strict client would: UTF-8, no ``NaN``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_server.core.records import request_key
from mcp_server.wire.jsonrpc import MAX_INT_ID, MIN_INT_ID
from tests.support.live import (
    REDIS_URL,
    LiveServer,
    migrated_template,
    postgres_database,
    redis_namespace,
    require_services,
    start_server,
)
from tests.support.raw import RawSession, content_type, open_session, rpc

SURROGATE = "\ud800"
BATCH_VERSION = "2025-03-26"
DB_LEDGER = "mcp_server.stores.ledger.database.DatabaseLedger"
CACHE_LEDGER = "mcp_server.stores.ledger.cache.CacheLedger"


def strict_json(data: bytes) -> Any:
    """What a strict client reads: UTF-8 (an encoded surrogate is not) holding JSON without NaN/Infinity."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def answers(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response, read strictly; never a 5xx."""
    assert response.status_code < 500, response.text
    kind = content_type(response)
    if response.status_code == 202:
        assert response.content == b""
        return []
    if kind == "application/json":
        body = strict_json(response.content)
        return body if isinstance(body, list) else [body]
    assert kind == "text/event-stream", (response.status_code, kind)
    messages = []
    for block in response.content.split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if any(data):  # (a priming event has empty data)
            messages.append(strict_json(b"\n".join(data)))
    return messages


def only_answer(response: httpx.Response, request_id: int | str) -> dict[str, Any]:
    """The one answer to ``request_id`` (and no other answer in the response)."""
    replies = [m for m in answers(response) if "method" not in m]
    assert [m.get("id") for m in replies] == [request_id], replies
    return replies[0]


def refused(response: httpx.Response, code: int, request_id: int | str | None) -> dict[str, Any]:
    """A single message refused with HTTP 400 and a JSON-RPC error carrying ``request_id``."""
    assert response.status_code == 400, response.text
    [answer] = answers(response)
    assert answer["id"] == request_id
    assert answer["error"]["code"] == code, answer
    return dict(answer["error"])


async def post(session: RawSession, body: Any) -> httpx.Response:
    """POST ``body`` (bytes as they are, anything else as ``json.dumps`` writes it)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await session.http.post(session.url, content=raw, headers=session.headers())


def call(request_id: int | str, tool: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": tool, "arguments": arguments}, request_id)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


async def records(session: RawSession) -> dict[str, dict[str, Any]]:
    """The session's ledger records by stored request id (the test app's probe flushes the writer first)."""
    probe = await post(session, rpc("test/ledger_records", {}, "records-probe"))
    result = only_answer(probe, "records-probe")["result"]
    return {r["request_key"]: r for r in result["records"] if r["request_key"] != "s:records-probe"}


def stored_ids(stored: dict[str, dict[str, Any]]) -> set[Any]:
    return {record["request_id"] for record in stored.values()}


async def test_long_ids_are_served_kept_whole_and_told_apart(
    site: LiveServer, http: httpx.AsyncClient
) -> None:
    """JSON-RPC lets an id be any string: one past the ledger's column is keyed by its hash beside a
    prefix. Two ids with the same long prefix stay distinct; the same long id twice in flight is refused
    once, as a short one is; each settles with its whole id."""
    session = await open_session(http, site.url)
    first, second = "p" * 250 + "-1", "p" * 250 + "-2"
    slow = asyncio.create_task(post(session, call(first, "slow", seconds=30)))
    await session.wait_pending(first)
    duplicate = only_answer(await post(session, call(first, "echo", text="again")), first)["error"]
    assert duplicate["code"] == -32600, duplicate
    assert "already in flight" in duplicate["message"], duplicate
    assert only_answer(await post(session, call(second, "echo", text="other")), second)["result"]
    await session.cancel(first)
    assert (await asyncio.wait_for(slow, 20)).status_code == 202
    stored = await records(session)
    hashed = {key: r for key, r in stored.items() if key.startswith("h:")}
    assert {r["request_id"] for r in hashed.values()} == {first, second}, hashed
    assert all(len(key) <= 200 and key.endswith("p" * 50) for key in hashed), hashed
    assert {r["state"] for r in hashed.values()} <= {"cancelled", "answered"}, hashed
    assert await nothing_pending(session)


async def nothing_pending(session: RawSession) -> bool:
    probe = await post(session, rpc("test/ledger_pending", {}, "pending-probe"))
    return bool(only_answer(probe, "pending-probe")["result"]["pending"] == [])


# -- every response mode -------------------------------------------------------------------------------------


async def test_a_result_with_a_lone_surrogate_is_internal_error_for_its_id_and_so_recorded(
    any_mode_server: LiveServer, http: httpx.AsyncClient
) -> None:
    """A raw method's result (its params as sent, echoed): what the handler returns, JSON cannot carry."""
    session = await open_session(http, any_mode_server.url)
    message = rpc("test/echo", {"text": SURROGATE}, 13)
    response = await post(session, message)
    assert response.status_code == 200
    answer = only_answer(response, message["id"])
    assert answer["error"]["code"] == -32603, answer
    assert "lone UTF-16 surrogate" in answer["error"]["message"]
    recorded = (await records(session))[f"i:{message['id']}"]
    assert recorded["state"] == "answered"
    assert recorded["outcome"] == {"error": answer["error"]}  # what was sent, not "a result"
    assert await nothing_pending(session)


async def test_a_lone_surrogate_in_a_tools_or_a_prompts_arguments_is_refused_before_it_runs(
    any_mode_server: LiveServer, http: httpx.AsyncClient
) -> None:
    """Valid in the request's JSON (the escape), but no text, which a handler's ``str`` is: the tool's call
    is an invalid-arguments result and the prompt's -32602, neither handler run (its queries would fail on
    SQLite and PostgreSQL alike, as an internal error)."""
    session = await open_session(http, any_mode_server.url)
    tool = only_answer(await post(session, call(11, "echo", text="a" + SURROGATE)), 11)
    assert tool["result"]["isError"] is True, tool
    assert tool["result"]["content"][0]["text"].startswith("Invalid arguments for tool echo: text: ")
    prompt = rpc("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": SURROGATE}}, 12)
    refused = only_answer(await post(session, prompt), 12)
    assert refused["error"]["code"] == -32602, refused
    assert await nothing_pending(session)


@pytest.mark.parametrize(
    ("message", "request_id"),
    [
        (rpc("ping", None, SURROGATE), None),
        (rpc("ping", None, "ok" + SURROGATE + "ok"), None),
        (rpc("ping", None, 1.5), None),
        (rpc("ping", None, True), None),
        (rpc("ping", None, {"id": 1}), None),
        (rpc("ping", None, [1]), None),
        (rpc("tools/" + SURROGATE, {}, 9), 9),
        (rpc("x\x00", {}, 10), 10),
    ],
    ids=[
        "surrogate-id",
        "surrogate-in-id",
        "float-id",
        "bool-id",
        "object-id",
        "array-id",
        "surrogate-method",
        "nul-method",
    ],
)
async def test_a_request_the_server_cannot_accept_is_400_with_its_id_when_readable(
    any_mode_server: LiveServer, http: httpx.AsyncClient, message: dict[str, Any], request_id: int | None
) -> None:
    session = await open_session(http, any_mode_server.url)
    refused(await post(session, message), -32600, request_id)
    assert await nothing_pending(session)


@pytest.mark.parametrize("depth", [600, 900, 2_000, 100_000])
async def test_deep_nesting_is_a_parse_error_or_one_answer(
    any_mode_server: LiveServer, http: httpx.AsyncClient, depth: int
) -> None:
    """Whatever depth the parser manages, the request is refused (400, -32700) or answered once."""
    session = await open_session(http, any_mode_server.url)
    body = (
        b'{"jsonrpc": "2.0", "id": 5, "method": "test/echo", "params": {"deep": '
        + b"[" * depth
        + b"]" * depth
        + b"}}"
    )
    response = await post(session, body)
    if response.status_code == 400:
        refused(response, -32700, None)
    else:
        only_answer(response, 5)
    assert await nothing_pending(session)


async def test_nan_is_not_json_and_an_infinite_number_is_not_sent(
    any_mode_server: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await open_session(http, any_mode_server.url)
    refused(
        await post(session, b'{"jsonrpc": "2.0", "id": 1, "method": "test/echo", "params": {"n": NaN}}'),
        -32700,
        None,
    )
    response = await post(
        session, b'{"jsonrpc": "2.0", "id": 2, "method": "test/echo", "params": {"n": 1e400}}'
    )
    assert only_answer(response, 2)["error"]["code"] == -32603
    assert await nothing_pending(session)


async def test_each_member_of_a_batch_is_answered_on_its_own(
    any_mode_server: LiveServer, http: httpx.AsyncClient
) -> None:
    """One hostile member never costs another its answer (2025-03-26 allows batches)."""
    session = await open_session(http, any_mode_server.url, BATCH_VERSION)
    members = [
        json.dumps(call(1, "echo", text="fine")),
        json.dumps(call(2, "echo", text=SURROGATE)),
        json.dumps(rpc("ping", None, SURROGATE)),
        json.dumps(rpc("ping", None, 1.5)),
        '{"jsonrpc": "2.0", "id": 3, "method": "test/echo", "params": {"n": 1e400}}',
        json.dumps(rpc("x\x00", {}, 4)),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/whatever"}),
        json.dumps(rpc("prompts/get", {"name": SURROGATE}, 5)),
        json.dumps(rpc("ping", None, 6)),
    ]
    response = await post(session, ("[" + ", ".join(members) + "]").encode())
    assert response.status_code == 200
    replies = answers(response)
    by_id = {m["id"]: m for m in replies if m["id"] is not None}
    assert len(by_id) == len(replies) - 2, replies  # ids are unique; two members had no readable id
    assert sorted(by_id) == [1, 2, 3, 4, 5, 6]
    assert by_id[1]["result"]["content"] == [{"type": "text", "text": "fine"}]
    assert by_id[2]["result"]["isError"] is True  # a tool's str is text: refused before it runs
    assert by_id[3]["error"]["code"] == -32603
    assert by_id[4]["error"]["code"] == -32600
    assert by_id[5]["error"] == {"code": -32602, "message": "Unknown prompt: \ufffd"}
    assert by_id[6]["result"] == {}
    assert [m["error"]["code"] for m in replies if m["id"] is None] == [-32600, -32600]
    stored = await records(session)
    assert {key: r["state"] for key, r in stored.items()} == {f"i:{n}": "answered" for n in (1, 2, 3, 5, 6)}
    assert stored["i:3"]["outcome"] == {"error": by_id[3]["error"]}  # what was sent


# -- values a ledger column cannot hold: SQLite and PostgreSQL, database and cache ledger --------------------


@dataclass
class Sites:
    servers: dict[str, LiveServer]


SITES: dict[str, tuple[dict[str, Any], bool]] = {
    "sqlite-db": ({"LEDGER_BACKEND": DB_LEDGER}, False),
    "sqlite-cache": ({"LEDGER_BACKEND": CACHE_LEDGER}, False),
    "postgres-db": ({"LEDGER_BACKEND": DB_LEDGER}, True),
    "postgres-db-write-through": ({"LEDGER_BACKEND": DB_LEDGER, "LEDGER_FLUSH_INTERVAL": 0}, True),
    "postgres-cache": ({"LEDGER_BACKEND": CACHE_LEDGER}, True),
}


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    """One JSON-mode server per storage (PostgreSQL ones with Redis as cache), started in parallel."""
    require_services()
    directory: Path = tmp_path_factory.mktemp("hostile")
    migrated_template(directory)  # once, before the SQLite servers copy it in parallel
    with postgres_database() as database, redis_namespace() as prefix:
        shared = {"DATABASE_URL": database, "REDIS_URL": REDIS_URL, "MCP_TEST_REDIS_PREFIX": prefix}
        with ThreadPoolExecutor(len(SITES)) as pool:
            futures = {
                name: pool.submit(
                    start_server,
                    directory,
                    {"RESPONSE_MODE": "json", **overrides},
                    name=name,
                    **(shared if on_postgres else {}),
                )
                for name, (overrides, on_postgres) in SITES.items()
            }
            started = {}
            errors = []
            for name, future in futures.items():
                try:
                    started[name] = future.result()
                except Exception as exc:
                    errors.append(exc)
        try:
            if errors:
                raise errors[0]
            yield Sites(started)
        finally:
            for server in started.values():
                server.stop()


@pytest.fixture(params=sorted(SITES))
def site(request: pytest.FixtureRequest, sites: Sites) -> LiveServer:
    return sites.servers[request.param]


REFUSED_IDS: list[int | str] = [MAX_INT_ID + 1, MIN_INT_ID - 1, 10**30, "a\x00b"]
ACCEPTED_IDS: list[int | str] = [
    "x" * 198,
    "x" * 199,
    "x" * 300,
    "é" * 5_000,
    MAX_INT_ID,
    MIN_INT_ID,
    "日本語 ✓",
]


async def test_values_a_ledger_column_cannot_hold_are_refused_or_stored_safely(
    site: LiveServer, http: httpx.AsyncClient
) -> None:
    session = await open_session(http, site.url)
    for request_id in REFUSED_IDS:  # ids: refused, the id echoed (it can be sent back)
        error = refused(await post(session, rpc("ping", None, request_id)), -32600, request_id)
        assert "request id" in error["message"]
    assert "method" in refused(await post(session, rpc("tools/\x00call", {}, 21)), -32600, 21)["message"]
    long_method = only_answer(await post(session, rpc("m" * 300, {}, 20)), 20)  # unknown, however long
    assert long_method["error"]["code"] == -32601, long_method
    for request_id in ACCEPTED_IDS:  # at the limits: served
        assert only_answer(await post(session, rpc("ping", None, request_id)), request_id)["result"] == {}

    assert stored_ids(await records(session)) >= {"x" * 300, "é" * 5_000}  # kept whole

    # Names: the request is answered, the record keeps what the column can hold.
    expected = {
        30: (call(30, "no\x00such"), -32602, "no\ufffdsuch"),
        31: (call(31, "n" * 5_000), -32602, "n" * 300),
        32: (call(32, SURROGATE), -32602, "\ufffd"),
        33: (rpc("resources/read", {"uri": "test://a\x00b"}, 33), -32002, "test://a\ufffdb"),
        34: (rpc("resources/read", {"uri": "test://" + SURROGATE}, 34), -32002, "test://\ufffd"),
    }
    for request_id, (message, code, _name) in expected.items():
        assert only_answer(await post(session, message), request_id)["error"]["code"] == code
    unreadable = only_answer(await post(session, call(35, "echo", text=SURROGATE)), 35)
    assert unreadable["result"]["isError"] is True  # the client's text, refused before the tool runs
    nul_text = only_answer(await post(session, call(36, "echo", text="a\x00b")), 36)
    assert nul_text["result"]["content"] == [{"type": "text", "text": "a\x00b"}]  # NUL is fine on the wire

    stored = await records(session)
    for request_id, (_message, code, name) in expected.items():
        record = stored[f"i:{request_id}"]
        assert (record["state"], record["name"], record["outcome"]["error"]["code"]) == (
            "answered",
            name,
            code,
        )
        assert "\x00" not in record["outcome"]["error"]["message"]
    assert stored["i:30"]["outcome"]["error"]["message"] == "Unknown tool: no\ufffdsuch"
    assert stored["i:36"]["outcome"] == {"result": True}
    accepted_keys = {request_key(i) for i in ACCEPTED_IDS}
    assert accepted_keys <= set(stored)
    assert all(stored[key]["state"] == "answered" for key in accepted_keys)
    served = {"i:1", "i:20"} | accepted_keys | {f"i:{n}" for n in [*expected, 35, 36]}  # initialize was id 1
    assert set(stored) == served  # nothing of what was refused
    assert await nothing_pending(session)
