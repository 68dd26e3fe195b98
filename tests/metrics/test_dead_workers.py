"""A scrape in multiprocess mode leaves out the writer's gauges of workers that died: their live-gauge files
are removed, those of running processes and every counter's and histogram's file are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp_server.metrics.exposition import forget_dead_workers


def a_dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_live_gauges_of_a_dead_worker_are_forgotten(tmp_path: Path) -> None:
    dead, alive = a_dead_pid(), os.getpid()
    names = [
        f"gauge_livesum_{dead}.db",
        f"gauge_livemax_{dead}.db",
        f"counter_{dead}.db",  # what it counted still counts
        f"histogram_{dead}.db",
        f"gauge_livesum_{alive}.db",
        f"gauge_livemax_{alive}.db",
    ]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    assert forget_dead_workers(str(tmp_path)) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
