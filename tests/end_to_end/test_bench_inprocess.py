"""``bench/inprocess.py`` works: a few hundred calls through the application in process, the figures it
prints, and what it must never find with ``--cycles``: an object a call leaves to the cyclic collector."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.support.live import ROOT


def test_the_in_process_bench_prints_its_figures_and_finds_no_cycle() -> None:
    command = [sys.executable, "bench/inprocess.py", "--calls", "320", "--cycles"]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^320 calls at c16: [0-9.]+ us CPU a call", done.stdout, re.M), done.stdout
    assert "collector: passes [0, 0, 0]" in done.stdout  # (off while it counts)
    assert "cyclic garbage: 0.00 objects a call" in done.stdout, done.stdout
