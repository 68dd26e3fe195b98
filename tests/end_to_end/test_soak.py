"""``bench/soak.py`` works: a few seconds of its hostile traffic against a live server, and the counts it
prints. It is a script that prints figures (run it for minutes by hand); this only checks that it runs and
what it must never find: a 5xx, an id left unanswered or answered twice, an exchange that hung, a request
left in flight or pending in the ledger."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.live import ROOT, LiveServer


def test_the_soak_prints_its_counts_and_finds_nothing_wrong(live_server: LiveServer) -> None:
    command = [sys.executable, "bench/soak.py", "--seconds", "3", "--concurrency", "2", "--seed", "11"]
    command += ["--url", live_server.url, "--pid", str(live_server.process.pid), "--json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["requests"] == sum(figures["requests_by_action"].values()) > 0
    assert sum(figures["responses"].values()) == figures["requests"]
    assert {"call", "batch"} <= set(figures["requests_by_action"])
    assert figures["ids"]["answered"] > 0
    assert figures["rss_kib_before"] > 0
    assert figures["rss_kib_after"] > 0
    assert figures["unanswered"] == 0
    assert figures["duplicated"] == 0
    assert figures["hung"] == 0
    assert figures["inflight_left"] == 0
    assert figures["ledger_pending_left"] == 0
    assert figures["5xx"] == 0, figures["5xx_by_action"]
