"""``manage.py mcp_stdio`` as a real subprocess: the official client's stdio transport, and raw pipes for
what a well-behaved client never does (malformed lines, closing stdin with a request in flight, SIGTERM).

No sleeps: every wait is for a line the server writes (a message on stdout, a log line on stderr), or for
its exit, under a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.live import REDIS_URL as TEST_REDIS_URL
from tests.support.live import (
    ROOT,
    redis_namespace,
    require_services,
)
from tests.support.raw import rpc
from tests.support.stdio import (
    COMMAND,
    INITIALIZE,
    LEDGERS,
    TIMEOUT,
    RawStdio,
    database,
    rows,
    spawn,
    start,
    stdio_env,
    template,
)
from tests.support.wait import wait_for

__all__ = ["database", "start", "template"]  # the fixtures this module borrows from tests.support.stdio


def call(request_id: int, tool: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": tool, "arguments": arguments}, request_id)


# -- the official client --------------------------------------------------------------------------------


def official(database: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=[*COMMAND, *args], cwd=ROOT, env=stdio_env(database)
    )


async def test_official_client_lists_and_calls_tools(database: Path, tmp_path: Path) -> None:
    errlog_path = tmp_path / "stderr.txt"
    with errlog_path.open("w") as errlog:
        async with Client(stdio_client(official(database), errlog=errlog), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo", "stdio_noisy", "search_books", "slow"} <= names
            assert "stdio_staff_only" not in names  # anonymous
            echoed = await client.call_tool("echo", {"text": "héllo ✓\nnext line"})
            assert echoed.content[0].text == "héllo ✓\nnext line"
            books = await client.call_tool("search_books", {"query": "Calvino"})
            assert len(books.structured_content["result"]) == 2
            noisy_result = await client.call_tool("stdio_noisy", {"text": "psst"})
            assert not noisy_result.is_error

            # A sync handler blocks a thread, not the reader: echo is answered while it runs.
            async with anyio.create_task_group() as group:
                blocked = anyio.Event()

                async def block() -> None:
                    await client.call_tool("blocking_sleep", {"seconds": 3})
                    blocked.set()

                group.start_soon(block)
                assert (await client.call_tool("echo", {"text": "meanwhile"})).content[0].text == "meanwhile"
                assert not blocked.is_set()

    stderr = errlog_path.read_text()
    for line in ("print: psst", "sys.__stdout__: psst", "fd 1: psst", "logged: psst"):
        assert line in stderr  # the official client parsed stdout without a stray line, or this would fail
    [(transport, client_name, end_reason)] = rows(
        database, "select transport, client_name, end_reason from mcp_server_session"
    )
    assert (transport, end_reason) == ("stdio", "stdin closed")
    assert client_name
    ledger = rows(database, "select method, name, state from mcp_server_ledgerentry")
    assert ("tools/call", "echo", "answered") in ledger
    assert ("initialize", "", "answered") in ledger
    assert not [row for row in ledger if row[2] == "pending"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: 2026-07-28, cancelled all the same
async def test_official_client_cancel_stops_the_handler(database: Path, mode: str) -> None:
    async with Client(official(database), mode=mode) as client:
        in_flight = anyio.Event()

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            in_flight.set()

        async with anyio.create_task_group() as group:

            async def wait() -> None:
                await client.call_tool("stdio_wait_for_cancel", {}, progress_callback=progress)

            group.start_soon(wait)
            with anyio.fail_after(TIMEOUT):
                await in_flight.wait()
            group.cancel_scope.cancel()  # the client sends notifications/cancelled
        left = await client.call_tool("stdio_pending", {})
        assert left.structured_content == {"result": []}
    assert rows(
        database, "select state from mcp_server_ledgerentry where name = 'stdio_wait_for_cancel'"
    ) == [("cancelled",)]


async def test_official_client_speaks_2026_over_stdio(database: Path) -> None:
    """The client's probe is answered without initialize: the connection is 2026-07-28, with no session."""
    async with Client(official(database)) as client:
        assert client.protocol_version == "2026-07-28"
        assert "echo" in {tool.name for tool in (await client.list_tools()).tools}
        assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
        prompt = await client.get_prompt("summarize_book", {"pk": "3"})
        assert "Invisible Cities" in prompt.messages[0].content.text
    ledger = rows(database, "select method, state, session_id from mcp_server_ledgerentry")
    assert ("server/discover", "answered", None) in ledger
    assert ("tools/call", "answered", None) in ledger
    assert "initialize" not in {row[0] for row in ledger}
    assert rows(database, "select id from mcp_server_session") == []


async def test_elicitation_travels_over_stdio(database: Path) -> None:
    from mcp.client.context import ClientRequestContext
    from mcp_types import ElicitRequestParams, ElicitResult

    async def elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    async with Client(official(database), elicitation_callback=elicit, mode="legacy") as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert "ada@example.com" in result.content[0].text


# -- raw pipes ------------------------------------------------------------------------------------------


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def test_a_2026_connection_validates_each_request_and_refuses_initialize(start: Any) -> None:
    raw: RawStdio = await start()
    discover = await raw.request(rpc("server/discover", {"_meta": MODERN_META}, 1))
    assert discover["result"]["supportedVersions"] == ["2026-07-28"]
    assert discover["result"]["resultType"] == "complete"
    missing = await raw.request(rpc("tools/list", {"_meta": {}}, 2))
    assert missing["error"]["code"] == -32602
    old = {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    version = await raw.request(rpc("tools/list", {"_meta": old}, 3))
    assert version["error"]["data"] == {"supported": ["2026-07-28"], "requested": "1900-01-01"}
    gone = await raw.request(rpc("ping", {"_meta": MODERN_META}, 4))
    assert gone["error"]["code"] == -32601
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}
    refused = await raw.request(rpc("initialize", init, 5))
    assert refused["error"]["code"] == -32022
    assert "2026-07-28" in refused["error"]["data"]["supported"]
    assert await raw.finish() == 0


async def test_a_handshake_connection_refuses_the_2026_envelope(start: Any) -> None:
    raw: RawStdio = await start()
    await raw.initialize()
    refused = await raw.request(rpc("tools/list", {"_meta": MODERN_META}, 9))
    assert refused["error"]["code"] == -32600
    assert await raw.finish() == 0


async def test_malformed_lines_are_answered_and_the_loop_goes_on(start: Any) -> None:
    raw: RawStdio = await start()
    await raw.initialize()
    for bad in (b"this is not json\n", b'{"jsonrpc": "2.0", "id": 5, "method": "ping"\n', b"\xff\xfe{}\n"):
        await raw.send(bad)
        answer = await raw.receive()
        assert answer["id"] is None
        assert answer["error"]["code"] == -32700
    await raw.send(b"\n   \n")  # blank lines are skipped, not answered
    invalid = await raw.request({"jsonrpc": "2.0", "id": 6, "method": 6})
    assert invalid["error"]["code"] == -32600
    await raw.send(json.dumps([rpc("ping", None, 7)]).encode() + b"\n")
    batch = await raw.receive()
    assert batch["error"]["code"] == -32600
    assert await raw.request(rpc("ping", None, 8)) == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert await raw.finish() == 0
    assert len(raw.lines) == 7  # initialize, three parse errors, -32600, batch error, ping: nothing else


async def test_user_code_writing_to_stdout_reaches_stderr(start: Any) -> None:
    raw: RawStdio = await start()
    await raw.initialize()
    noisy = await raw.request(call(1, "stdio_noisy", text="psst"))
    assert noisy["result"]["content"] == [{"type": "text", "text": "psst"}]
    assert await raw.finish() == 0
    # Only the two answers (initialize, the tool): what the tool wrote to stdout went to stderr.
    assert len(raw.lines) == 2
    stderr = raw.stderr()
    assert all(f"{way}: psst" in stderr for way in ("print", "sys.__stdout__", "fd 1", "logged"))


async def test_requests_before_initialize_are_refused(start: Any) -> None:
    raw: RawStdio = await start()
    assert (await raw.request(rpc("ping", None, 1)))["result"] == {}
    assert (await raw.request(rpc("tools/list", None, 2)))["error"]["code"] == -32600
    await raw.initialize()
    assert "tools" in (await raw.request(rpc("tools/list", None, 3)))["result"]
    again = await raw.request(rpc("initialize", INITIALIZE, 4))
    assert again["error"]["code"] == -32600
    assert await raw.finish() == 0


async def test_end_of_stdin_answers_a_slow_request_minus_32000(start: Any, database: Path) -> None:
    raw: RawStdio = await start(overrides={"SHUTDOWN_GRACE": 0.5})
    await raw.initialize()
    await raw.send(call(2, "slow", seconds=600))
    pending = await raw.request(call(3, "stdio_pending"))
    assert pending["result"]["structuredContent"] == {"result": ["2"]}
    started = time.monotonic()
    assert await raw.finish() == 0
    assert time.monotonic() - started < TIMEOUT
    [closed] = [m for m in raw.messages if m.get("id") == 2]
    assert closed["error"] == {"code": -32000, "message": "Connection closed: stdin closed"}
    assert rows(database, "select state from mcp_server_ledgerentry where name = 'slow'") == [("closed",)]
    assert rows(database, "select end_reason from mcp_server_session") == [("stdin closed",)]


async def test_end_of_stdin_lets_a_request_finish_within_the_grace(start: Any) -> None:
    raw: RawStdio = await start(overrides={"SHUTDOWN_GRACE": 60})
    await raw.initialize()
    await raw.send(call(2, "slow", seconds=0.5))
    started = time.monotonic()
    assert await raw.finish() == 0
    assert time.monotonic() - started < 30  # it did not wait out the whole grace
    [answered] = [m for m in raw.messages if m.get("id") == 2]
    assert answered["result"]["content"] == [{"type": "text", "text": "slept 0.5"}]


async def test_a_blocked_sync_handler_does_not_hold_the_exit(start: Any) -> None:
    raw: RawStdio = await start(overrides={"SHUTDOWN_GRACE": 0.5})
    await raw.initialize()
    await raw.send(call(2, "blocking_sleep", seconds=600))
    assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == ["2"]
    assert await raw.finish() == 0  # within TIMEOUT, although the handler's thread sleeps on
    [closed] = [m for m in raw.messages if m.get("id") == 2]
    assert closed["error"]["code"] == -32000
    assert "exiting without them" in raw.stderr()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_settles_in_flight_requests_and_exits_zero(
    start: Any, database: Path, signum: signal.Signals
) -> None:
    raw: RawStdio = await start(overrides={"SHUTDOWN_GRACE": 0.5})
    await raw.initialize()
    await raw.send(call(2, "slow", seconds=600))
    assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == ["2"]
    raw.process.send_signal(signum)
    assert await raw.finish(close_stdin=False) == 0
    [closed] = raw.answers_to(2)
    assert closed["error"] == {"code": -32000, "message": "Connection closed: server shutting down"}
    assert rows(database, "select end_reason from mcp_server_session") == [("server shutting down",)]
    assert rows(database, "select state from mcp_server_ledgerentry where name = 'slow'") == [("closed",)]
    assert "Traceback" not in raw.stderr()  # SIGINT is no KeyboardInterrupt


@pytest.mark.parametrize(
    ("first", "second"),
    [(signal.SIGTERM, signal.SIGINT), (signal.SIGINT, signal.SIGTERM)],
    ids=["SIGTERM-then-SIGINT", "SIGINT-then-SIGTERM"],
)
async def test_a_second_signal_ends_the_grace_at_once(
    start: Any, database: Path, first: signal.Signals, second: signal.Signals
) -> None:
    """The docs: the first signal lets in-flight requests finish for up to SHUTDOWN_GRACE; a second one ends
    the grace period at once."""
    grace = 120.0
    raw: RawStdio = await start("--log-level", "info", overrides={"SHUTDOWN_GRACE": grace})
    await raw.initialize()
    await raw.send(call(2, "slow", seconds=600))
    assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == ["2"]
    raw.process.send_signal(first)
    # The grace period has begun (the server logs it, and writes nothing on stdout until it ends). The count
    # may still include request 3, whose reply the client has read but whose writer has not yet returned.
    await raw.wait_stderr("server shutting down: waiting up to 120.0s for ")
    assert raw.answers_to(2) == []
    assert raw.process.returncode is None
    cut = time.monotonic()
    raw.process.send_signal(second)
    assert await raw.finish(close_stdin=False) == 0  # within TIMEOUT, a sixth of the grace
    assert time.monotonic() - cut < grace / 10
    [closed] = raw.answers_to(2)
    assert closed["error"] == {"code": -32000, "message": "Connection closed: server shutting down"}
    assert rows(database, "select state from mcp_server_ledgerentry where name = 'slow'") == [("closed",)]
    assert rows(database, "select end_reason from mcp_server_session") == [("server shutting down",)]


async def test_cancel_sends_nothing_for_that_id(start: Any, database: Path) -> None:
    raw: RawStdio = await start()
    await raw.initialize()
    await raw.send(call(2, "slow", seconds=600))
    await raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == []
    assert await raw.finish() == 0
    assert [m for m in raw.messages if m.get("id") == 2] == []  # not even at shutdown
    assert rows(database, "select state from mcp_server_ledgerentry where name = 'slow'") == [("cancelled",)]


async def test_a_request_settled_by_a_remembered_cancel_does_not_hold_the_end(
    start: Any, database: Path
) -> None:
    """I9 over stdio: the cancel comes first and is remembered; its request, when it comes, is settled on
    arrival. It must not stay in the loop's open set, where end of input would wait the whole grace for it."""
    grace = 60.0
    raw: RawStdio = await start(overrides={"SHUTDOWN_GRACE": grace})
    await raw.initialize()
    await raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
    await raw.send(call(2, "slow", seconds=600))
    assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == []
    cut = time.monotonic()
    assert await raw.finish() == 0
    assert time.monotonic() - cut < grace / 4  # it did not wait out the grace for a settled request
    assert raw.answers_to(2) == []
    assert rows(database, "select state from mcp_server_ledgerentry where name = 'slow'") == [("cancelled",)]


async def test_a_long_line_is_refused_and_the_next_one_served(start: Any) -> None:
    raw: RawStdio = await start(overrides={"MAX_REQUEST_BYTES": 1000})
    await raw.initialize()
    await raw.send(json.dumps(call(2, "echo", text="x" * 200_000)).encode() + b"\n")
    too_long = await raw.receive()
    assert too_long["error"]["code"] == -32600
    assert too_long["id"] is None
    assert (await raw.request(call(3, "echo", text="short")))["result"]["content"][0]["text"] == "short"
    assert await raw.finish() == 0


@pytest.mark.parametrize("ledger", sorted(LEDGERS))
async def test_a_duplicate_id_in_flight_is_refused_once_and_the_first_still_answers_once(
    start: Any, database: Path, ledger: str
) -> None:
    raw: RawStdio = await start(overrides={"LEDGER_BACKEND": LEDGERS[ledger]})
    await raw.initialize(capabilities={"elicitation": {}})
    await raw.send(call(2, "test_elicitation", message="Who are you?"))
    elicitation = await raw.receive()  # request 2 waits for the client's answer: it is in flight
    assert elicitation["method"] == "elicitation/create"

    await raw.send(call(2, "echo", text="same id"))
    await raw.request(rpc("ping", None, 3))  # the duplicate's line was acted on before this one
    [refused] = raw.answers_to(2)
    assert refused["error"]["code"] == -32600
    assert "already in flight" in refused["error"]["message"]

    accepted = {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}
    await raw.send({"jsonrpc": "2.0", "id": elicitation["id"], "result": accepted})
    first = await raw.response_to(2)
    assert "ada@example.com" in first["result"]["content"][0]["text"]

    reused = await raw.request(call(2, "echo", text="reused"))  # settled: the id is free again
    assert reused["result"]["content"] == [{"type": "text", "text": "reused"}]
    assert await raw.finish() == 0
    assert raw.answers_to(2) == [refused, first, reused]  # one reply each, nothing else for id 2
    if ledger == "database-ledger":
        states = rows(
            database, "select name, state from mcp_server_ledgerentry where request_key = 'i:2' order by id"
        )
        assert states == [("test_elicitation", "answered"), ("echo", "answered")]


async def test_the_last_line_without_a_newline_is_served(start: Any) -> None:
    raw: RawStdio = await start()
    await raw.initialize()
    await raw.send(json.dumps(call(2, "echo", text="no newline at the end")).encode())  # then end of input
    assert await raw.finish() == 0
    [answer] = raw.answers_to(2)
    assert answer["result"]["content"] == [{"type": "text", "text": "no newline at the end"}]


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


async def test_a_closed_output_stops_the_command_and_settles_its_requests(database: Path) -> None:
    """The client stops reading (closes its end of stdout) but leaves stdin open: the next write fails,
    the command winds down by itself (exit 0, one warning, no traceback) and nothing stays pending."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    try:
        raw = await spawn(stdio_env(database, {"SHUTDOWN_GRACE": 0.5}), stdout=write_fd)
    finally:
        os.close(write_fd)
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
    )
    raw.process.stdout = reader  # RawStdio reads the protocol from our end of the pipe
    try:
        await raw.initialize()
        await raw.send(call(2, "slow", seconds=600))
        assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == ["2"]
        transport.close()  # nobody reads stdout any more: the pipe's end is closed on a later loop turn

        async def fd_closed() -> bool:  # only the closed descriptor tells
            return not _fd_open(read_fd)

        await wait_for(fd_closed, within=TIMEOUT, every=0)
        await raw.send(rpc("ping", None, 4))  # its answer is the write that fails
        assert await asyncio.wait_for(raw.process.wait(), TIMEOUT) == 0  # stdin is still open
        await asyncio.wait_for(raw.stderr_task, TIMEOUT)
    finally:
        transport.close()
        await raw.stop()
    stderr = raw.stderr()
    assert stderr.count("the protocol output is gone") == 1, stderr
    assert "Traceback" not in stderr
    assert rows(database, "select count(*) from mcp_server_ledgerentry where state = 'pending'") == [(0,)]
    [(state, outcome)] = rows(
        database, "select state, outcome from mcp_server_ledgerentry where name = 'slow'"
    )
    assert state == "closed"
    assert json.loads(outcome)["error"] == {"code": -32000, "message": "Connection closed: stdout closed"}
    assert rows(database, "select end_reason from mcp_server_session") == [("stdout closed",)]


async def test_server_requests_and_notifications_go_out_on_stdout(start: Any) -> None:
    """Log messages (at the level the client set) and a server-to-client request (sampling) travel on
    stdout, before the response of the request that made them; the client's answer comes back on stdin."""
    raw: RawStdio = await start()
    await raw.initialize(capabilities={"sampling": {}})
    assert (await raw.request(rpc("logging/setLevel", {"level": "info"}, 1)))["result"] == {}
    await raw.send(call(2, "test_tool_with_logging"))
    logged = []
    while "method" in (message := await raw.receive()):
        assert message["method"] == "notifications/message"
        logged.append((message["params"]["level"], message["params"]["data"]))
    assert message["id"] == 2
    assert message["result"]["content"][0]["text"] == "Tool with logging executed successfully"
    assert logged == [
        ("info", "Tool execution started"),
        ("info", "Tool processing data"),
        ("info", "Tool execution completed"),
    ]
    assert (await raw.request(rpc("logging/setLevel", {"level": "warning"}, 3)))["result"] == {}
    quiet = len(raw.lines)
    await raw.request(call(4, "test_tool_with_logging"))
    assert len(raw.lines) == quiet + 1  # below the level: the response alone

    await raw.send(call(5, "test_sampling", prompt="What is 2 + 2?"))
    sampling = await raw.receive()
    assert sampling["method"] == "sampling/createMessage"
    assert sampling["params"]["messages"][0]["content"]["text"] == "What is 2 + 2?"
    sampled = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
    await raw.send({"jsonrpc": "2.0", "id": sampling["id"], "result": sampled})
    answer = await raw.response_to(5)
    assert answer["result"]["content"][0]["text"] == "LLM response: 4"
    assert await raw.finish() == 0


async def test_startup_output_goes_to_stderr_and_stdin_reads_as_empty(start: Any) -> None:
    """The docs: output still buffered when the command starts (Python not unbuffered) is moved to stderr;
    stdin is kept for the protocol and handlers reading fd 0 get end of file (/dev/null)."""
    raw: RawStdio = await start(
        "--server", "tests.support.stdio_noise.server", env={"PYTHONUNBUFFERED": None}
    )
    await raw.initialize()  # the first line on stdout is the protocol's: the print went elsewhere
    probe = await raw.request(call(1, "stdio_read_stdin"))
    assert probe["result"]["structuredContent"] == {"result": ""}
    assert (await raw.request(rpc("ping", None, 2)))["result"] == {}  # the protocol input is intact
    assert await raw.finish() == 0
    assert len(raw.lines) == 3
    assert "stdio_noise: printed while importing" in raw.stderr()


# -- options --------------------------------------------------------------------------------------------


async def tool_names(raw: RawStdio) -> set[str]:
    """Every page of ``tools/list`` (the test site has more tools than one page holds)."""
    await raw.initialize()
    names: set[str] = set()
    cursor: str | None = None
    for page in range(1, 20):
        result = (await raw.request(rpc("tools/list", {"cursor": cursor} if cursor else None, page)))[
            "result"
        ]
        names |= {tool["name"] for tool in result["tools"]}
        cursor = result.get("nextCursor")
        if not cursor:
            return names
    raise AssertionError("tools/list did not end within 20 pages")


@pytest.mark.parametrize("spec", ["other", "tests.stdioapp.mcp.other"])
async def test_server_option_picks_a_server_by_name_or_path(start: Any, spec: str) -> None:
    raw: RawStdio = await start("--server", spec)
    assert await tool_names(raw) == {"only_on_other"}
    assert await raw.finish() == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "no MCP server named 'nope' (known: "),
        ("tests.nowhere.server", "cannot import 'tests.nowhere.server'"),
        ("tests.stdioapp.mcp.logger", "'tests.stdioapp.mcp.logger' is a Logger, not an MCPServer"),
    ],
)
async def test_a_bad_server_option_is_an_error_on_stderr(start: Any, spec: str, message: str) -> None:
    raw: RawStdio = await start("--server", spec)
    assert await raw.finish() == 1
    assert raw.lines == []
    assert f"CommandError: {message}" in raw.stderr()


@pytest.fixture
def alice(database: Path) -> str:
    """A superuser in the test database."""
    create = "from django.contrib.auth.models import User; User.objects.create_superuser('alice', 'a@b.c')"
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", create],
        cwd=ROOT,
        env=stdio_env(database),
        check=True,
        capture_output=True,
    )
    return "alice"


async def test_user_option_applies_that_users_permissions(start: Any, database: Path, alice: str) -> None:
    raw: RawStdio = await start("--user", alice, "--log-level", "info")
    assert "stdio_staff_only" in await tool_names(raw)
    whoami = await raw.request(call(2, "stdio_whoami"))
    assert whoami["result"]["structuredContent"] == {"result": "alice"}
    assert await raw.finish() == 0
    assert "stdio session" in raw.stderr()  # --log-level info: the session's opening is logged, on stderr
    [(username,)] = rows(
        database, "select u.username from mcp_server_session s join auth_user u on u.id = s.user_id"
    )
    assert username == "alice"


async def test_without_a_user_it_refuses_to_serve_anonymously_when_anonymous_access_is_off(
    start: Any, alice: str
) -> None:
    """Anonymous access off: no --user is an error naming both ways out; --user or --allow-anonymous serve."""
    closed = {"ALLOW_ANONYMOUS": False}
    refused: RawStdio = await start(overrides=closed)
    assert await refused.finish() == 1
    assert refused.lines == []
    assert (
        "CommandError: MCP_SERVER['ALLOW_ANONYMOUS'] is False, so mcp_stdio will not serve anonymously: pass "
        "--user USERNAME (the user whose permissions apply to every request), or --allow-anonymous to serve "
        "anonymously anyway."
    ) in refused.stderr()
    assert "Traceback" not in refused.stderr()

    as_alice: RawStdio = await start("--user", alice, overrides=closed)
    assert "stdio_staff_only" in await tool_names(as_alice)
    whoami = await as_alice.request(call(2, "stdio_whoami"))
    assert whoami["result"]["structuredContent"] == {"result": "alice"}
    assert await as_alice.finish() == 0

    anonymous: RawStdio = await start("--allow-anonymous", overrides=closed)
    names = await tool_names(anonymous)
    assert "stdio_whoami" in names  # served...
    assert "stdio_staff_only" not in names  # ... as anonymous
    assert await anonymous.finish() == 0


async def test_unknown_user_is_an_error(start: Any) -> None:
    raw: RawStdio = await start("--user", "nobody")
    assert await raw.finish() == 1
    assert raw.lines == []
    assert "CommandError: no user named 'nobody'" in raw.stderr()


@pytest.fixture
def carol(database: Path) -> str:
    """An inactive user in the test database."""
    create = "from django.contrib.auth.models import User; User.objects.create_user('carol', is_active=False)"
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", create],
        cwd=ROOT,
        env=stdio_env(database),
        check=True,
        capture_output=True,
    )
    return "carol"


async def test_inactive_user_is_an_error(start: Any, carol: str) -> None:
    raw: RawStdio = await start("--user", carol)
    assert await raw.finish() == 1
    assert raw.lines == []
    assert "CommandError: user 'carol' is inactive" in raw.stderr()


# -- other processes ----------------------------------------------------------------------------------------

END_SESSION = """
from asgiref.sync import async_to_sync
from mcp_server.sessions import aend_session

async_to_sync(aend_session)({session!r}, "ended by an operator")
"""


async def test_without_a_shared_layer_the_stdio_process_alone_decides_its_requests(
    start: Any, database: Path
) -> None:
    """The docs: with the in-memory channel layer, a session ended in another process does not reach the stdio
    process; its request is answered by its handler, recorded so, and the process serves on."""
    raw: RawStdio = await start()
    await raw.initialize(capabilities={"elicitation": {}})
    await raw.send(call(2, "test_elicitation", message="Who are you?"))
    elicitation = await raw.receive()  # the handler waits for the answer
    [(session,)] = rows(database, "select id from mcp_server_session")
    operator = await asyncio.create_subprocess_exec(
        sys.executable,
        "manage.py",
        "shell",
        "-c",
        END_SESSION.format(session=session),
        cwd=ROOT,
        env=stdio_env(database),
    )
    assert await asyncio.wait_for(operator.wait(), TIMEOUT) == 0
    await raw.request(rpc("ping", None, 3))
    assert raw.answers_to(2) == []  # the signal did not cross processes: nothing was settled

    accepted = {"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}
    await raw.send({"jsonrpc": "2.0", "id": elicitation["id"], "result": accepted})
    answered = await raw.response_to(2)
    assert "result" in answered, answered
    served_on = await raw.request(call(4, "echo", text="still serving"))
    assert served_on["result"]["content"] == [{"type": "text", "text": "still serving"}]
    assert await raw.finish() == 0
    assert raw.answers_to(2) == [answered]
    assert rows(database, "select state from mcp_server_ledgerentry where request_key = 'i:2'") == [
        ("answered",)
    ]


# -- Redis channel layer ---------------------------------------------------------------

OPERATOR = """
from asgiref.sync import async_to_sync
from mcp_server.sessions import aend_session
from mcp_server.updates import anotify_list_changed

async_to_sync(anotify_list_changed)("tools")
async_to_sync(aend_session)({session!r}, "ended by an operator")
"""


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    require_services()
    with redis_namespace() as prefix:
        yield prefix


async def test_another_process_reaches_the_stdio_session(database: Path, redis_prefix: str) -> None:
    """A notification and the session's end, decided in another process, arrive over the channel layer."""
    env = {**stdio_env(database), "REDIS_URL": TEST_REDIS_URL, "MCP_TEST_REDIS_PREFIX": redis_prefix}
    raw = await spawn(env)
    try:
        await raw.initialize()
        await raw.send(call(2, "slow", seconds=600))
        assert (await raw.request(call(3, "stdio_pending")))["result"]["structuredContent"]["result"] == ["2"]
        [(session,)] = rows(database, "select id from mcp_server_session")
        operator = await asyncio.create_subprocess_exec(
            sys.executable, "manage.py", "shell", "-c", OPERATOR.format(session=session), cwd=ROOT, env=env
        )
        assert await asyncio.wait_for(operator.wait(), TIMEOUT) == 0
        assert await raw.finish(close_stdin=False) == 0  # the session ended: the server stops by itself
    finally:
        await raw.stop()
    assert {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"} in raw.messages
    [closed] = [m for m in raw.messages if m.get("id") == 2]
    assert closed["error"] == {"code": -32000, "message": "Connection closed: ended by an operator"}
