"""Real servers for the tests: Daphne processes on 127.0.0.1, each with its own SQLite file and settings."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.forked import popen

ROOT = Path(__file__).resolve().parents[2]


PORTS_PER_PROCESS = 2000
"""Each pytest process (xdist's ``gw0``, ``gw1``…) draws its servers' ports from a range of its own, below the
kernel's ephemeral range (32768 and up): a port the kernel handed to one process, then freed for its server
to bind, could otherwise be handed to the other process's server in between, and a test would talk to the
wrong server (seen once: "Unknown tool" from another test's site)."""


_HANDED_OUT: set[int] = set()
"""Ports this pytest process has already handed out: the cluster fixtures start several servers at once from
threads, and two draws between one bind-and-close and the server's own bind could otherwise return the same
port; the second server then fails to bind while the first one answers for both (seen once in CI: a
request sent to "the other worker" reached the same one)."""
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A port nobody listens on right now, from this pytest process's own range, never handed out twice."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = 20000 + (int(worker) % 6 if worker.isdigit() else 0) * PORTS_PER_PROCESS
    with _HANDED_OUT_LOCK:
        for _attempt in range(200):
            port = first + secrets.randbelow(PORTS_PER_PROCESS)
            if port in _HANDED_OUT:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
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


# -- manage.py shell -c, without paying the start-up each time --------------------------------------------


class ShellRunner:
    """A ``python -m tests.support.shell_runner`` for one environment: runs ``manage.py shell -c`` snippets,
    one at a time, each in a fresh fork of a process that has set Django up
    (``tests/support/shell_runner.py``)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.lock = threading.Lock()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (the runner's own stderr: why it died, if it did)
        self.process = popen(
            [sys.executable, "-m", "tests.support.shell_runner"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,  # its process group: a timeout kills the snippet's fork too
        )

    def run(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """``manage.py <args>`` in a fresh fork, as ``subprocess.run(..., capture_output=True, text=True)``
        returns it."""
        from tests.support.shell_runner import HEADER

        assert self.process.stdin is not None
        assert self.process.stdout is not None
        code = " ".join(args)
        payload = json.dumps(list(args)).encode()
        with self.lock:
            try:
                self.process.stdin.write(HEADER.pack(len(payload)) + payload)
                self.process.stdin.flush()
            except BrokenPipeError:
                raise RuntimeError(f"the shell runner died:\n{self.stderr()}") from None
            reply = self.read(HEADER.size, timeout, code)
            (length,) = HEADER.unpack(reply)
            done = json.loads(self.read(length, timeout, code))
        return subprocess.CompletedProcess(
            ["manage.py", *args], done["returncode"], done["stdout"], done["stderr"]
        )

    def read(self, size: int, timeout: float, code: str) -> bytes:
        """Exactly ``size`` bytes of the reply, within ``timeout`` seconds (else the runner is killed)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        data = b""
        while len(data) < size:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.close()
                raise subprocess.TimeoutExpired(f"manage.py {code}", timeout)
            chunk = os.read(fd, size - len(data))
            if not chunk:
                self.process.wait()
                raise RuntimeError(f"the shell runner died ({self.process.returncode}):\n{self.stderr()}")
            data += chunk
        return data

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """End the runner (and a snippet still running: the whole process group)."""
        if self.process.poll() is None:
            if self.process.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    self.process.stdin.close()  # end of input: the runner returns
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


class ShellPool:
    """The runners of the session, one per distinct environment; the least recently used are ended beyond
    :attr:`size` (an environment of a test's own, such as its own database file, needs its runner no more
    after the test)."""

    size = 4

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runners: OrderedDict[tuple[tuple[str, str], ...], ShellRunner] = OrderedDict()

    def runner(self, env: Mapping[str, str]) -> ShellRunner:
        key = tuple(sorted(env.items()))
        ended: list[ShellRunner] = []
        with self.lock:
            runner = self.runners.pop(key, None)
            if runner is None or not runner.alive():
                if runner is not None:
                    ended.append(runner)
                runner = ShellRunner(env)
            self.runners[key] = runner
            while len(self.runners) > self.size:
                ended.append(self.runners.popitem(last=False)[1])
        for old in ended:
            old.close()
        return runner

    def close(self) -> None:
        with self.lock:
            runners = list(self.runners.values())
            self.runners.clear()
        for runner in runners:
            runner.close()


SHELLS = ShellPool()
"""Closed at the end of the session (``tests/conftest.py``)."""


def run_shell(
    env: Mapping[str, str], code: str, *, check: bool = True, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``manage.py shell -c code`` with ``env``, as ``subprocess.run(..., capture_output=True, text=True)``
    would return it, without a process start-up each time: the snippet runs in a fresh fork of a runner kept
    for ``env`` (:class:`ShellRunner`), its output captured, its database connections closed afterwards.

    With ``check`` (the default) a snippet that fails (an exception: exit code 1 and its traceback) fails the
    call with its stderr.
    """
    done = SHELLS.runner(env).run(["shell", "-c", code], timeout)
    if check:
        assert done.returncode == 0, f"manage.py shell -c failed ({done.returncode}):\n{done.stderr}"
    return done


def run_manage(
    env: Mapping[str, str], *args: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``manage.py <args>`` with ``env`` as :func:`run_shell` runs a snippet: Django's own command line
    (``execute_from_command_line``, what ``manage.py`` calls) in a fresh fork of the runner kept for ``env``;
    never raises on a non-zero exit code."""
    return SHELLS.runner(env).run(args, timeout)


MIGRATION_SET = ("DJANGO_SETTINGS_MODULE", "MCP_DEMO_OAUTH")
"""What of a server's environment decides its migrations, so its database: the settings module and the demo's
authorization server (which adds DOT's apps). The rest (``MCP_TEST_OVERRIDES``: ``MCP_SERVER``; the stores'
URLs; ``MCP_TEST_SQLITE_OPTIONS``) leaves ``INSTALLED_APPS`` and so the migrations as they are."""

_templates_lock = threading.Lock()
MigrationSet = tuple[tuple[str, str | None], ...]
_sqlite_templates: dict[MigrationSet, Path] = {}
_postgres_templates: dict[MigrationSet, str] = {}
_templates_dir: Path | None = None


def migration_set(**env: str) -> MigrationSet:
    """What of :data:`MIGRATION_SET` a server started with ``env`` has (``None``: unset)."""
    full = base_env(Path(os.devnull), **env)
    return tuple((name, full.get(name)) for name in MIGRATION_SET)


def migrate(key: MigrationSet, database_url: str) -> None:
    """``manage.py migrate -v0`` of the database at ``database_url`` for migration set ``key``."""
    env = base_env(Path(os.devnull), DATABASE_URL=database_url)
    for name, value in key:
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    command = [sys.executable, "manage.py", "migrate", "-v0"]
    with popen(command, cwd=ROOT, env=env) as process:
        if process.wait() != 0:
            raise subprocess.CalledProcessError(process.returncode, command)


def migrated_template(directory: Path, **env: str) -> Path:
    """A migrated SQLite file in ``directory`` for servers with ``env`` (only :data:`MIGRATION_SET` matters),
    for them to copy: a copy of this pytest process's template of that migration set, migrated once."""
    key = migration_set(**env)
    copy = directory / f"template-{'-'.join(str(v) for _, v in key).replace('.', '_')}.sqlite3"
    if not copy.exists():
        partial = directory / f".{copy.name}.{secrets.token_hex(4)}"
        shutil.copy(session_template(key), partial)
        os.replace(partial, copy)  # whole, even with servers started in parallel in ``directory``
    return copy


def session_template(key: MigrationSet) -> Path:
    """This pytest process's migrated SQLite file of migration set ``key`` (made at the first call)."""
    global _templates_dir
    with _templates_lock:
        if key not in _sqlite_templates:
            if _templates_dir is None:
                _templates_dir = Path(tempfile.mkdtemp(prefix="mcp-test-templates-"))
                atexit.register(shutil.rmtree, _templates_dir, True)  # outside pytest too
            template = _templates_dir / f"{len(_sqlite_templates)}.sqlite3"
            migrate(key, f"sqlite:///{template}")
            _sqlite_templates[key] = template
        return _sqlite_templates[key]


def postgres_template(key: MigrationSet) -> str:
    """This pytest process's migrated PostgreSQL database of migration set ``key``, which nobody may connect
    to: the template of :func:`postgres_database` (made at the first call, dropped by
    :func:`drop_templates`)."""
    import psycopg
    from psycopg import sql

    with _templates_lock:
        if key not in _postgres_templates:
            name = f"mcp_template_{secrets.token_hex(4)}"
            with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            try:
                migrate(key, f"{POSTGRES_URL}/{name}")
                with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
                    # No connection from now on: CREATE DATABASE ... TEMPLATE needs none open to it.
                    allow = sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false")
                    admin.execute(allow.format(sql.Identifier(name)))
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
                    )
            except BaseException:
                with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
                    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                    admin.execute(drop.format(sql.Identifier(name)))
                raise
            _postgres_templates[key] = name
        return _postgres_templates[key]


def drop_templates() -> None:
    """Remove this pytest process's templates (at the end of the session, ``tests/conftest.py``)."""
    global _templates_dir
    with _templates_lock:
        if _postgres_templates:
            import psycopg
            from psycopg import sql

            with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
                for name in _postgres_templates.values():
                    admin.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                    )
            _postgres_templates.clear()
        if _templates_dir is not None:
            shutil.rmtree(_templates_dir, ignore_errors=True)
            _templates_dir = None
            _sqlite_templates.clear()


DAPHNE = ("daphne", "-b", "127.0.0.1", "-p", "{port}", "project.asgi:application")
"""How :func:`start_server` runs the site (``python -m`` these, ``{port}`` filled in)."""


def start_server(
    directory: Path,
    overrides: dict[str, Any] | None = None,
    *,
    name: str = "server",
    forked: bool = True,
    **env: str,
) -> LiveServer:
    """Start Daphne with ``MCP_SERVER`` overrides; returns once it accepts connections. In the test session
    it is forked from the forkserver (``tests.support.forkserver``) unless ``forked`` is false (a test that
    needs the server to be this process's child, for ``os.waitpid``)."""
    return start_command(directory, DAPHNE, overrides, name=name, env=env, forked=forked)


def start_command(
    directory: Path,
    command: tuple[str, ...],
    overrides: dict[str, Any] | None = None,
    *,
    name: str = "server",
    env: dict[str, str],
    forked: bool = True,
) -> LiveServer:
    """Start the test site with ``python -m <command>`` (``{port}`` filled in, e.g. :data:`DAPHNE`), with
    ``MCP_SERVER`` overrides and ``env``; returns once it accepts connections."""
    directory.mkdir(parents=True, exist_ok=True)
    database = directory / f"{name}.sqlite3"
    if "DATABASE_URL" not in env:
        shutil.copy(migrated_template(directory, **env), database)
    full_env = base_env(database, overrides, **env)
    port = free_port()
    log_path = directory / f"{name}-{port}.log"
    with log_path.open("wb") as log:
        process = popen(
            [sys.executable, "-m", *(part.format(port=port) for part in command)],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            forked=forked,
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
def shared_site(**env: str) -> Iterator[dict[str, str]]:
    """The environment of workers of one site on a fresh PostgreSQL database and a Redis namespace of its
    own (sessions and ledger in PostgreSQL; channel layer and cache on Redis). Skips (under CI: fails)
    without them. ``env``: the workers' (the database is migrated for it, :data:`MIGRATION_SET`)."""
    require_services()
    with postgres_database(**env) as database, redis_namespace() as prefix:
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
def postgres_database(**env: str) -> Iterator[str]:
    """A fresh database ``mcp_test_<random>`` migrated for servers with ``env`` (:data:`MIGRATION_SET`), a
    copy of this pytest process's template (:func:`postgres_template`), dropped afterwards; yields its URL."""
    import psycopg
    from psycopg import sql

    template = postgres_template(migration_set(**env))
    name = f"mcp_test_{secrets.token_hex(4)}"
    with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template))
        )
    url = f"{POSTGRES_URL}/{name}"
    try:
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
