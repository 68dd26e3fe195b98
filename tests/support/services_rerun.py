"""Running a test module again in a child pytest on PostgreSQL and Redis.

Tests that run in this process on SQLite and local memory (a database ledger and a cache ledger) call
:func:`rerun_on_services` from one test of their own: the child's settings point at a fresh PostgreSQL
database (``DATABASE_URL``) and at Redis (``REDIS_URL``: the cache and the channel layer), and it runs every
other test of the module there. A child process, rather than swapping Django's ``connections`` here, because
the async ORM and the ledger writer run in threads of their own with their own connections: a child
configured like a production worker gets PostgreSQL everywhere, and pytest-django creates, flushes and drops
its test database as it does for SQLite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.support import live

ON_SERVICES = os.environ.get("MCP_RACES_ON_SERVICES") == "1"
"""Whether this process is such a child."""

CHILD_TIMEOUT = 900.0
"""Longest run of a child, in seconds."""

HANG_DUMP = 300.0
"""Seconds one test of a child may run before the child dumps its threads' stacks (pytest's faulthandler)."""


def tail(path: Path, size: int = 20000) -> str:
    """The last ``size`` characters of a child's output file."""
    return path.read_text(errors="replace")[-size:]


def expected_tests(namespace: Mapping[str, Any], rerun: Callable[..., Any], backends: int) -> int:
    """How many tests the child runs of the module whose globals are ``namespace``: each test but
    ``rerun``, once per value of each parametrize (and per backend, unless a parametrize names it)."""
    total = 0
    for name, fn in namespace.items():
        if name.startswith("test_") and callable(fn) and fn is not rerun:
            count, names = 1, set()
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "parametrize":
                    argnames = mark.args[0]
                    names |= {
                        n.strip() for n in (argnames.split(",") if isinstance(argnames, str) else argnames)
                    }
                    count *= len(mark.args[1])
            total += count * (1 if "backend" in names else backends)
    return total


def rerun_on_services(
    module_file: str,
    rerun: Callable[..., Any],
    tmp_path: Path,
    expected: int,
    *,
    timeout: float = CHILD_TIMEOUT,
) -> None:
    """Run the tests of ``module_file`` but ``rerun`` in a child on PostgreSQL and Redis; all must pass.

    The child's output streams to ``child-output.txt`` in ``tmp_path`` (``-v``: each test is named as it
    starts; a test still running after :data:`HANG_DUMP` seconds dumps every thread's stack there). A child
    still running after ``timeout`` seconds is killed, with its process group (its servers), and the failure
    names that file and quotes its end."""
    assert not ON_SERVICES, "the child deselects this test"
    live.require_services()
    report = tmp_path / "child.xml"
    module = str(Path(module_file).relative_to(live.ROOT))
    with live.postgres_database() as database, live.redis_namespace() as prefix:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        env.update(
            DATABASE_URL=database,
            REDIS_URL=live.REDIS_URL,
            MCP_TEST_REDIS_PREFIX=prefix,
            MCP_RACES_ON_SERVICES="1",
            PYTHONPATH=str(live.ROOT),
            PYTHONUNBUFFERED="1",
        )
        output_path = tmp_path / "child-output.txt"
        with output_path.open("w") as output_file:  # streamed: a hung child leaves what it had printed
            command = [
                *(sys.executable, "-m", "pytest", module, "-v", "-p", "no:cacheprovider"),
                *("-o", f"faulthandler_timeout={HANG_DUMP:g}"),
                *(f"--junitxml={report}", f"--deselect={module}::{rerun.__name__}"),
            ]
            child = subprocess.Popen(
                command,
                cwd=live.ROOT,
                env=env,
                stdout=output_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                returncode = child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                raise AssertionError(
                    f"the child pytest did not finish within {timeout:g}s; its output (the test it "
                    f"was running is its last line) is in {output_path}; it ends:\n{tail(output_path)}"
                ) from None
    output = tail(output_path)
    assert returncode == 0, f"{output_path}:\n{output}"
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None, output
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": expected, "failures": 0, "errors": 0, "skipped": 0}, output
