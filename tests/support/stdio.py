"""``manage.py mcp_stdio`` on raw pipes: its migrated database, the process spawned, its lines read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sqlite3
import sys
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.support import forked
from tests.support.forked import ForkedProcess
from tests.support.live import (
    ROOT,
    base_env,
    migrated_template,
)
from tests.support.raw import rpc

__all__ = [
    "COMMAND",
    "INITIALIZE",
    "LEDGERS",
    "RawStdio",
    "database",
    "rows",
    "spawn",
    "start",
    "stdio_env",
    "template",
]

TIMEOUT = 20.0


LEDGERS = {
    "database-ledger": "mcp_server.stores.ledger.database.DatabaseLedger",
    "cache-ledger": "mcp_server.stores.ledger.cache.CacheLedger",
}


COMMAND = ["manage.py", "mcp_stdio"]


INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "raw-stdio-tests", "version": "1.0"},
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("stdio"))


@pytest.fixture
def database(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "db.sqlite3"
    shutil.copy(template, copy)
    return copy


def stdio_env(database: Path, overrides: dict[str, Any] | None = None) -> dict[str, str]:
    return base_env(database, overrides, DJANGO_SETTINGS_MODULE="tests.stdio_settings")


def rows(database: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(database)) as db:
        return db.execute(sql).fetchall()


class RawStdio:
    """The server on raw pipes: write lines, read lines, and keep every line stdout carried.

    stderr is read as it comes (``wait_stderr`` waits for a log line: the event of a step that writes
    nothing on stdout, such as the start of the shutdown grace).
    """

    def __init__(self, process: asyncio.subprocess.Process | ForkedStdio) -> None:
        self.process = process
        self.lines: list[bytes] = []
        self._stderr = bytearray()
        self._stderr_grew = asyncio.Event()
        self._stderr_ended = False
        self.stderr_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self._stderr += chunk
            self._stderr_grew.set()
        self._stderr_ended = True
        self._stderr_grew.set()

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]

    def stderr(self) -> str:
        return self._stderr.decode(errors="replace")

    async def wait_stderr(self, text: str) -> None:
        """Wait until ``text`` appears on stderr (fail if stderr ends first, or after ``TIMEOUT``)."""
        async with asyncio.timeout(TIMEOUT):
            while True:
                self._stderr_grew.clear()  # before reading: a line written after the read still wakes us
                if text in self.stderr():
                    return
                assert not self._stderr_ended, f"stderr ended without {text!r}:\n{self.stderr()}"
                await self._stderr_grew.wait()

    async def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def receive(self) -> dict[str, Any]:
        """The next message on stdout; each must be one line of JSON."""
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), TIMEOUT)
        assert line.endswith(b"\n"), f"stdout ended: {line!r}\nstderr:\n{self.stderr()}"
        self.lines.append(line)
        message = json.loads(line)
        assert isinstance(message, dict)
        return message

    async def response_to(self, request_id: int | str) -> dict[str, Any]:
        """Read until the response to ``request_id`` (other messages on the way are kept in ``lines``)."""
        while True:
            received = await self.receive()
            if received.get("id") == request_id and "method" not in received:
                return received

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its response (other messages on the way are kept in ``lines``)."""
        await self.send(message)
        return await self.response_to(message["id"])

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> None:
        params = {**INITIALIZE, "capabilities": capabilities or {}}
        answer = await self.request(rpc("initialize", params, 0))
        assert answer["result"]["protocolVersion"] == "2025-11-25"
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def answers_to(self, request_id: int | str) -> list[dict[str, Any]]:
        """Every response to ``request_id`` that stdout carried so far, in order."""
        return [m for m in self.messages if m.get("id") == request_id and "method" not in m]

    async def finish(self, *, close_stdin: bool = True) -> int:
        """Close stdin (or not), read stdout and stderr to their end, and return the exit code."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        if close_stdin:
            self.process.stdin.close()
        async with asyncio.timeout(TIMEOUT):
            while line := await self.process.stdout.readline():
                self.lines.append(line)
            code = await self.process.wait()
            await self.stderr_task
        for line in self.lines:  # stdout carried protocol messages only, one per line
            assert line.endswith(b"\n")
            assert line.count(b"\n") == 1
            assert isinstance(json.loads(line), dict)
        return code

    async def stop(self) -> None:
        """Kill the process if it still runs, and stop reading its stderr."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stderr_task, TIMEOUT)


class ForkedStdio:
    """A ``mcp_stdio`` forked from the test session's forkserver (``tests.support.forked``), as the part of an
    :class:`asyncio.subprocess.Process` that :class:`RawStdio` and the tests use: its pipes as asyncio
    streams, ``pid``, ``returncode``, the signals and ``wait``. It starts in a fraction of the ~2.5 s of
    CPU a fresh interpreter pays for Django and the libraries."""

    def __init__(
        self,
        process: ForkedProcess,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader,
    ) -> None:
        self._process = process
        self.pid = process.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    def send_signal(self, sig: int) -> None:
        self._process.send_signal(sig)

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()

    async def wait(self) -> int:
        """Its exit code, once its wait status arrives (read on the loop: nothing blocks a thread)."""
        loop = asyncio.get_running_loop()
        while (fd := self._process.status_fd) is not None and self._process.poll() is None:
            ended: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _settle, ended)
            try:
                await ended
            finally:
                loop.remove_reader(fd)
        return self._process.wait()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _forked(env: dict[str, str], argv: list[str], stdout: Any) -> ForkedStdio | None:
    """``argv`` forked with asyncio streams on its pipes; ``None`` where it cannot be forked."""
    if not forked.can_fork(argv, env, ROOT):
        return None
    process = forked.popen(argv, cwd=ROOT, env=env, stdin=PIPE, stdout=stdout, stderr=PIPE)
    assert isinstance(process, ForkedProcess)
    loop = asyncio.get_running_loop()

    async def reader(pipe: Any) -> asyncio.StreamReader:
        stream = asyncio.StreamReader(loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream, loop=loop), pipe)
        return stream

    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), process.stdin
    )
    stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    out = await reader(process.stdout) if process.stdout is not None else None
    return ForkedStdio(process, stdin, out, await reader(process.stderr))


async def spawn(env: dict[str, str], *args: str, stdout: Any = PIPE) -> RawStdio:
    """``manage.py mcp_stdio`` with ``args`` on raw pipes (or stdout on ``stdout``), forked from the test
    session's forkserver when it can be."""
    argv = [sys.executable, *COMMAND, *args]
    if (process := await _forked(env, argv, stdout)) is not None:
        return RawStdio(process)
    started = await asyncio.create_subprocess_exec(
        *argv, cwd=ROOT, env=env, stdin=PIPE, stdout=stdout, stderr=PIPE
    )
    return RawStdio(started)


@pytest.fixture
async def start(database: Path) -> AsyncIterator[Any]:
    """Start ``mcp_stdio`` on raw pipes (killed at the end of the test if it is still running).

    ``env`` adds or, with ``None``, removes environment variables.
    """
    started: list[RawStdio] = []

    async def _start(
        *args: str, overrides: dict[str, Any] | None = None, env: dict[str, str | None] | None = None
    ) -> RawStdio:
        full_env = stdio_env(database, overrides)
        for name, value in (env or {}).items():
            if value is None:
                full_env.pop(name, None)
            else:
                full_env[name] = value
        started.append(await spawn(full_env, *args))
        return started[-1]

    yield _start
    for raw in started:
        await raw.stop()
