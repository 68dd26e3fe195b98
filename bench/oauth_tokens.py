"""The same ``tools/call`` at concurrency 16 with an OAuth access token and with an ``mcp_`` token.

Starts the test site with the authorization server on (``DEBUG`` off) in one worker process, makes user
alice an ``mcp_`` token (``manage.py mcp_token``) and an OAuth access token bound to the endpoint, then runs
``bench/loadgen.py`` against it with each token in turn, alternating which goes first, after one warm-up
each. Prints the median req/s, p50, p99 and CPU ms per request (the server process's user + system time over
a run divided by its requests) of each, and the ratios OAuth / ``mcp_`` (the target: throughput at least
0.9x).

    .venv/bin/python bench/oauth_tokens.py                      # SQLite, per-process cache (no token cache)
    .venv/bin/python bench/oauth_tokens.py --postgres --redis   # PostgreSQL + Redis (the token cache on)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.compare import Server, load, start  # noqa: E402
from tests.support.live import base_env, stop_process  # noqa: E402

ON = {"MCP_DEMO_OAUTH": "1", "DJANGO_DEBUG": "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}

TOKENS = """
import secrets; from datetime import timedelta; from django.utils import timezone
from django.contrib.auth import get_user_model
from oauth2_provider.models import AccessToken, get_application_model, set_token_value
user, _ = get_user_model().objects.get_or_create(username='alice')
app = get_application_model().objects.create(name='bench', client_type='public',
    authorization_grant_type='authorization-code', redirect_uris='http://127.0.0.1/cb')
token = AccessToken(user=user, application=app, scope='mcp', resource=[{url!r}],
    expires=timezone.now() + timedelta(hours=2))
raw = secrets.token_urlsafe(30); set_token_value(token, raw); token.save(); print('OAUTH', raw)
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def site_env(workdir: Path, postgres: bool, redis: bool) -> dict[str, str]:
    """The environment of the site (migrated, DOT's tables included)."""
    if postgres:
        from bench.bench import _postgres_database

        database = _postgres_database()
    else:
        database = f"sqlite:///{workdir / 'site.sqlite3'}"
    env = base_env(Path(os.devnull), {"RESPONSE_MODE": "json"}, DATABASE_URL=database, **ON)
    if redis:
        import redis as redis_client

        env["REDIS_URL"] = "redis://127.0.0.1:6379/9"
        redis_client.Redis.from_url(env["REDIS_URL"]).flushdb()
    manage(env, "migrate", "-v0")
    return env


def tokens(env: dict[str, str], server: Server) -> dict[str, str]:
    """``{"mcp_": token, "OAuth": token}`` for alice."""
    oauth = manage(env, "shell", "-c", TOKENS.format(url=server.url)).split("OAUTH", 1)[1].split()[0]
    mcp = manage(env, "mcp_token", "create", "alice").strip().split()[-1]
    return {"mcp_": mcp, "OAuth": oauth}


def bench(server: Server, bearer: dict[str, str], requests: int, rounds: int) -> dict[str, dict[str, float]]:
    for token in bearer.values():
        load(server, 16, max(200, requests // 5), bearer=token)
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in bearer}
    labels = list(bearer)
    for n in range(rounds):
        for label in labels if n % 2 == 0 else labels[::-1]:
            runs[label].append(load(server, 16, requests, bearer=bearer[label]))
    return {
        label: {
            **{k: statistics.median(r[k] for r in results) for k in ("rps", "p50", "p99", "cpu_ms")},
            "bad": sum(r["missing"] + r["duplicated"] + r["http_errors"] for r in results),
        }
        for label, results in runs.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000, help="requests per run (default 2000)")
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--redis", action="store_true", help="cache and channel layer on Redis")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mcp-oauth-bench-"))
    env = site_env(workdir, args.postgres, args.redis)
    server = start("this project", "project.asgi:application", env, "uvicorn", workdir / "server.log")
    try:
        summary = bench(server, tokens(env, server), args.requests, args.rounds)
    finally:
        stop_process(server.process)
        shutil.rmtree(workdir, ignore_errors=True)
    backend = f"{'postgres' if args.postgres else 'sqlite'}+{'redis' if args.redis else 'memory'}"
    print(f"{args.rounds} alternating rounds of {args.requests} tools/call at c16, one worker, {backend}")
    print(f"  {'token':8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/req':>10} {'bad':>4}")
    for label, s in summary.items():
        figures = f"{s['rps']:>8.0f} {s['p50']:>8.1f} {s['p99']:>8.1f} {s['cpu_ms']:>10.2f}"
        print(f"  {label:8} {figures} {int(s['bad']):>4}")
    o, m = summary["OAuth"], summary["mcp_"]
    rps, cpu = o["rps"] / m["rps"], o["cpu_ms"] / m["cpu_ms"]
    print(f"  OAuth / mcp_: throughput {rps:.2f}x, CPU per request {cpu:.2f}x")
    print(json.dumps({"ratio_rps": rps, "ratio_cpu": cpu}))


if __name__ == "__main__":
    main()
