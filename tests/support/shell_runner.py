"""A long-lived ``manage.py shell -c`` for the tests (``tests.support.live.run_shell``): pays Python's and
Django's start-up once per environment, then runs each snippet in a fork of itself.

Run as ``python -m tests.support.shell_runner`` from the project's root, with the environment ``manage.py``
would have. It sets Django up once, as ``manage.py`` does, then reads snippets from stdin and, for each,
forks: the child runs ``manage.py shell -c <snippet>`` (Django's own command, in-process) with its stdout and
stderr (file descriptors 1 and 2) on files of their own, closes its database connections and exits as a
process does (non-daemon threads joined, ``atexit`` run; an exception's traceback on its stderr, exit code 1).
So a snippet sees the process ``manage.py shell -c`` would be right after start-up, nothing a previous snippet
left in memory, and no connection or lock outlives it. The reply is its exit code, stdout and stderr.

Frames on stdin and stdout are a 4-byte big-endian length, then that many bytes: a JSON list in (the
arguments after ``manage.py``: ``["shell", "-c", snippet]``, or any other command, ``mcp_token`` say, run
the same way), a JSON object out. Whatever else the runner itself prints goes to its stderr, never between
frames.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import struct
import sys
import tempfile
import threading
from typing import BinaryIO, NoReturn

HEADER = struct.Struct(">I")


def read_frame(stream: BinaryIO) -> bytes | None:
    """The next frame's payload, or ``None`` at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (length,) = HEADER.unpack(header)
    payload = stream.read(length)
    if len(payload) < length:
        return None
    return payload


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def run_command(args: list[str], out: BinaryIO, err: BinaryIO) -> NoReturn:
    """In the forked child: ``manage.py <args>`` (``shell -c <snippet>`` mostly) with fds 1 and 2 on ``out``
    and ``err``; exits."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.argv = ["manage.py", *args]
    from django.core.management import execute_from_command_line
    from django.db import connections

    try:
        try:
            execute_from_command_line(sys.argv)
        finally:
            connections.close_all()
        status = 0
    except SystemExit as stop:  # as the interpreter reads it
        if stop.code is None or isinstance(stop.code, int):
            status = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            status = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())  # the traceback on stderr, as an uncaught exception's
        status = 1
    # The end of a process, as the interpreter's: the snippet's non-daemon threads (and executors) joined,
    # atexit run, output flushed; then out without tearing the heap down (most of a normal exit's cost).
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main() -> None:
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the runner's own prints (and Django's start-up's) never reach the frames
    sys.stdout = sys.stderr
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")  # as manage.py
    import django
    from django.db import connections

    django.setup()
    # Loaded here once rather than in every child.
    import django.core.management.commands.shell

    connections.close_all()  # a child must not share a connection with the runner (there is none)
    gc.freeze()  # the heap so far is never collected: the forks do not copy it page by page
    while (payload := read_frame(requests)) is not None:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                replies.close()
                run_command(json.loads(payload), out, err)
            _, status = os.waitpid(pid, 0)
            out.seek(0)
            err.seek(0)
            reply = {
                "returncode": os.waitstatus_to_exitcode(status),
                "stdout": out.read().decode(errors="replace"),
                "stderr": err.read().decode(errors="replace"),
            }
        write_frame(replies, json.dumps(reply).encode())


if __name__ == "__main__":
    main()
