"""Instructions per request, this project against the official SDK: the CPU figure a busy machine cannot move.

``bench/compare.py`` times both servers side by side, and on a shared machine its CPU figures drift by ±25%
from one run to the next. This runs each server under Valgrind's ``callgrind`` instead, under the same
Uvicorn as ``bench/compare.py`` starts it, drives it with ``bench/loadgen.py`` and counts the instructions
the server process executes (every thread: the event loop, the ledger writer) while it serves ``--requests``
calls, instrumentation switched on only around them (after a warm-up). The count repeats to within a few
tenths of a percent. It counts user-space instructions only: not the kernel's work (sockets, the disk), nor
what a cache miss costs; ``bench/compare.py``'s CPU time is the measure the performance issue names, this its
steadier shadow.

    .venv/bin/python bench/instructions.py                          # rows c16 and c16-2026, 2000 calls each
    .venv/bin/python bench/instructions.py --only c16-2026,c1 --requests 3000

Each server runs some 50 times slower under Valgrind: a row of 2000 calls takes about a minute a server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.compare import Server, load, ours_env  # noqa: E402
from bench.rows import ROWS, Row  # noqa: E402
from tests.support.live import free_port, stop_process, wait_for_port  # noqa: E402

__all__ = ["count_instructions"]

STARTUP_SECONDS = 600.0
"""How long a server may take to start under Valgrind (Django's set-up runs ~50 times slower)."""


def _control(pid: int, *arguments: str) -> None:
    subprocess.run(["callgrind_control", *arguments, str(pid)], capture_output=True, check=True)


def _total(out: Path) -> int:
    """The instructions a callgrind output file (and its per-thread parts) counted."""
    total = 0
    for path in out.parent.glob(out.name + "*"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total


def count_instructions(which: str, row: Row, requests: int, workdir: Path) -> tuple[float, float]:
    """``(instructions per request, requests answered)`` on ``row`` of one server: ``which`` is ``ours``
    or ``sdk``."""
    port = free_port()
    if which == "ours":
        env = ours_env(workdir, row.mode, None, None, f"{row.name}-ours")
        app = "project.asgi:application"
    else:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        app = f"bench.sdk_server:{row.sdk_app}_app"
    out = workdir / f"{row.name}-{which}.callgrind"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    command += [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "warning", "--no-access-log"]
    with (workdir / f"{row.name}-{which}.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, process, timeout=STARTUP_SECONDS)
        server = Server(which, process, port)
        load(server, row.concurrency, max(200, requests // 10), era=row.era)  # warm-up, not counted
        _control(process.pid, "-i", "on")
        figures = load(server, row.concurrency, requests, era=row.era)
        time.sleep(0.5)  # the ledger writer's last batch (written every 50 ms) lands inside the count
        _control(process.pid, "-i", "off")
        _control(process.pid, "-d")  # written now: a server slow to stop is killed, which writes nothing
    finally:
        stop_process(process, grace=60.0)
    return _total(out) / requests, figures["answered"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="c16,c16-2026", help="rows of bench/rows.py (calls rows only)")
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind (with callgrind_control) is needed: apt-get install valgrind")
    names = args.only.split(",")
    rows = [row for row in ROWS if row.name in names and row.kind == "calls"]
    workdir = Path(tempfile.mkdtemp(prefix="mcp-bench-instructions-"))
    try:
        print(f"instructions per request under callgrind, {args.requests} calls a row, uvicorn")
        print(f"  {'row':10} {'this project':>14} {'official SDK':>14} {'ratio':>7}")
        for row in rows:
            ours, ours_answered = count_instructions("ours", row, args.requests, workdir)
            sdk, sdk_answered = count_instructions("sdk", row, args.requests, workdir)
            bad = "" if ours_answered == sdk_answered == args.requests else "  (not every call answered)"
            print(f"  {row.name:10} {ours:14,.0f} {sdk:14,.0f} {ours / sdk:6.3f}x{bad}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
