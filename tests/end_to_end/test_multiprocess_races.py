"""I1, I5, I7, I8 under races: worker A serves a request, a competing settlement comes through worker B.

Two Daphne workers per ledger backend (the database ledger on PostgreSQL, the cache ledger on Redis) share
one PostgreSQL database and one Redis namespace. The handler is ``race_gate`` (tests/testapp/mcp.py): a sync
tool that blocks its worker thread until the test opens its gate with an ``RPUSH`` on Redis, and reports its
start and its end on Redis lists the test waits on with ``BLPOP``. A thread is not stopped by a cancel, so
the handler really does finish after the winner, at a moment the test chooses. The worker holding a request
decides its settlement in memory; B reaches it with a channel-layer message; each worker writes the ledger
behind its requests, so the tests wait for records (:func:`pending_pk`, :func:`settled_entry`).

- Order 1: the competing settlement (a cancel or a DELETE posted to B, an operator's abort on B's admin, the
  deadline, the death of A) wins while the handler still runs; the client gets exactly the winner's reply
  before the handler ends, and nothing more once it has ended.
- Order 2: the handler's answer is delivered first; the competing action then changes nothing.
- B's message held up: B has received the cancel, the DELETE or the abort, and is stopped (SIGSTOP) before
  it can tell A; A's handler answers, the client gets that answer once, and B's message, once B resumes,
  changes nothing.
- The same request id posted to A, then to B while it is pending: the ledger refuses it at B's next batch.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis.asyncio as aioredis
from channels_redis.core import RedisChannelLayer
from psycopg.rows import dict_row

from mcp_server.wire.messages import AbortRequest, AbortResult, parse_event, to_event
from tests.support.admin import admin_client, create_superuser
from tests.support.live import (
    REDIS_URL,
    LiveServer,
    require_services,
    shared_site,
    start_server,
)
from tests.support.multiprocess import (
    BATCH_VERSION,
    CACHE_LEDGER,
    DB_LEDGER,
    McpSession,
    open_session,
    request_key,
)
from tests.support.raw import content_type, messages_of, rpc
from tests.support.wait import wait_for

LEASE = 2.0
"""``LEASE_TIMEOUT`` of every worker here: a killed worker's requests are settled within a few seconds."""
REPLY_WITHIN = 10.0
"""How long a reply may take once its outcome is decided (generous: the machine is shared)."""
DEADLINE = 1.0
"""The ``timeout`` of ``race_gate_deadline``."""
CLOSED_BY_DELETE = "Connection closed: session terminated by the client"
DEAD_WORKER = "Connection closed: the worker serving it stopped"
ABORT_PATH = "/admin/mcp_server/ledgerentry/live/abort/"

WINNERS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "cancel": ("cancelled", None),
    "delete": ("closed", {"code": -32000, "message": CLOSED_BY_DELETE}),
    "abort": ("aborted", {"code": -32003, "message": "Request aborted by an operator"}),
    "deadline": ("timed_out", {"code": -32001, "message": f"Request timed out after {DEADLINE:g}s"}),
}
"""Each competing settlement: the ledger state it leaves, and its error reply (``None``: no reply)."""


# -- services and servers -------------------------------------------------------------------------------


@dataclass
class Site:
    """Two workers of one site: a JSON-mode and an SSE-mode one, each the other's "B"."""

    backend: str
    database: str
    prefix: str
    json_worker: LiveServer
    sse_worker: LiveServer
    directory: Path
    env: dict[str, str]

    @property
    def uses_database_ledger(self) -> bool:
        return self.backend == DB_LEDGER

    def pair(self, mode: str) -> tuple[LiveServer, LiveServer]:
        """``(A, B)``: A, in response mode ``mode``, serves the request; B settles it."""
        if mode == "json":
            return self.json_worker, self.sse_worker
        return self.sse_worker, self.json_worker


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Site]]:
    """Four workers started in parallel (two per ledger backend) on a fresh database and Redis namespace."""
    require_services()
    directory: Path = tmp_path_factory.mktemp("races")
    with shared_site() as env:
        backends = {"db": DB_LEDGER, "cache": CACHE_LEDGER}
        specs = {
            f"{label}-{mode}": {"RESPONSE_MODE": mode, "LEDGER_BACKEND": backend, "LEASE_TIMEOUT": LEASE}
            for label, backend in backends.items()
            for mode in ("json", "sse")
        }
        started: dict[str, LiveServer] = {}
        try:
            with ThreadPoolExecutor(len(specs)) as pool:
                futures = {  # this process's children: a test waits for B to stop (os.waitpid)
                    name: pool.submit(start_server, directory, overrides, name=name, forked=False, **env)
                    for name, overrides in specs.items()
                }
                for name, future in futures.items():
                    started[name] = future.result()
            create_superuser(started["db-json"])  # one database: the admin of every worker knows this user
            yield {
                label: Site(
                    backend=backend,
                    database=env["DATABASE_URL"],
                    prefix=env["MCP_TEST_REDIS_PREFIX"],
                    json_worker=started[f"{label}-json"],
                    sse_worker=started[f"{label}-sse"],
                    directory=directory,
                    env=env,
                )
                for label, backend in backends.items()
            }
        finally:
            with ThreadPoolExecutor(len(specs)) as pool:
                list(pool.map(LiveServer.stop, started.values()))


@pytest.fixture(params=["db", "cache"])
def site(request: pytest.FixtureRequest, sites: dict[str, Site]) -> Site:
    return sites[request.param]


@pytest.fixture(params=["json", "sse"])
def mode(request: pytest.FixtureRequest) -> str:
    """The response mode of worker A, which serves the request."""
    return str(request.param)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as client:
        yield client


# -- gates: the handler runs until the test says so -----------------------------------------------------


@dataclass
class Gates:
    """The test's side of ``race_gate``: Redis lists under the site's cache prefix."""

    redis: aioredis.Redis
    prefix: str
    made: list[str] = field(default_factory=list)
    opened: set[str] = field(default_factory=set)

    def key(self, kind: str, gate: str) -> str:
        return f"{self.prefix}:1:race:{kind}:{gate}"  # Django's cache key: KEY_PREFIX:VERSION:key

    def new(self) -> str:
        gate = secrets.token_hex(6)
        self.made.append(gate)
        return gate

    async def _pop(self, kind: str, gate: str) -> bytes:
        popped = await self.redis.blpop([self.key(kind, gate)], timeout=REPLY_WITHIN)
        if popped is None:
            pytest.fail(f"gate {gate}: no {kind!r} report within {REPLY_WITHIN}s")
        return bytes(popped[1])

    async def started(self, gate: str) -> dict[str, Any]:
        """Wait until the gated handler runs; its ``{"pid", "pk"}`` (worker process, ledger key: ``None``, the
        worker writing the record behind the request, see :func:`pending_pk`)."""
        report: dict[str, Any] = json.loads(await self._pop("started", gate))
        return report

    async def open(self, gate: str) -> None:
        self.opened.add(gate)
        await self.redis.rpush(self.key("gate", gate), "open")

    async def finished(self, gate: str) -> str:
        """Wait until the gated handler has returned; what it returned."""
        return (await self._pop("done", gate)).decode()

    async def written(self, gate: str) -> str:
        """Wait until a ``race_write`` handler's transaction has ended: ``committed`` or ``rolled back``."""
        return (await self._pop("written", gate)).decode()

    async def has_finished(self, gate: str) -> bool:
        return bool(await self.redis.llen(self.key("done", gate)))

    async def release_all(self) -> None:
        """Open every gate the test left closed, so that no worker thread waits for long after a failure."""
        for gate in self.made:
            if gate not in self.opened:
                await self.open(gate)


@pytest.fixture
async def gates(site: Site) -> AsyncIterator[Gates]:
    client = aioredis.Redis.from_url(REDIS_URL, socket_timeout=None)
    made = Gates(client, site.prefix)
    try:
        yield made
    finally:
        await made.release_all()
        await client.aclose()


def gated_call(gate: str, request_id: int | str, tool: str = "race_gate") -> dict[str, Any]:
    return rpc("tools/call", {"name": tool, "arguments": {"gate": gate}}, request_id)


def gate_answer(message: dict[str, Any]) -> tuple[int | str, str]:
    """``(id, text)`` of a ``race_gate`` answer (whatever extra members the revision's result has)."""
    assert set(message) == {"jsonrpc", "id", "result"}, message
    assert not message["result"].get("isError"), message
    [content] = message["result"]["content"]
    return message["id"], str(content["text"])


def gate_answers(response: httpx.Response) -> list[tuple[int | str, str]]:
    return [gate_answer(m) for m in messages_of(response)]


# -- the ledger, read directly ----------------------------------------------------------------------------


@dataclass
class Entry:
    state: str
    outcome: dict[str, Any] | None
    deadline: datetime | None
    settled_at: datetime | None
    channel: str
    """The channel of the worker that holds (held) the request."""


def cache_value(raw: bytes) -> Any:
    """A value as Django's Redis cache stores it: an int as digits, anything else pickled."""
    try:
        return int(raw)
    except ValueError:
        return pickle.loads(raw)  # written by our own workers, in this run's own namespace


async def ledger_entry(site: Site, pk: int) -> Entry:
    """The ledger's record ``pk``: a row in PostgreSQL, or the ``e:``/``s:`` keys in Redis."""
    if site.uses_database_ledger:
        async with await psycopg.AsyncConnection.connect(site.database, row_factory=dict_row) as db:
            cursor = await db.execute(
                "SELECT state, outcome, deadline, settled_at, channel"
                " FROM mcp_server_ledgerentry WHERE id = %s",
                (pk,),
            )
            row = await cursor.fetchone()
        assert row is not None, f"no ledger row {pk}"
        return Entry(**row)
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        stored, settled = await client.mget(
            [f"{site.prefix}:1:mcp:ledger:e:{pk}", f"{site.prefix}:1:mcp:ledger:s:{pk}"]
        )
    finally:
        await client.aclose()
    assert stored is not None, f"no ledger record {pk}"
    record = cache_value(stored)
    state = record["state"]
    if state == "pending" and settled is not None:
        state = cache_value(settled)
    return Entry(state, record["outcome"], record["deadline"], record["settled_at"], record["channel"])


async def pending_pk(site: Site, session_id: str, request_id: int | str) -> int:
    """The ledger key of the request's pending record, once its worker has written it.

    The worker writes it behind the request (``LEDGER_FLUSH_INTERVAL``): the handler runs before it exists,
    so the record is waited for. The request must stay pending meanwhile (its handler held by a gate).
    """
    found: list[int] = []

    async def written() -> bool:
        if site.uses_database_ledger:
            async with await psycopg.AsyncConnection.connect(site.database) as db:
                cursor = await db.execute(
                    "SELECT id FROM mcp_server_ledgerentry"
                    " WHERE session_id = %s AND request_key = %s AND state = 'pending'",
                    (session_id, request_key(request_id)),
                )
                row = await cursor.fetchone()
            pk = None if row is None else int(row[0])
        else:  # the request id's key, then the record itself (the writer adds the key first: a worker
            # killed between the two leaves the key and no record)
            client = aioredis.Redis.from_url(REDIS_URL)
            try:
                raw = await client.get(f"{site.prefix}:1:mcp:ledger:k:{session_id}:{request_key(request_id)}")
                pk = None if raw is None else int(cache_value(raw))
                if pk is not None and not await client.exists(f"{site.prefix}:1:mcp:ledger:e:{pk}"):
                    pk = None
            finally:
                await client.aclose()
        found[:] = [] if pk is None else [pk]
        return bool(found)

    await wait_for(written, f"the pending record of request {request_id!r}", within=REPLY_WITHIN)
    return found[0]


async def row_pk(site: Site, session_id: str, request_id: int | str) -> int:
    """The id of the request's one ledger row (database ledger), whatever its state."""
    async with await psycopg.AsyncConnection.connect(site.database) as db:
        cursor = await db.execute(
            "SELECT id FROM mcp_server_ledgerentry WHERE session_id = %s AND request_key = %s",
            (session_id, request_key(request_id)),
        )
        rows = await cursor.fetchall()
    assert len(rows) == 1, rows
    return int(rows[0][0])


async def settled_entry(site: Site, pk: int, within: float = REPLY_WITHIN) -> Entry:
    """The record ``pk`` once its settlement is written (behind the reply that settled it).

    Waits for ``settled_at``, not only the state: the cache ledger's compare-and-set key (the state) is
    written a moment before the record that carries the outcome.
    """

    async def settled() -> bool:
        entry = await ledger_entry(site, pk)
        return entry.state != "pending" and entry.settled_at is not None

    await wait_for(settled, f"the settlement of ledger record {pk} to be written", within=within)
    return await ledger_entry(site, pk)


def outcome_of(error: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if error is None else {"error": error}


async def ledger_drained(session: McpSession, b: LiveServer, of: str | None = None) -> None:
    """Wait until the ledger holds nothing pending of the session (or of session ``of``), asked of ``b``.

    Each worker writes its settlements behind its replies (``LEDGER_FLUSH_INTERVAL``): a request answered a
    moment ago may still have a pending record, written before it was answered.
    """

    async def drained() -> bool:
        return await session.ledger_pending(b, of=of) == []

    await wait_for(drained, "the ledger to record every settlement", within=REPLY_WITHIN)


async def stats_pending(session: McpSession, worker: LiveServer) -> list[int | str]:
    """Ids of the session that ``worker`` holds in its own memory (a later request it answered)."""
    probe = f"stats-{secrets.token_hex(3)}"
    return list((await session.call(worker, probe, "test/stats", {}))["pending"])


async def deadline_timer(session: McpSession, worker: LiveServer, gate: str) -> dict[str, bool]:
    """The timer of the gated handler's deadline in ``worker``, the process running it: whether it fired,
    whether it is still scheduled."""
    probe = f"deadline-{secrets.token_hex(3)}"
    return dict(await session.call(worker, probe, "test/deadline", {"gate": gate}))


# -- the competing actions, through worker B --------------------------------------------------------------


async def abort_page(b: LiveServer) -> tuple[httpx.AsyncClient, str]:
    """An admin signed in on B, on the live page: the client and the page's CSRF token."""
    admin = await admin_client(b.base)
    page = await admin.get("/admin/mcp_server/ledgerentry/live/")
    assert page.status_code == 200, page.text
    return admin, page.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]


async def abort_on(admin: httpx.AsyncClient, token: str, pk: int) -> dict[str, Any]:
    """The admin's abort endpoint (``aabort_requests`` runs in that worker's process); its report."""
    answer = await admin.post(ABORT_PATH, data={"pk": [str(pk)], "csrfmiddlewaretoken": token})
    assert answer.status_code == 200, answer.text
    report: dict[str, Any] = answer.json()
    return report


async def abort_through(b: LiveServer, pk: int) -> dict[str, Any]:
    """The admin's abort endpoint on B; its report."""
    admin, token = await abort_page(b)
    try:
        return await abort_on(admin, token, pk)
    finally:
        await admin.aclose()


async def compete(action: str, session: McpSession, b: LiveServer, request_id: int | str, pk: int) -> Any:
    """Settle the request through B (the deadline needs nothing: A's own timer settles it)."""
    if action == "cancel":
        await session.cancel(b, request_id)
    elif action == "delete":
        await session.delete(b)
    elif action == "abort":
        return await abort_through(b, pk)
    return None


def assert_framing(response: httpx.Response, mode: str) -> None:
    assert response.status_code == 200, response.text
    expected = "application/json" if mode == "json" else "text/event-stream"
    assert content_type(response) == expected, response.headers


def assert_winner_reply(response: httpx.Response, mode: str, action: str, request_id: int | str) -> None:
    """Exactly the winner's reply: a cancel has none (JSON: 202 and no body; SSE: a stream that closes)."""
    _state, error = WINNERS[action]
    if error is None:
        if mode == "json":
            assert (response.status_code, response.content) == (202, b""), response.text
        else:
            assert_framing(response, mode)
            assert messages_of(response) == []
        return
    assert_framing(response, mode)
    messages = messages_of(response)
    assert len(messages) == 1, messages
    assert messages[0]["id"] == request_id, messages
    assert {k: v for k, v in messages[0]["error"].items() if k != "data"} == error, messages
    if action == "deadline":
        assert messages[0]["error"]["data"] == {"timeout": DEADLINE}


async def author_exists(site: Site, name: str) -> bool:
    async with await psycopg.AsyncConnection.connect(site.database) as db:
        cursor = await db.execute("SELECT 1 FROM catalogue_author WHERE name = %s", (name,))
        return await cursor.fetchone() is not None


async def start_write(
    action: str, claim: str, site: Site, http: httpx.AsyncClient, gates: Gates
) -> tuple[LiveServer, McpSession, str, asyncio.Future[httpx.Response]]:
    """Worker A (SSE) takes a ``race_write`` (``claim`` ``late`` or ``early``; with a deadline for the
    ``deadline`` action) as request 1 of a new session: B, the session, the gate, the POST on its way."""
    a, b = site.pair("sse")
    session = await open_session(http, a)
    gate = gates.new()
    tool = "race_write_deadline" if action == "deadline" else "race_write"
    arguments = {"gate": gate, "name": f"Author written through {gate}", "claim": claim}
    call = asyncio.ensure_future(
        session.post(a, rpc("tools/call", {"name": tool, "arguments": arguments}, 1))
    )
    return b, session, gate, call


# -- order 1: the competing settlement wins while the handler runs ----------------------------------------

ACTIONS = ["cancel", "delete", "abort", "deadline"]


@pytest.mark.parametrize("action", ACTIONS)
async def test_winner_first_then_the_handler_finishes(
    action: str, site: Site, mode: str, http: httpx.AsyncClient, gates: Gates
) -> None:
    a, b = site.pair(mode)
    session = await open_session(http, a)
    gate = gates.new()
    tool = "race_gate_deadline" if action == "deadline" else "race_gate"
    call = asyncio.ensure_future(session.post(a, gated_call(gate, 1, tool)))
    started = await gates.started(gate)
    assert started["pid"] == a.process.pid
    pk = await pending_pk(site, session.id, 1)

    report = await compete(action, session, b, 1, pk)
    response = await asyncio.wait_for(call, REPLY_WITHIN)
    assert not await gates.has_finished(gate), "the reply must not wait for the handler"
    assert_winner_reply(response, mode, action, 1)
    state, error = WINNERS[action]
    decided = await settled_entry(site, pk)
    assert (decided.state, decided.outcome) == (state, outcome_of(error))
    if action == "abort":
        assert report == {"aborted": [pk], "skipped": []}

    # The handler ends after the winner; A then answers a later request: nothing else happened in between.
    await gates.open(gate)
    assert await gates.finished(gate) == f"gate {gate} opened"
    if action == "delete":
        observer = await open_session(http, a)
        await ledger_drained(observer, b, of=session.id)
    else:
        assert await stats_pending(session, a) == []
        await ledger_drained(session, b)
        assert await session.call(b, 1, "test/echo", {"again": True}) == {"params": {"again": True}}
    assert await ledger_entry(site, pk) == decided


@pytest.mark.parametrize("action", ["cancel", "abort", "deadline"])
async def test_winner_first_while_the_exchange_stays_open(
    action: str, site: Site, mode: str, http: httpx.AsyncClient, gates: Gates
) -> None:
    """A batch keeps A's POST open after the winner (a second gated request): the victim's late result
    would show on it, and A must drop the victim from its memory as soon as the winner is decided."""
    a, b = site.pair(mode)
    session = await open_session(http, a, version=BATCH_VERSION)
    victim, companion = gates.new(), gates.new()
    tool = "race_gate_deadline" if action == "deadline" else "race_gate"
    batch = [gated_call(victim, "v", tool), gated_call(companion, "c")]
    call = asyncio.ensure_future(session.post(a, batch))
    assert (await gates.started(victim))["pid"] == a.process.pid
    assert (await gates.started(companion))["pid"] == a.process.pid
    pk = await pending_pk(site, session.id, "v")

    await compete(action, session, b, "v", pk)

    async def victim_dropped() -> bool:  # A's memory is in A's process: poll it through later requests
        return await stats_pending(session, a) == ["c"]

    await wait_for(victim_dropped, "worker A to settle the victim", within=REPLY_WITHIN)
    state, error = WINNERS[action]
    decided = await settled_entry(site, pk)
    assert (decided.state, decided.outcome) == (state, outcome_of(error))

    await gates.open(victim)
    assert await gates.finished(victim) == f"gate {victim} opened"
    assert await stats_pending(session, a) == ["c"]  # a later request on A, answered after the victim ended
    assert not call.done()
    await gates.open(companion)
    response = await asyncio.wait_for(call, REPLY_WITHIN)

    assert_framing(response, mode)
    messages = sorted(messages_of(response), key=lambda m: str(m["id"]))
    if error is not None:
        assert messages[-1]["id"] == "v", messages
        victim_error = {k: v for k, v in messages[-1]["error"].items() if k != "data"}
        assert victim_error == error, messages
        messages = messages[:-1]
    assert [gate_answer(m) for m in messages] == [("c", f"gate {companion} opened")]
    assert await ledger_entry(site, pk) == decided
    await ledger_drained(session, b)


# -- order 2: the handler's answer first, then the competing action ---------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
async def test_answer_first_then_the_competing_action_changes_nothing(
    action: str, site: Site, mode: str, http: httpx.AsyncClient, gates: Gates
) -> None:
    a, b = site.pair(mode)
    session = await open_session(http, a)
    gate = gates.new()
    tool = "race_gate_deadline" if action == "deadline" else "race_gate"
    call = asyncio.ensure_future(session.post(a, gated_call(gate, 1, tool)))
    assert (await gates.started(gate))["pid"] == a.process.pid
    pk = await pending_pk(site, session.id, 1)
    await gates.open(gate)
    response = await asyncio.wait_for(call, REPLY_WITHIN)
    assert_framing(response, mode)
    assert gate_answers(response) == [(1, f"gate {gate} opened")]
    answered = await settled_entry(site, pk)
    assert (answered.state, answered.outcome) == ("answered", {"result": True})

    report = await compete(action, session, b, 1, pk)
    if action == "abort":
        assert report == {"aborted": [], "skipped": [pk]}
    if action == "deadline":  # the competing "action" is the deadline itself: the answer disarmed its timer
        assert await deadline_timer(session, a, gate) == {"expired": False, "armed": False}

    # A answers a later request (B's action, if it told A anything, was handled by then); nothing changed.
    if action == "delete":
        observer = await open_session(http, a)
        assert await ledger_entry(site, pk) == answered
        await ledger_drained(observer, b, of=session.id)
        for worker in (a, b):
            assert (await session.post(worker, rpc("ping", None, 2))).status_code == 404
    else:
        assert await stats_pending(session, a) == []
        assert await ledger_entry(site, pk) == answered
        await ledger_drained(session, b)


# -- worker death ------------------------------------------------------------------------------------------


@pytest.fixture
def doomed(site: Site, mode: str) -> Iterator[LiveServer]:
    """A worker of the site of its own, to be killed (in response mode ``mode``)."""
    overrides = {"RESPONSE_MODE": mode, "LEDGER_BACKEND": site.backend, "LEASE_TIMEOUT": LEASE}
    server = start_server(site.directory, overrides, name=f"doomed-{secrets.token_hex(3)}", **site.env)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("mode", ["json"], indirect=True)
async def test_worker_death_settles_what_is_pending_and_never_what_was_answered(
    site: Site, doomed: LiveServer, http: httpx.AsyncClient, gates: Gates
) -> None:
    """A answers X, then dies with Y running: a survivor closes Y with -32000 and leaves X ``answered``.

    X was opened before Y, and a survivor settles a dead worker's requests oldest first in one pass: once
    Y is closed, X has been looked at too."""
    a, b = doomed, site.sse_worker
    session = await open_session(http, b)
    answered_gate, running_gate = gates.new(), gates.new()
    first = asyncio.ensure_future(session.post(a, gated_call(answered_gate, "x")))
    assert (await gates.started(answered_gate))["pid"] == a.process.pid
    x = await pending_pk(site, session.id, "x")
    await gates.open(answered_gate)
    response = await asyncio.wait_for(first, REPLY_WITHIN)
    assert gate_answers(response) == [("x", f"gate {answered_gate} opened")]
    answered = await settled_entry(site, x)  # written before A dies
    assert answered.state == "answered"

    second = asyncio.ensure_future(session.post(a, gated_call(running_gate, "y")))
    started = await gates.started(running_gate)
    assert started["pid"] == a.process.pid
    y = await pending_pk(site, session.id, "y")  # written before A dies
    a.process.send_signal(signal.SIGKILL)
    await asyncio.to_thread(a.process.wait, 10)
    with pytest.raises(httpx.TransportError):
        await asyncio.wait_for(second, REPLY_WITHIN)

    closed = await settled_entry(site, y, within=10 * LEASE)  # by a survivor
    assert (closed.state, closed.outcome) == ("closed", {"error": {"code": -32000, "message": DEAD_WORKER}})
    assert await ledger_entry(site, x) == answered
    await ledger_drained(session, b)


# -- B's message is held up; A's handler answers first ------------------------------------------------------

DELAYED = [
    pytest.param("db", "cancel", id="db-cancel"),
    pytest.param("db", "delete", id="db-delete"),
    pytest.param("db", "abort", id="db-abort"),
    pytest.param("cache", "cancel", id="cache-cancel"),
    pytest.param("cache", "delete", id="cache-delete"),
]
"""Where B can be held: a cancel reads the session (B has not seen it yet), a DELETE ends the session row,
an abort reads the ledger record (a row only with the database ledger: a Redis read cannot be held)."""


async def b_waits_on_the_lock(site: Site, locker_pid: int, statement: str, *needles: str) -> bool:
    """Whether a backend other than ``locker_pid`` waits on a lock while running ``statement`` ... with
    each of ``needles`` in its text (Django binds parameters client-side: the values are in the text)."""
    async with await psycopg.AsyncConnection.connect(site.database, autocommit=True) as db:
        cursor = await db.execute(
            "SELECT query FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> %s",
            (locker_pid,),
        )
        queries = [str(row[0]) for row in await cursor.fetchall()]
    return any(q.startswith(statement) and all(n in q for n in needles) for q in queries)


async def fence(site: Site, channel: str) -> None:
    """Return once the worker whose channel is ``channel`` has acted on every message sent to it before.

    An operator's abort of an id nobody holds, with a reply channel, from this process over the site's
    Redis channel layer: the worker answers it after the messages before it (its channel is first in,
    first out, by the time each was sent).
    """
    layer = RedisChannelLayer(hosts=[{"address": REDIS_URL, "socket_timeout": None}], prefix=site.prefix)
    try:
        reply_to = await layer.new_channel()
        key = f"fence-{secrets.token_hex(4)}"
        await layer.send(channel, to_event(AbortRequest(session_id="fence", key=key, reply_to=reply_to)))
        answer = parse_event(await asyncio.wait_for(layer.receive(reply_to), REPLY_WITHIN))
        assert answer == AbortResult(session_id="fence", key=key, aborted=False), answer
    finally:
        await layer.close_pools()


@pytest.mark.parametrize(("label", "action"), DELAYED)
async def test_a_settlement_message_held_up_past_the_answer_changes_nothing(
    label: str, action: str, sites: dict[str, Site], http: httpx.AsyncClient
) -> None:
    """B has received the client's cancel or DELETE, or an operator's abort, but its message to A is held up:
    A's handler answers first, and the client gets that answer, once; B's message, when it comes, changes
    nothing.

    The test holds a lock in PostgreSQL where B must pass before it tells A (the session B reads for the
    cancel, the session row B ends for the DELETE, the ledger row B reads for the abort), waits until B's
    query waits on it, stops B (SIGSTOP) and releases the lock: B's query completes in the database (the
    DELETE's session is ended there) while B itself can send nothing. A's handler then finishes; B resumes."""
    site = sites[label]
    a, b = site.pair("json")
    client = aioredis.Redis.from_url(REDIS_URL, socket_timeout=None)
    gates = Gates(client, site.prefix)
    session = await open_session(http, a)
    gate = gates.new()
    call = asyncio.ensure_future(session.post(a, gated_call(gate, 1)))
    stopped = False
    competing: asyncio.Future[Any] | None = None
    admin: httpx.AsyncClient | None = None
    try:
        assert (await gates.started(gate))["pid"] == a.process.pid
        pk = await pending_pk(site, session.id, 1)
        channel = (await ledger_entry(site, pk)).channel
        if action == "abort":  # signed in before the lock: only the abort itself waits on it
            admin, token = await abort_page(b)
        async with await psycopg.AsyncConnection.connect(site.database) as locker:
            if action == "cancel":  # B has not read this session yet: it must, to take the cancel
                await locker.execute("LOCK TABLE mcp_server_session IN ACCESS EXCLUSIVE MODE")
                held: tuple[str, ...] = ("SELECT", '"mcp_server_session"', session.id)
            elif action == "delete":  # B reads the session, then must end its row
                await locker.execute(
                    "SELECT id FROM mcp_server_session WHERE id = %s FOR UPDATE", (session.id,)
                )
                held = ('UPDATE "mcp_server_session"', session.id)
            else:  # B must read the ledger record it aborts
                await locker.execute("LOCK TABLE mcp_server_ledgerentry IN ACCESS EXCLUSIVE MODE")
                held = ("SELECT", f'"mcp_server_ledgerentry"."id" = {pk}')
            row = await (await locker.execute("SELECT pg_backend_pid()")).fetchone()
            assert row is not None
            locker_pid = int(row[0])
            if admin is not None:
                competing = asyncio.ensure_future(abort_on(admin, token, pk))
            else:
                competing = asyncio.ensure_future(compete(action, session, b, 1, pk))

            async def b_waits() -> bool:
                return await b_waits_on_the_lock(site, locker_pid, *held)

            # B's request reaches the lock through its HTTP server, consumer and ORM thread: on a loaded
            # machine (CI runs two pytest processes on two cores) that took over 10 s once
            await wait_for(b_waits, f"worker B's {action} to wait on the lock", within=3 * REPLY_WITHIN)
            os.kill(b.process.pid, signal.SIGSTOP)
            stopped = True
            _pid, status = await asyncio.to_thread(os.waitpid, b.process.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status)  # B is stopped before its query can return to it
            await locker.rollback()

        if action == "delete":  # B's UPDATE completes in the database while B is stopped

            async def ended() -> bool:
                async with await psycopg.AsyncConnection.connect(site.database) as db:
                    cursor = await db.execute(
                        "SELECT ended_at IS NOT NULL FROM mcp_server_session WHERE id = %s", (session.id,)
                    )
                    row = await cursor.fetchone()
                return row is not None and bool(row[0])

            await wait_for(ended, "B's UPDATE to end the session while B is stopped")
        await gates.open(gate)
        response = await asyncio.wait_for(call, REPLY_WITHIN)
        assert await gates.finished(gate) == f"gate {gate} opened"
        assert_framing(response, "json")
        assert gate_answers(response) == [(1, f"gate {gate} opened")]  # the handler's answer, once
        answered = await settled_entry(site, pk)
        assert (answered.state, answered.outcome) == ("answered", {"result": True})
        assert not competing.done()
    finally:
        if stopped:
            os.kill(b.process.pid, signal.SIGCONT)
        await gates.release_all()
        await client.aclose()
    assert competing is not None
    try:
        report = await asyncio.wait_for(competing, 2 * REPLY_WITHIN)
    finally:
        if admin is not None:
            await admin.aclose()
    if action == "abort":
        assert report == {"aborted": [], "skipped": [pk]}  # A no longer held it
    await fence(site, channel)  # B's message has reached A, and A has acted on it
    assert await ledger_entry(site, pk) == answered
    if action == "delete":  # A dropped the session B ended
        assert (await session.post(a, rpc("ping", None, 2))).status_code == 404
    else:
        assert await stats_pending(session, a) == []
    if action == "cancel":
        # A cancel for an id nobody holds is remembered (it may have overtaken its request, I9): per the MCP
        # specification an id is not reused in a session, so a request with id 1 now is taken for the
        # cancelled one, late: settled without running, and answered with nothing (JSON: 202).
        reused = await session.post(a, rpc("test/echo", {"reused": True}, 1))
        assert (reused.status_code, reused.content) == (202, b""), reused.text


# -- the same id on two workers ----------------------------------------------------------------------------


async def test_a_pending_id_is_refused_on_another_worker_and_free_once_settled(
    site: Site, mode: str, http: httpx.AsyncClient, gates: Gates
) -> None:
    """B's memory does not know an id pending at A; B writes its records behind its requests, so the ledger
    refuses B's record at B's next batch, and B answers -32600 then (a duplicate that finished before that
    batch would have been answered: the refusal needs a request still pending, here a gated one)."""
    a, b = site.pair(mode)
    session = await open_session(http, a)
    gate, duplicate_gate = gates.new(), gates.new()
    call = asyncio.ensure_future(session.post(a, gated_call(gate, 41)))
    assert (await gates.started(gate))["pid"] == a.process.pid
    held_pk = await pending_pk(site, session.id, 41)
    assert await session.ledger_pending(b) == [41]
    assert 41 not in await stats_pending(session, b)  # B's memory does not know it: the ledger must refuse

    duplicate = await session.post(b, gated_call(duplicate_gate, 41))
    refusal = {"code": -32600, "message": "Request id 41 is already in flight in this session"}
    assert messages_of(duplicate) == [{"jsonrpc": "2.0", "id": 41, "error": refusal}]
    assert (await gates.started(duplicate_gate))["pid"] == b.process.pid  # it ran until the refusal
    await gates.open(duplicate_gate)
    assert await gates.finished(duplicate_gate) == f"gate {duplicate_gate} opened"
    assert await session.ledger_pending(b) == [41]
    assert not call.done()

    await gates.open(gate)
    response = await asyncio.wait_for(call, REPLY_WITHIN)
    assert gate_answers(response) == [(41, f"gate {gate} opened")]
    # Settled, and recorded (A writes it behind its answer: until then another worker's batch would find the
    # id pending in the ledger): the id is free again, on either worker.
    await settled_entry(site, held_pk)
    assert await session.call(b, 41, "test/echo", {"on": "b"}) == {"params": {"on": "b"}}
    assert await session.call(a, 41, "test/echo", {"on": "a"}) == {"params": {"on": "a"}}

    await ledger_drained(session, b)
    if site.uses_database_ledger:
        outcomes: list[Any] = []

        async def all_written() -> bool:  # four records: A's, B's refused one, and the two echoes
            async with await psycopg.AsyncConnection.connect(site.database) as db:
                cursor = await db.execute(
                    "SELECT state, outcome FROM mcp_server_ledgerentry"
                    " WHERE session_id = %s AND request_key = %s ORDER BY id",
                    (session.id, request_key(41)),
                )
                outcomes[:] = await cursor.fetchall()
            return len(outcomes) == 4 and all(state != "pending" for state, _ in outcomes)

        await wait_for(all_written, "every record of id 41, settled")
        assert sorted(state for state, _ in outcomes) == ["answered"] * 4
        assert sorted(json.dumps(outcome, sort_keys=True) for _, outcome in outcomes) == sorted(
            json.dumps(o, sort_keys=True) for o in [{"error": refusal}, *[{"result": True}] * 3]
        )


# -- writes: a request's settlement and its handler's transaction agree (Context.claim_answer) ---------------


@pytest.mark.parametrize("action", ACTIONS)
async def test_a_write_whose_request_ended_before_its_claim_rolls_back(
    action: str, site: Site, http: httpx.AsyncClient, gates: Gates
) -> None:
    b, session, gate, call = await start_write(action, "late", site, http, gates)
    await gates.started(gate)
    pk = await pending_pk(site, session.id, 1)
    await compete(action, session, b, 1, pk)
    assert_winner_reply(await asyncio.wait_for(call, REPLY_WITHIN), "sse", action, 1)

    await gates.open(gate)
    assert await gates.written(gate) == "rolled back"
    assert not await author_exists(site, f"Author written through {gate}")
    state, error = WINNERS[action]
    decided = await settled_entry(site, pk)
    assert (decided.state, decided.outcome) == (state, outcome_of(error))


@pytest.mark.parametrize("action", ACTIONS)
async def test_a_write_that_claimed_its_answer_commits_and_is_recorded_answered(
    action: str, site: Site, http: httpx.AsyncClient, gates: Gates
) -> None:
    b, session, gate, call = await start_write(action, "early", site, http, gates)
    assert await gates.written(gate) == "committed"
    started = await gates.started(gate)  # the handler runs on after its commit, until the gate opens
    assert await author_exists(site, f"Author written through {gate}")
    if site.uses_database_ledger:  # its record was written answered in the write's own transaction
        # (claimed while the record's batch was in flight, the handler's transaction wrote a copy of the
        # record: the handler then reads no pk on its own, and the row is found by its request)
        pk = started["pk"] or await row_pk(site, session.id, 1)
        assert (await ledger_entry(site, pk)).state == "answered"
    else:
        pk = await pending_pk(site, session.id, 1)
    if action == "deadline":  # disarmed by the claim: its timer is off A's loop, though the handler runs on
        assert await deadline_timer(session, site.pair("sse")[0], gate) == {"expired": False, "armed": False}
    else:
        await compete(action, session, b, 1, pk)
    assert not call.done()

    await gates.open(gate)
    response = await asyncio.wait_for(call, REPLY_WITHIN)
    assert_framing(response, "sse")
    answers = messages_of(response)
    if action == "delete":  # the session's streams are closed with it; the answer went nowhere
        assert all("error" not in m for m in answers), answers
    else:
        assert gate_answers(response) == [(1, f"gate {gate} opened")]
    decided = await settled_entry(site, pk)
    assert (decided.state, decided.outcome) == ("answered", {"result": True})
