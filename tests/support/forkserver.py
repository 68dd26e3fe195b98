"""A Python that has imported the heavy, settings-free libraries once, forking the tests' own processes.

A live server, ``manage.py migrate`` and a shell runner (``tests.support.live``) each used to pay the
interpreter's start-up and some 1.3 s of CPU importing what does not depend on their settings (pydantic and
the MCP types, Twisted, psycopg, Redis, Django's models and admin...): over a run, about a fifth of the
suite's CPU on two cores. ``tests.support.forked.popen`` asks this pytest process's forkserver instead
(started at the first call, ended with the session, ``tests/conftest.py``): it forks, and the child sets the
environment, the working directory and the file descriptors 0-2 it was given, then runs ``-m module`` or
``script.py`` as the interpreter runs its ``__main__`` (``runpy``) and exits as the interpreter does (its
``SystemExit`` or traceback, ``atexit``, finalization). So the child is the process ``python -m daphne ...``
would be, its settings read from its own environment, with those libraries already in ``sys.modules``.

Not forked (a plain ``subprocess.Popen``): when ``tests.support.forked.ENABLED`` is off (``bench/`` and
``scripts/`` outside pytest), when a ``PYTHON*`` or ``COVERAGE_PROCESS_*`` variable (read at interpreter
start-up) or the working directory differs from the forkserver's, or with ``forked=False``: a forked process
is the forkserver's child, not this process's, so ``os.waitpid`` on it fails (its ``ForkedProcess`` reads
the exit status the forkserver sends instead).

Run as ``python -m tests.support.forkserver FD`` from the project's root, ``FD`` one end of a Unix
``SOCK_SEQPACKET`` socket pair. Each request is a JSON object (``argv``, ``env``, ``cwd``, ``new_session``)
with the child's file descriptors 0-2 attached; each reply the child's pid (JSON) with the read end of a pipe
attached, on which its wait status (4 bytes, big-endian) arrives when it ends.
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
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

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


if __name__ == "__main__":
    main()
