"""Throwaway PostgreSQL and Redis servers for fault tests (I11), never the machine's own.

Each is started by the test on a free port, from the binaries installed on the machine, with its data in a
temporary directory, and removed afterwards. A test can pause one (``SIGSTOP``: a store that stops answering
while its sockets stay open), resume it, kill it or restart it on the same port. Other tests running at the
same time use the machine's PostgreSQL on 5432 and Redis on 6379: stopping those would fail them.

Without the binaries a test skips; under ``CI`` it fails (as :func:`tests.support.live.require_services`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.live import ROOT, base_env, free_port, stop_process, wait_for_port

__all__ = [
    "PostgresServer",
    "RedisServer",
    "StoreServer",
    "require_binary",
    "throwaway_postgres",
    "throwaway_redis",
]

POSTGRES_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "60",
    "shared_buffers": "16MB",
}
"""A small, fast, throwaway cluster: nothing in it needs to survive a crash of the machine."""


def require_binary(name: str, *candidates: str) -> str:
    """The path of ``name`` (on ``PATH`` or at one of ``candidates``); skips the test without it, and under
    ``CI`` fails it."""
    import pytest

    for candidate in (shutil.which(name), *candidates):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    problem = f"{name} is not installed (needed to start a throwaway store)"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and a binary is missing: {problem}")
    pytest.skip(problem)


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


@dataclass
class StoreServer:
    """A store process this test started: its port, and the signals a fault test sends it."""

    name: str
    port: int
    command: list[str]
    directory: Path
    user: str | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name}.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> None:
        """Start (or start again, on the same port and data) and wait until it accepts connections."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, user=self.user, cwd=self.directory
            )
        try:
            wait_for_port(self.port, self.process)
        except Exception:
            self.stop()
            raise RuntimeError(f"{self.name} did not start:\n{self.log()}") from None

    def pids(self) -> list[int]:
        """Every process of the server (a pause must stop them all)."""
        assert self.process is not None
        return [self.process.pid, *_children(self.process.pid)]

    def pause(self) -> None:
        """``SIGSTOP``: the server stops answering; its sockets stay open (the kernel still accepts)."""
        for pid in self.pids():  # the parent first: it forks no new process while stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """``SIGCONT``: the server goes on where it stopped."""
        for pid in reversed(self.pids()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Paused for the ``with`` block (resumed whatever happens in it)."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def kill(self) -> None:
        """``SIGKILL``: gone at once, connections refused from now on."""
        assert self.process is not None
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            self.resume()
            stop_process(self.process)


@dataclass
class PostgresServer(StoreServer):
    """A throwaway PostgreSQL cluster (user ``postgres``, trust authentication, on 127.0.0.1)."""

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start, and wait until it accepts queries (the port opens before start-up and recovery end)."""
        super().start()
        _wait_until_accepting(self)

    def stop(self) -> None:
        if self.process is not None:
            self.resume()
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)  # fast shutdown: clients are disconnected
            stop_process(self.process)

    def restart(self) -> None:
        """A fast shutdown, then a start on the same data and port: every connection breaks."""
        self.stop()
        self.start()

    def create_database(self, name: str, *, migrate: bool = True) -> str:
        """Create database ``name`` (migrated for the test site); returns its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=10) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = self.url(name)
        if migrate:
            env = base_env(Path(os.devnull), DATABASE_URL=url)
            subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        return url


@dataclass
class RedisServer(StoreServer):
    """A throwaway Redis without persistence."""

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def restart(self) -> None:
        """Start again on the same port after :meth:`kill` or :meth:`stop` (empty: nothing is saved)."""
        if self.process is not None and self.process.poll() is None:
            self.stop()
        self.start()


def _postgres_bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    initdb = require_binary("initdb", *(str(p) for p in reversed(found)))
    return Path(initdb).resolve().parent


def _owned_directory(prefix: str, user: str | None) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    if user is not None:
        record = pwd.getpwnam(user)
        os.chown(directory, record.pw_uid, record.pw_gid)
    return directory


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL cluster of the test's own, started on a free port and removed afterwards.

    initdb refuses to run as root: as root the cluster runs as the ``postgres`` system user.
    """
    bindir = _postgres_bindir()
    user: str | None = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            _missing("a 'postgres' system user to run PostgreSQL as (initdb refuses root)")
    directory = _owned_directory("mcp-pg-", user)
    data = directory / "data"
    try:
        init = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
        subprocess.run(
            [*init, "--no-sync", "--no-instructions"],
            check=True,
            user=user,
            capture_output=True,
            cwd=directory,
        )
        port = free_port()
        command = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(directory)]
        for key, value in POSTGRES_SETTINGS.items():
            command += ["-c", f"{key}={value}"]
        server = PostgresServer("postgres", port, command, directory, user=user)
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _wait_until_accepting(server: PostgresServer, within: float = 30.0) -> None:
    """The port opens before the cluster accepts queries (recovery, start-up): wait for a real connection."""
    import psycopg

    deadline = time.monotonic() + within
    while True:
        try:
            with psycopg.connect(server.url(), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not accept connections:\n{server.log()}") from None
            time.sleep(0.05)


@contextlib.contextmanager
def throwaway_redis() -> Iterator[RedisServer]:
    """A Redis of the test's own (``--save '' --appendonly no``), on a free port, removed afterwards."""
    binary = require_binary("redis-server")
    directory = Path(tempfile.mkdtemp(prefix="mcp-redis-"))
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(directory)]
    server = RedisServer("redis", port, command, directory)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _missing(problem: str) -> Any:
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"CI is set and this is missing: {problem}")
    pytest.skip(problem)
