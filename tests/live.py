"""Real servers for the tests: Daphne processes on 127.0.0.1, each with its own SQLite file and settings."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


PORTS_PER_PROCESS = 2000
"""Each pytest process (xdist's ``gw0``, ``gw1``…) draws its servers' ports from a range of its own, below the
kernel's ephemeral range (32768 and up): a port the kernel handed to one process, then freed for its server
to bind, could otherwise be handed to the other process's server in between, and a test would talk to the
wrong server (seen once: "Unknown tool" from another test's site)."""


def free_port() -> int:
    """A port nobody listens on right now, from this pytest process's own range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = 20000 + (int(worker) % 6 if worker.isdigit() else 0) * PORTS_PER_PROCESS
    for _attempt in range(200):
        port = first + secrets.randbelow(PORTS_PER_PROCESS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{first + PORTS_PER_PROCESS - 1}")


def stop_process(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process outlives ``grace`` seconds."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Block until the server accepts connections (or fail with its log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"server on port {port} did not start in {timeout}s")


@dataclass
class LiveServer:
    """A running Daphne serving the test site."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str] = field(repr=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"{self.base}/mcp"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop_process(self.process)


def base_env(database_path: Path, overrides: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"sqlite:///{database_path}",
        MCP_TEST_OVERRIDES=json.dumps(overrides or {}),
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def manage_py_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``manage.py check --fail-level WARNING`` of the demo site in a process of its own, with ``env``."""
    command = [sys.executable, "manage.py", "check", "--fail-level", "WARNING"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def migrated_template(directory: Path) -> Path:
    """A migrated SQLite file, made once and copied for each server."""
    template = directory / "template.sqlite3"
    if not template.exists():
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=base_env(template), check=True
        )
    return template


def start_server(
    directory: Path, overrides: dict[str, Any] | None = None, *, name: str = "server", **env: str
) -> LiveServer:
    """Start Daphne with ``MCP_SERVER`` overrides; returns once it accepts connections."""
    directory.mkdir(parents=True, exist_ok=True)
    database = directory / f"{name}.sqlite3"
    if "DATABASE_URL" not in env:
        shutil.copy(migrated_template(directory), database)
    full_env = base_env(database, overrides, **env)
    port = free_port()
    log_path = directory / f"{name}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "project.asgi:application"],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(port=port, process=process, log_path=log_path, env=full_env)
    try:
        wait_for_port(port, process)
    except Exception:
        server.stop()
        raise RuntimeError(f"server failed to start:\n{server.log()}") from None
    return server


# -- real services for the multi-process tests (Redis, PostgreSQL) --------------------------------------

POSTGRES_URL = os.environ.get("MCP_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
"""The PostgreSQL server (no database name): each test session creates its own database there."""

REDIS_URL = os.environ.get("MCP_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
"""Redis DB 15 is reserved for the tests; each test session keeps its keys under its own prefix."""


def services_problem() -> str | None:
    """Why Redis or PostgreSQL cannot be used right now, or ``None`` when both answer."""
    import psycopg
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        return f"Redis at {REDIS_URL} is unreachable ({exc}); run scripts/services"
    try:
        with psycopg.connect(f"{POSTGRES_URL}/postgres", connect_timeout=2):
            pass
    except Exception as exc:
        return f"PostgreSQL at {POSTGRES_URL} is unreachable ({exc}); run scripts/services"
    return None


def require_services() -> None:
    """Skip the test when Redis or PostgreSQL cannot be used; under ``CI`` fail it (.ci/run installs them)."""
    import pytest

    problem = services_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and a service is missing: {problem}")
        pytest.skip(problem)


@contextmanager
def shared_site() -> Iterator[dict[str, str]]:
    """The environment of workers of one site on a fresh PostgreSQL database and a Redis namespace of its
    own (sessions and ledger in PostgreSQL; channel layer and cache on Redis). Skips (under CI: fails)
    without them."""
    require_services()
    with postgres_database() as database, redis_namespace() as prefix:
        yield {"DATABASE_URL": database, "REDIS_URL": REDIS_URL, "MCP_TEST_REDIS_PREFIX": prefix}


@contextmanager
def two_workers(directory: Path) -> Iterator[tuple[LiveServer, LiveServer, str]]:
    """Worker A (JSON responses) and worker B (SSE) of one site on PostgreSQL + Redis (:func:`shared_site`),
    and the site's database URL; both stopped afterwards."""
    with shared_site() as env:
        a = start_server(directory, {"RESPONSE_MODE": "json"}, name="a", **env)
        try:
            b = start_server(directory, {"RESPONSE_MODE": "sse"}, name="b", **env)
            try:
                yield a, b, env["DATABASE_URL"]
            finally:
                b.stop()
        finally:
            a.stop()


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, migrated database ``mcp_test_<random>``, dropped afterwards; yields its URL."""
    import psycopg
    from psycopg import sql

    name = f"mcp_test_{secrets.token_hex(4)}"
    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = f"{POSTGRES_URL}/{name}"
    try:
        env = base_env(Path(os.devnull), DATABASE_URL=url)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
        yield url
    finally:
        with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def redis_namespace() -> Iterator[str]:
    """A key prefix of this test session's own in the tests' Redis DB, emptied before and after use.

    Servers get it as ``MCP_TEST_REDIS_PREFIX`` (``tests/settings.py`` applies it to the channel layer and
    the cache), so concurrent test runs never see each other's keys.
    """
    import redis

    prefix = f"mcptest-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(REDIS_URL)

    def flush() -> None:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)

    flush()
    try:
        yield prefix
    finally:
        flush()
        client.close()
