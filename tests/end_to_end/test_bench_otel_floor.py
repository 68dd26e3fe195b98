"""``bench/otel_floor.py`` works: it prints what the SDK alone costs a request's telemetry, and ours."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.live import ROOT

pytest.importorskip("opentelemetry.sdk")


def test_the_otel_floor_bench_prints_the_sdk_floor_and_ours() -> None:
    command = [sys.executable, "bench/otel_floor.py", "--calls", "200", "--rounds", "1"]
    command += ["--request-us", "200"]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    floor = re.search(r"^SDK floor of a request: ([0-9.]+) us$", done.stdout, re.M)
    ours = re.search(r"^this project's telemetry of a request: ([0-9.]+) us", done.stdout, re.M)
    assert floor is not None, done.stdout
    assert ours is not None, done.stdout
    assert float(floor.group(1)) > 0
    assert float(ours.group(1)) > 0
    assert re.search(r"^the floor is [0-9]+% of a 200 us request \(at most [0-9.]+x\)$", done.stdout, re.M)
