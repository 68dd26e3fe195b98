"""A Python that has imported the heavy, settings-free libraries once, forking the tests' own processes.

A live server, ``manage.py migrate`` and a shell runner (``tests.support.live``) each used to pay the
interpreter's start-up and some 1.3 s of CPU importing what does not depend on their settings (pydantic and
the MCP types, Twisted, psycopg, Redis, Django's models and admin...): over a run, about a fifth of the
suite's CPU on two cores. :func:`popen` asks this pytest process's forkserver instead (started at the first
call, ended with the session, ``tests/conftest.py``): it forks, and the child sets the environment, the
working directory and file descriptors 0-2 it was given, then runs ``-m module`` or ``script.py`` as the
interpreter runs its ``__main__`` (``runpy``) and exits as the interpreter does (its ``SystemExit`` or
traceback, ``atexit``, finalization). So the child is the process ``python -m daphne ...`` would be, its
settings read from its own environment, with those libraries already in ``sys.modules``.

Not forked (a plain :class:`subprocess.Popen`): when :data:`ENABLED` is off (``bench/`` and ``scripts/``
outside pytest), when a ``PYTHON*`` or ``COVERAGE_PROCESS_*`` variable (read at interpreter start-up) or
the working directory differs from the forkserver's, or with ``forked=False``: a forked process is the
forkserver's child, not this process's, so ``os.waitpid`` on it fails (its :class:`ForkedProcess` reads the
exit status the forkserver sends instead).

Run as ``python -m tests.support.forkserver FD`` from the project's root, ``FD`` one end of a Unix
``SOCK_SEQPACKET`` socket pair. Each request is a JSON object (``argv``, ``env``,
``cwd``, ``new_session``) with file descriptors 0-2 of the child attached; each reply the child's pid (JSON)
with the read end of a pipe attached, on which its wait status (4 bytes, big-endian) arrives when it ends.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]

ENABLED = False
"""Whether :func:`popen` forks (``tests/conftest.py`` turns it on for the test session)."""

PRELOAD = (
    "pydantic",
    "mcp_types.methods",
    "twisted.internet.tcp",
    "twisted.internet.asyncioreactor",  # the module only: Daphne installs the reactor in the child
    "twisted.internet.endpoints",
    "twisted.web.http",
    "autobahn.twisted.websocket",
    "psycopg",
    "redis.asyncio",
    "requests",
    "OpenSSL",
    "service_identity",
    "opentelemetry.trace",
    "sqlparse",
    "pygments",
    "click",
    "cbor2",
    "asgiref.sync",
    "dj_database_url",
    "django.db.models",
    "django.http",
    "django.urls",
    "django.template",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.postgres.fields",
    "django.core.management",
    "rest_framework.serializers",
)
"""Imported by the forkserver: what every test server imports anyway and no settings decide (none of them
reads Django's settings or the environment when imported; a server loads each of them itself)."""

STATUS = struct.Struct(">i")
MAX_REQUEST = 1 << 20


def startup_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What of ``env`` the interpreter reads when it starts (so a forked child cannot take it from its own
    environment): the ``PYTHON*`` and ``COVERAGE_PROCESS_*`` variables."""
    return {k: v for k, v in env.items() if k.startswith(("PYTHON", "COVERAGE_PROCESS_"))}


# -- the forkserver process ------------------------------------------------------------------------------


def std_stream(fd: int, unbuffered: bool) -> io.TextIOWrapper:
    """``sys.stdin``, ``stdout`` or ``stderr`` (``fd`` 0, 1, 2) as the interpreter makes them at start-up
    (``create_stdio``), with the forkserver's encoding and errors (its environment's, as the child's)."""
    writing = fd != 0
    model = (sys.__stdin__, sys.__stdout__, sys.__stderr__)[fd]
    assert model is not None
    raw = open(fd, "wb" if writing else "rb", buffering=0, closefd=False)  # noqa: SIM115
    raw.name = ("<stdin>", "<stdout>", "<stderr>")[fd]
    buffered = not (writing and unbuffered)
    buffer: Any = raw if not buffered else io.BufferedWriter(raw) if writing else io.BufferedReader(raw)
    return io.TextIOWrapper(
        buffer,
        encoding=model.encoding,
        errors=model.errors,
        newline="\n",
        line_buffering=writing and buffered and (fd == 2 or os.isatty(fd)),
        write_through=not buffered,
    )


def become(request: dict[str, Any], fds: list[int], known: list[int]) -> None:
    """In the forked child: the process the request describes (its descriptors, environment, directory)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in known:
        with contextlib.suppress(OSError):
            os.close(fd)
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    streams = [std_stream(fd, unbuffered) for fd in (0, 1, 2)]
    for name, stream in zip(("stdin", "stdout", "stderr"), streams, strict=True):
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def run(argv: list[str]) -> None:
    """``python <argv>`` from here on: ``-m module args`` or ``script.py args``, as ``__main__``."""
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]  # runpy puts the module's file in sys.argv[0]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


def serve(control: socket.socket) -> list[str] | None:
    """Answer requests until the control socket closes (``None``); in a forked child, the argv to run."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    statuses: dict[int, int] = {}  # child pid -> write end of its status pipe
    while True:
        readable, _, _ = select.select([control.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
            reap(statuses)
        if control.fileno() not in readable:
            continue
        payload, fds, _flags, _address = socket.recv_fds(control, MAX_REQUEST, 3)
        if not payload:
            return None
        request = json.loads(payload)
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            become(request, fds, [control.detach(), wake_r, wake_w, status_r, status_w, *statuses.values()])
            return list(request["argv"])
        for fd in fds:
            os.close(fd)
        statuses[pid] = status_w
        socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [status_r])
        os.close(status_r)
        reap(statuses)  # a child may have ended before its SIGCHLD handler could wake the loop


def reap(statuses: dict[int, int]) -> None:
    """Send the wait status of every ended child on its pipe."""
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, STATUS.pack(status))
            os.close(fd)


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional library this environment lacks
            continue
    from django.conf import settings

    assert not settings.configured, "a preloaded module read Django's settings"
    assert "twisted.internet.reactor" not in sys.modules, "a preloaded module installed a reactor"
    argv = serve(control)
    if argv is not None:
        run(argv)


# -- the client, in the pytest process ------------------------------------------------------------------


class ForkedProcess(subprocess.Popen[bytes]):
    """A process the forkserver forked, handled as a :class:`subprocess.Popen`: ``poll``, ``wait``,
    ``send_signal`` (``terminate``, ``kill``), ``pid``, ``returncode``, ``stdin``/``stdout`` pipes."""

    def __init__(
        self, args: Sequence[str], pid: int, status_fd: int, stdin: IO[bytes] | None, stdout: IO[bytes] | None
    ) -> None:
        # Popen.__init__ is not called: it would start a process. These are the attributes its other
        # methods (__exit__, __repr__, terminate, kill, __del__) read.
        self.args = list(args)
        self.pid = pid
        self.returncode: Any = None
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = None
        self._child_created = False  # Popen.__del__: nothing of its own to reap
        self._sigint_wait_secs = 0.25  # Popen.__exit__ on KeyboardInterrupt
        self._status_fd = status_fd
        self._status_lock = threading.Lock()

    def _read_status(self, timeout: float | None) -> bool:
        with self._status_lock:
            if self.returncode is not None:
                return True
            ready, _, _ = select.select([self._status_fd], [], [], timeout)
            if not ready:
                return False
            data = os.read(self._status_fd, STATUS.size)
            os.close(self._status_fd)
            if len(data) < STATUS.size:
                raise RuntimeError(f"the forkserver ended before process {self.pid} did")
            self.returncode = os.waitstatus_to_exitcode(STATUS.unpack(data)[0])
            return True

    def poll(self) -> int | None:
        self._read_status(0)
        return self.returncode  # type: ignore[no-any-return]

    def wait(self, timeout: float | None = None) -> int:
        if not self._read_status(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode  # type: ignore[no-any-return]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def __del__(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(OSError):
                os.close(self._status_fd)


class Forkserver:
    """This pytest process's forkserver (see the module's docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (its own stderr: why it died, if it did)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.environment = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        self.environment.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.forkserver", str(theirs.fileno())],
                cwd=ROOT,
                env=self.environment,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                pass_fds=[theirs.fileno()],
            )

    def fits(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path | str) -> bool:
        """Whether a child forked from here is what ``argv`` started in ``env`` and ``cwd`` would be."""
        if len(argv) < 2 or argv[0] != sys.executable or Path(cwd).resolve() != ROOT:
            return False
        if (argv[1] == "-m" and len(argv) < 3) or (argv[1] != "-m" and argv[1].startswith("-")):
            return False
        mine, theirs = startup_environment(self.environment), startup_environment(env)
        mine.pop("PYTHONUNBUFFERED", None)  # the child makes its standard streams as asked
        theirs.pop("PYTHONUNBUFFERED", None)
        return mine == theirs

    def spawn(
        self, argv: Sequence[str], env: Mapping[str, str], fds: Sequence[int], new_session: bool
    ) -> tuple[int, int]:
        """Fork ``argv`` with ``env`` and ``fds`` as its 0, 1 and 2; returns its pid and status pipe."""
        request = {"argv": list(argv[1:]), "env": dict(env), "cwd": str(ROOT), "new_session": new_session}
        with self.lock:
            if self.process.poll() is not None:
                raise RuntimeError(f"the forkserver died:\n{self.stderr()}")
            socket.send_fds(self.control, [json.dumps(request).encode()], list(fds))
            payload, status, _flags, _address = socket.recv_fds(self.control, 4096, 1)
        if not payload or not status:
            raise RuntimeError(f"the forkserver died:\n{self.stderr()}")
        return int(json.loads(payload)["pid"]), status[0]

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def close(self) -> None:
        self.control.close()  # end of requests: the forkserver returns
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


_forkserver: Forkserver | None = None
_forkserver_lock = threading.Lock()


def close_forkserver() -> None:
    """End this process's forkserver, if it started (at the end of the session, ``tests/conftest.py``)."""
    global _forkserver
    with _forkserver_lock:
        server, _forkserver = _forkserver, None
    if server is not None:
        server.close()


def _the_forkserver() -> Forkserver:
    global _forkserver
    with _forkserver_lock:
        if _forkserver is None or _forkserver.process.poll() is not None:
            _forkserver = Forkserver()
        return _forkserver


File = IO[bytes] | int | None


def popen(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    stdin: File = None,
    stdout: File = None,
    stderr: File = None,
    start_new_session: bool = False,
    forked: bool = True,
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, cwd=cwd, env=env, stdin=..., stdout=..., stderr=...)``, forked from the
    forkserver when it can be (see the module's docstring). ``stdin``, ``stdout``, ``stderr``: a file,
    a descriptor, ``subprocess.PIPE``, ``subprocess.DEVNULL``, ``subprocess.STDOUT`` (``stderr``) or
    ``None`` (this process's own)."""
    server = _the_forkserver() if ENABLED and forked else None
    if server is None or not server.fits(argv, env, cwd):
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=start_new_session,
        )
    opened: list[int] = []  # the child's ends, closed here once it has them
    ours: list[IO[bytes] | None] = [None, None]  # stdin's and stdout's pipe ends, for the caller

    def child_end(value: File, number: int) -> int:
        if value is None:
            return number
        if value == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR)
            opened.append(fd)
            return fd
        if value == subprocess.PIPE:
            read, write = os.pipe()
            mine, theirs = (write, read) if number == 0 else (read, write)
            opened.append(theirs)
            ours[number] = open(mine, "wb" if number == 0 else "rb")  # noqa: SIM115
            return theirs
        return value if isinstance(value, int) else value.fileno()

    try:
        fds = [child_end(stdin, 0), child_end(stdout, 1)]
        fds.append(fds[1] if stderr == subprocess.STDOUT else child_end(stderr, 2))
        pid, status = server.spawn(argv, env, fds, start_new_session)
    except BaseException:
        for pipe in ours:
            if pipe is not None:
                pipe.close()
        raise
    finally:
        for fd in opened:
            os.close(fd)
    return ForkedProcess(argv, pid, status, ours[0], ours[1])


if __name__ == "__main__":
    main()
