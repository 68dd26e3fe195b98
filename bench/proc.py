"""CPU time of a process or of one of its threads, read off Linux ``/proc`` (the benchmarks' one reader)."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str = "self", thread: int | None = None) -> float:
    """User + system CPU seconds so far of process ``pid`` (``"self"``: this one), or of its thread
    ``thread`` (a native thread id). Raises ``OSError`` when it is gone."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()  # (past the command name: it may hold spaces)
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
