"""Processes of the test session forked from its forkserver (``tests.support.forkserver``, which says how and
when): :func:`popen` as ``subprocess.Popen``, a :class:`ForkedProcess` for what was forked."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tests.support.forkserver import ROOT, STATUS, startup_environment

ENABLED = False
"""Whether :func:`popen` forks (``tests/conftest.py`` turns it on for the test session)."""


class ForkedProcess(subprocess.Popen[bytes]):
    """A process the forkserver forked, handled as a :class:`subprocess.Popen`: ``poll``, ``wait``,
    ``send_signal`` (``terminate``, ``kill``), ``pid``, ``returncode``, its ``stdin``, ``stdout`` and
    ``stderr`` pipes."""

    def __init__(
        self, args: Sequence[str], pid: int, status_fd: int, pipes: Sequence[IO[bytes] | None]
    ) -> None:
        # Popen.__init__ is not called: it would start a process. These are the attributes its other
        # methods (__exit__, __repr__, terminate, kill, __del__) read.
        self.args = list(args)
        self.pid = pid
        self.returncode: Any = None
        self.stdin, self.stdout, self.stderr = pipes
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

    @property
    def status_fd(self) -> int | None:
        """The pipe its wait status arrives on (readable once it has ended); ``None`` once read."""
        return None if self.returncode is not None else self._status_fd

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


def can_fork(argv: Sequence[str], env: Mapping[str, str], cwd: Path | str) -> bool:
    """Whether :func:`popen` would fork ``argv`` (forking is on, and the child would be what it asks for)."""
    return ENABLED and _the_forkserver().fits(argv, env, cwd)


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
    ours: list[IO[bytes] | None] = [None, None, None]  # this end of each pipe, for the caller

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
    return ForkedProcess(argv, pid, status, ours)
