"""Property test of I10 against live servers: hypothesis throws hostile bodies (arbitrary JSON and bytes, and
JSON-RPC-like messages with hostile ids, methods and params, alone or in batches) at the HTTP endpoint in
every response mode and at ``manage.py mcp_stdio``.

Properties: HTTP answers 2xx or 4xx (never 5xx), with a body a strict client can read (UTF-8 JSON or SSE);
a 4xx only for a body that may be refused as a whole; otherwise every request whose id is acceptable gets
exactly one answer with its id, and no answer carries an id that was not sent. stdio answers every line that
carries a request, writes only UTF-8 JSON lines, and keeps going. After each example nothing of the session
is left pending in the ledger.
"""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.hostile import (
    FUZZ,
    Huge,
    acceptable_id,
    bodies,
    check_answers,
    deep_reader,  # noqa: F401 (an autouse fixture: reading the deep echoes)
    may_fail_to_parse,
    plainly_valid_request,
    read_http,
    render,
    single_messages,
    strict_json,
)
from tests.support.live import ROOT, LiveServer, migrated_template, shared_site, start_server
from tests.support.raw import open_session, rpc
from tests.support.stdio import COMMAND, INITIALIZE, stdio_env

BATCH_VERSION = "2025-03-26"
TIMEOUT = 20.0


# -- HTTP ----------------------------------------------------------------------------------------------------


def check_http(body: Any, response: httpx.Response) -> None:
    messages = read_http(response)
    if response.status_code >= 400:
        assert response.status_code == 400, response.text[:2000]
        [error] = messages
        code = error["error"]["code"]
        if code == -32700:
            assert may_fail_to_parse(body), error
        elif isinstance(body, list):  # a batch is refused whole only when empty or holding an initialize
            assert code == -32600, error
            assert not body or any(isinstance(e, dict) and e.get("method") == "initialize" for e in body), (
                error
            )
        else:
            assert code == -32600, error
            assert not plainly_valid_request(body), error
        return
    if plainly_valid_request(body):
        assert [m.get("id") for m in messages if "method" not in m] == [body["id"]], messages
    check_answers(body if isinstance(body, list) else [body], [m for m in messages if "method" not in m])


async def post_hostile(server: LiveServer, body: Any) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        session = await open_session(http, server.url, BATCH_VERSION)
        response = await http.post(session.url, content=render(body), headers=session.headers())
        check_http(body, response)
        probe = await session.post(rpc("test/ledger_pending", {}, "pending-probe"))
        [answer] = [m for m in read_http(probe) if m.get("id") == "pending-probe"]
        assert answer["result"]["pending"] == [], answer  # each request settled and recorded


@FUZZ
@given(body=bodies)
def test_http_answers_every_hostile_body(any_mode_server: LiveServer, body: Any) -> None:
    asyncio.run(post_hostile(any_mode_server, body))


@pytest.fixture(scope="module")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server on PostgreSQL (sessions, database ledger) with Redis (cache, channel layer)."""
    with shared_site() as env:
        server = start_server(tmp_path_factory.mktemp("fuzz-postgres"), {"RESPONSE_MODE": "auto"}, **env)
        try:
            yield server
        finally:
            server.stop()


@FUZZ
@given(body=bodies)
def test_http_answers_every_hostile_body_on_postgresql(postgres_server: LiveServer, body: Any) -> None:
    """PostgreSQL refuses what SQLite stores (NUL, lone surrogates, over-long values): the same properties."""
    asyncio.run(post_hostile(postgres_server, body))


@pytest.mark.parametrize("value", [Huge(), "\ud800"])
def test_an_echo_the_wire_cannot_carry_is_the_one_internal_error_allowed(
    any_mode_server: LiveServer, value: Any
) -> None:
    """``test/echo`` of ``1e400`` or of a lone surrogate: the handler's result is what JSON cannot carry,
    answered -32603 (``UNSENDABLE``), the one -32603 the oracle lets through; the fuzzers draw both."""
    asyncio.run(post_hostile(any_mode_server, rpc("test/echo", {"value": value}, 1)))


HOSTILE_CLIENT = {
    "name": "a\x00b",
    "version": "\ud800",
    "size": float("inf"),
    "\udc00": ["\x00", -float("inf")],
}
"""NUL, lone surrogates and numbers past every float (written ``1e400``: JSON, read as infinities)."""


def handshake_as_hostile_client(server: LiveServer) -> None:
    """``initialize`` with :data:`HOSTILE_CLIENT` as ``clientInfo`` and in ``capabilities``: a session."""
    params = {
        "protocolVersion": BATCH_VERSION,
        "capabilities": {"x": HOSTILE_CLIENT},
        "clientInfo": HOSTILE_CLIENT,
    }
    body = json.dumps(rpc("initialize", params, 0)).replace("Infinity", "1e400")

    async def handshake() -> None:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
            response = await http.post(server.url, content=body.encode(), headers=headers)
            [answer] = [m for m in read_http(response) if m.get("id") == 0]
            assert answer["result"]["protocolVersion"] == BATCH_VERSION, answer
            assert response.headers["mcp-session-id"]

    asyncio.run(handshake())


def test_a_client_described_in_what_no_column_holds_is_served(any_mode_server: LiveServer) -> None:
    handshake_as_hostile_client(any_mode_server)


def test_a_client_described_in_what_no_column_holds_is_served_on_postgresql(
    postgres_server: LiveServer,
) -> None:
    """PostgreSQL refused the session's row (its text and JSON hold no NUL, no lone surrogate, no
    infinity), and the client got -32603: stored as it can hold them now."""
    handshake_as_hostile_client(postgres_server)


# -- stdio ---------------------------------------------------------------------------------------------------


class Pipes:
    """``mcp_stdio`` on blocking pipes: one process for every example (each runs in an event loop of its
    own)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *COMMAND],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.sent = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self.lines.get(timeout=TIMEOUT)
        assert line.endswith(b"\n"), f"stdout ended: {line!r} (exit {self.process.poll()})"
        message = strict_json(line)
        assert isinstance(message, dict), message
        return message

    def sentinel(self) -> str:
        self.sent += 1
        request_id = f"sentinel-{self.sent}"
        self.send(json.dumps(rpc("ping", None, request_id)).encode())
        return request_id


@pytest.fixture(scope="module")
def pipes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipes]:
    directory = tmp_path_factory.mktemp("fuzz-stdio")
    database = directory / "db.sqlite3"
    shutil.copy(migrated_template(directory), database)
    started = Pipes(stdio_env(database))
    started.send(json.dumps(rpc("initialize", INITIALIZE, 0)).encode())
    assert "result" in started.receive()
    started.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
    yield started
    if started.process.poll() is None:
        started.process.kill()
        started.process.wait()


def expected_id(message: Any) -> tuple[bool, Any]:
    """``(True, id)`` when a line holding ``message`` must be answered with that id."""
    if isinstance(message, dict) and "method" in message and "id" in message and acceptable_id(message["id"]):
        return True, message["id"]
    return False, None


@FUZZ
@given(message=st.one_of(single_messages, st.binary(max_size=64).map(lambda b: b.replace(b"\n", b" "))))
def test_stdio_answers_every_line_that_carries_a_request(pipes: Pipes, message: Any) -> None:
    data = message if isinstance(message, bytes) else render(message)
    must_answer, request_id = expected_id(message) if not isinstance(message, bytes) else (False, None)
    pipes.send(data)
    sentinel = pipes.sentinel()
    answers: list[dict[str, Any]] = []
    sentinel_seen = False
    while not sentinel_seen or (must_answer and not answers):
        received = pipes.receive()
        if "method" in received:
            continue  # a notification the line's handler sent
        if received.get("id") == sentinel:
            sentinel_seen = True
            continue
        answers.append(received)
    assert len(answers) <= 1, answers  # one line, at most one answer
    if must_answer and may_fail_to_parse(message) and answers[0]["id"] is None:
        assert answers[0]["error"]["code"] == -32700, answers  # nested deeper than the parser goes
    elif must_answer:
        assert answers[0]["id"] == request_id, answers
    elif answers:
        assert "error" in answers[0], answers  # a line that is no request is answered only to refuse it
        assert answers[0]["id"] is None or (
            isinstance(message, dict) and answers[0]["id"] == message.get("id")
        )
    elif not isinstance(message, bytes) and data.strip() != b"":
        assert isinstance(message, dict), message  # only a notification or a response goes unanswered
        assert "id" not in message or "method" not in message, message


def test_stdio_ends_cleanly_after_the_fuzz(pipes: Pipes) -> None:
    """Runs after the fuzz on the same process: it still serves, nothing is pending, and it exits 0."""
    pipes.send(json.dumps(rpc("test/ledger_pending", {}, "probe")).encode())
    while (answer := pipes.receive()).get("id") != "probe":
        pass
    assert answer["result"]["pending"] == []
    assert pipes.process.stdin is not None
    pipes.process.stdin.close()
    assert pipes.process.wait(timeout=TIMEOUT) == 0
    while line := pipes.lines.get(timeout=TIMEOUT):
        strict_json(line)
