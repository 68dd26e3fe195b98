"""Side by side with the official MCP Python SDK: the same echo tool, the same load, alternating servers.

Starts the SDK's streamable-HTTP server (``bench/sdk_server.py``) and this project's server (the test site,
``DEBUG`` off), one worker process each under the same ASGI server, and drives each in turn with
``bench/loadgen.py`` (a separate process). Every round runs both servers back to back, alternating which goes
first; the figures are the median over rounds. CPU time per request is the server process's user + system
time over the run divided by its requests: the steadier figure on a shared machine.

The rows (``bench/rows.py``; ``--only`` takes their names): ``c16`` (tools/call, 2025-11-25 sessions, ``auto``
vs SDK JSON), ``c16-2026`` (the same as 2026-07-28 requests: no handshake, the revision in each request's
``_meta`` and headers), ``json`` and ``sse`` (those modes vs the SDK's), ``c1`` (one connection: p50),
``handshake`` (``initialize`` + ``notifications/initialized`` per second at c8) and ``memory`` (RSS growth of
a fresh server process of each after ``--sessions`` sessions opened and left open). Then a summary of every
ratio next to the performance issue's target for it (``--markdown``: also the docs' table).

    .venv/bin/python bench/compare.py                         # every row
    .venv/bin/python bench/compare.py --postgres --redis      # this project on PostgreSQL + Redis
    .venv/bin/python bench/compare.py --only c16,c16-2026 --rounds 5 --requests 4000
    .venv/bin/python bench/compare.py --only memory --sessions 2000
    .venv/bin/python bench/compare.py --otel                  # this project without OTel, API only, SDK
    .venv/bin/python bench/compare.py --limits --redis        # without rate limits, and one never reached

Then a guarantee run against this project's server in each response mode the rows started (1 call in 10 slow
and cancelled): sent, answered, cancelled, duplicated, missing, left pending.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.proc import cpu_seconds  # noqa: E402
from bench.rows import ROWS, Figures, Outcome, Row, print_markdown, print_outcome, print_summary  # noqa: E402
from tests.support.live import free_port, migrated_template, stop_process, wait_for_port  # noqa: E402


@dataclass
class Server:
    label: str
    process: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def rss_mib(self) -> float:
        """The process's resident set (``VmRSS``), in MiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for process {self.process.pid}")


def start(label: str, app: str, env: dict[str, str], asgi_server: str, log: Path) -> Server:
    port = free_port()
    if asgi_server == "daphne":
        command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app]
    else:
        command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
        command += ["--log-level", "warning", "--no-access-log"]
        if asgi_server == "uvicorn-h11":  # uvicorn without its [standard] extras: h11 on asyncio's loop
            command += ["--http", "h11", "--loop", "asyncio"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    wait_for_port(port, process)
    return Server(label, process, port)


def ours_env(
    workdir: Path,
    mode: str,
    postgres: str | None,
    redis: str | None,
    name: str,
    settings: dict[str, Any] | None = None,
    otel: str | None = None,
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    if postgres:
        database = postgres
    else:
        path = workdir / f"{name}.sqlite3"
        shutil.copy(migrated_template(workdir), path)
        database = f"sqlite:///{path}"
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DJANGO_DEBUG="0",
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=database,
        MCP_TEST_OVERRIDES=json.dumps({**(settings or {}), "RESPONSE_MODE": mode}),
        PYTHONPATH=str(ROOT),
    )
    if redis:
        env["REDIS_URL"] = redis
    if otel is not None:  # bench/otel_settings.py: none, api or sdk
        env.update(DJANGO_SETTINGS_MODULE="bench.otel_settings", MCP_BENCH_OTEL=otel)
    return env


def load(
    server: Server,
    concurrency: int,
    requests: int,
    bearer: str | None = None,
    era: str = "2025",
    handshakes: bool = False,
    tool: str = "echo",
) -> dict[str, Any]:
    """One ``bench/loadgen.py`` run against ``server`` (``tools/call`` of ``tool``), and the server's CPU
    time per request over it."""
    cpu_before = server.cpu_seconds()
    command = [sys.executable, str(ROOT / "bench" / "loadgen.py"), "--url", server.url]
    command += ["--concurrency", str(concurrency), "--requests", str(requests), "--era", era, "--tool", tool]
    command += ["--bearer", bearer] if bearer else []
    command += ["--handshakes"] if handshakes else []
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout)
    figures["cpu_ms"] = (server.cpu_seconds() - cpu_before) * 1000 / requests
    figures["bad"] = sum(figures[k] for k in ("missing", "duplicated", "http_errors", "rpc_errors"))
    return figures


def compare(
    servers: list[Server],
    concurrency: int,
    requests: int,
    rounds: int,
    era: str = "2025",
    handshakes: bool = False,
    tool: str = "echo",
) -> dict[str, dict[str, float]]:
    """Median figures of each server over ``rounds`` rounds (after one warm-up each), the order of the
    servers rotating from one round to the next."""
    for server in servers:
        load(server, concurrency, max(200, requests // 5), era=era, handshakes=handshakes, tool=tool)
    runs: dict[str, list[dict[str, Any]]] = {server.label: [] for server in servers}
    for n in range(rounds):
        shift = n % len(servers)
        for server in servers[shift:] + servers[:shift]:
            figures = load(server, concurrency, requests, era=era, handshakes=handshakes, tool=tool)
            runs[server.label].append(figures)
    summary: dict[str, dict[str, float]] = {}
    for label, results in runs.items():
        summary[label] = {
            key: statistics.median(r[key] for r in results) for key in ("rps", "p50", "p99", "cpu_ms")
        }
        summary[label]["bad"] = sum(r["bad"] for r in results)
    return summary


def guarantee_counts(server: Server, requests: int) -> None:
    """Cancels mixed into the load: every id answered once or cancelled, nothing left pending."""
    import asyncio

    from bench.bench import drive
    from tests.support.live import LiveServer

    live = LiveServer(port=server.port, process=server.process, log_path=Path(os.devnull), env={})
    result = asyncio.run(drive(live, 8, requests, 10))
    c = result["counts"]
    print(
        f"\nguarantee ({server.label}, concurrency 8, 1 call in 10 slow and cancelled): sent {c.sent}, "
        f"answered {c.answered}, cancelled {c.cancelled}, duplicated {c.duplicated}, missing {c.missing}, "
        f"left pending: memory {result['pending_memory']}, ledger {result['pending_ledger']}"
    )


SDK_LABELS = {
    "json": "official SDK (json)",
    "sse": "official SDK (sse)",
    "sessions": "official SDK (json, no cap)",
}


@dataclass
class Bench:
    """What this project's and the SDK's servers start with, and the servers started so far (one per mode
    or app, shared by the rows; the memory row starts fresh ones of its own)."""

    args: argparse.Namespace
    workdir: Path
    postgres: str | None
    redis: str | None
    settings: dict[str, Any]
    ours: dict[str, Server] = field(default_factory=dict)
    sdk: dict[str, Server] = field(default_factory=dict)

    def start_ours(self, mode: str, name: str) -> Server:
        env = ours_env(self.workdir, mode, self.postgres, self.redis, name, self.settings)
        log = self.workdir / f"{name}.log"
        return start(f"this project ({mode})", "project.asgi:application", env, self.args.asgi_server, log)

    def start_sdk(self, app: str, name: str) -> Server:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = self.workdir / f"{name}.log"
        stack = "uvicorn-h11" if self.args.asgi_server == "uvicorn-h11" else "uvicorn"  # the same as ours
        return start(SDK_LABELS[app], f"bench.sdk_server:{app}_app", env, stack, log)

    def servers(self, row: Row) -> tuple[Server, Server]:
        """The row's two servers: this project's for its mode, the SDK's for its app (started once)."""
        if row.mode not in self.ours:
            self.ours[row.mode] = self.start_ours(row.mode, f"ours-{row.mode}")
        if row.sdk_app not in self.sdk:
            self.sdk[row.sdk_app] = self.start_sdk(row.sdk_app, f"sdk-{row.sdk_app}")
        return self.ours[row.mode], self.sdk[row.sdk_app]

    def stop(self) -> None:
        for server in [*self.ours.values(), *self.sdk.values()]:
            stop_process(server.process)


def run_row(bench: Bench, row: Row) -> Outcome:
    """A row's figures for both servers, printed as it ends."""
    if row.kind == "memory":
        return memory_row(bench, row)
    ours, sdk = bench.servers(row)
    args = bench.args
    requests = args.requests if row.concurrency > 1 else max(300, args.requests // 5)
    handshakes = row.kind == "handshakes"
    summary = compare([ours, sdk], row.concurrency, requests, args.rounds, row.era, handshakes, row.tool)
    outcome = Outcome(row, summary[ours.label], summary[sdk.label])
    print_outcome(outcome, ours.label, sdk.label)
    return outcome


def memory_row(bench: Bench, row: Row) -> Outcome:
    """A fresh server process of each, warmed up with 200 handshakes; then ``--sessions`` sessions opened
    and left open, and the growth of its RSS over them (SDK first, then this project)."""
    sessions = bench.args.sessions
    servers = [bench.start_sdk(row.sdk_app, "sdk-memory"), bench.start_ours(row.mode, "ours-memory")]
    figures: dict[str, Figures] = {}
    try:
        for server in servers:
            load(server, row.concurrency, 200, handshakes=True)
            before = server.rss_mib()
            run = load(server, row.concurrency, sessions, handshakes=True)
            after = server.rss_mib()
            figures[server.label] = {key: float(run[key]) for key in ("rps", "p50", "p99", "cpu_ms", "bad")}
            figures[server.label].update(
                base_mib=before,
                after_mib=after,
                growth_mib=after - before,
                kib_per_session=(after - before) * 1024 / sessions,
            )
    finally:
        for server in servers:
            stop_process(server.process)
    sdk, ours = servers
    outcome = Outcome(row, figures[ours.label], figures[sdk.label])
    print_outcome(outcome, ours.label, sdk.label)
    return outcome


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=3000, help="requests per run (default 3000)")
    parser.add_argument("--sessions", type=int, default=10_000, help="the memory row's (default 10000)")
    parser.add_argument(
        "--asgi-server",
        default="uvicorn",
        choices=["uvicorn", "uvicorn-h11", "daphne"],
        help="uvicorn (httptools and uvloop where installed, as the deploy extra does), uvicorn-h11 (h11 on "
        "asyncio's loop, as plain uvicorn), daphne (this project only; the SDK under uvicorn)",
    )
    parser.add_argument("--postgres", action="store_true", help="this project on a fresh PostgreSQL database")
    parser.add_argument(
        "--redis", action="store_true", help="this project's channel layer and cache on Redis"
    )
    names = ", ".join(row.name for row in ROWS)
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {names}")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="an MCP_SERVER setting for this project's server, e.g. LEDGER_FLUSH_INTERVAL=0 (repeatable)",
    )
    parser.add_argument("--no-guarantee", action="store_true", help="skip the guarantee run")
    parser.add_argument("--markdown", action="store_true", help="also print the docs' table of the run")
    parser.add_argument(
        "--otel",
        action="store_true",
        help="instead: this project three ways (no OpenTelemetry, API only, SDK to in-memory), c16",
    )
    parser.add_argument(
        "--limits",
        action="store_true",
        help="instead: this project without rate limits and with one that is never reached, c16",
    )
    args = parser.parse_args()
    args.only = set(filter(None, args.only.split(",")))
    if unknown := args.only - {row.name for row in ROWS}:
        parser.error(f"--only: no row named {', '.join(sorted(unknown))} (the rows: {names})")
    return args


def main() -> None:
    args = _arguments()
    settings = {key: json.loads(value) for key, _, value in (s.partition("=") for s in args.setting)}
    workdir = Path(tempfile.mkdtemp(prefix="mcp-compare-"))
    postgres = _postgres_database() if args.postgres else None
    redis = "redis://127.0.0.1:6379/9" if args.redis else None
    if redis:
        import redis as redis_client

        redis_client.Redis.from_url(redis).flushdb()
    backend = f"{'postgres' if postgres else 'sqlite'}+{'redis' if redis else 'memory'}"
    print(
        f"{args.rounds} alternating rounds of {args.requests} requests per server and row (c1: a fifth), "
        f"{args.asgi_server}, one worker process each; this project on {backend}"
        + (f", settings {json.dumps(settings)}" if settings else "")
    )
    if args.otel:
        compare_otel(workdir, postgres, redis, settings, args)
        return
    if args.limits:
        compare_limits(workdir, postgres, redis, settings, args)
        return
    bench = Bench(args, workdir, postgres, redis, settings)
    try:
        outcomes = [run_row(bench, row) for row in ROWS if not args.only or row.name in args.only]
        if not args.no_guarantee:  # in every response mode a row started a server for
            for server in bench.ours.values():
                guarantee_counts(server, 400)
    finally:
        bench.stop()
    print_summary(outcomes, backend)
    if args.markdown:
        print_markdown(outcomes, backend, args.sessions)


OTEL_MODES = {
    "none": "no OpenTelemetry",
    "api": "OpenTelemetry API only",
    "sdk": "SDK, in-memory exporter",
}

NEVER_REACHED = {"per": "address", "target": "tool:echo", "rate": "1000000000/day", "name": "never reached"}
"""``--limits``: one rate limit on the echo tool that the load never reaches (a cache round trip per call)."""

LIMIT_MODES = {"none": "no rate limit", "one": "one limit, never reached"}


def compare_variants(
    variants: dict[str, dict[str, str]], asgi_server: str, workdir: Path, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """This project's server in each of ``variants`` (label -> environment) side by side at concurrency 16,
    the order rotating from round to round; prints each one's figures and its ratio to the first."""
    servers: list[Server] = []
    try:
        for n, (label, env) in enumerate(variants.items()):
            servers.append(start(label, "project.asgi:application", env, asgi_server, workdir / f"v{n}.log"))
        summary = compare(servers, 16, args.requests, args.rounds)
    finally:
        for server in servers:
            stop_process(server.process)
    print(f"\nconcurrency 16, this project {len(variants)} ways ({args.rounds} rotating rounds)")
    print(f"  {'server':28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/req':>10} {'bad':>4}")
    for label in variants:
        s = summary[label]
        print(
            f"  {label:28} {s['rps']:>8.0f} {s['p50']:>8.1f} {s['p99']:>8.1f} {s['cpu_ms']:>10.2f} "
            f"{int(s['bad']):>4}"
        )
    first = summary[next(iter(variants))]
    for label in list(variants)[1:]:
        s = summary[label]
        print(
            f"  {label} / {next(iter(variants))}: throughput {s['rps'] / first['rps']:.3f}x, "
            f"CPU per request {s['cpu_ms'] / first['cpu_ms']:.3f}x"
        )
    return summary


def compare_otel(
    workdir: Path, postgres: str | None, redis: str | None, settings: dict[str, Any], args: argparse.Namespace
) -> None:
    """This project three ways: no OpenTelemetry, the API alone, the SDK recording (``auto`` mode, c16)."""
    variants = {
        label: ours_env(workdir, "auto", postgres, redis, f"ours-{mode}", settings, otel=mode)
        for mode, label in OTEL_MODES.items()
    }
    compare_variants(variants, args.asgi_server, workdir, args)


def compare_limits(
    workdir: Path, postgres: str | None, redis: str | None, settings: dict[str, Any], args: argparse.Namespace
) -> None:
    """This project without rate limits and with one limit on the echo tool that is never reached."""
    variants = {
        LIMIT_MODES["none"]: ours_env(workdir, "auto", postgres, redis, "ours-unlimited", settings),
        LIMIT_MODES["one"]: ours_env(
            workdir, "auto", postgres, redis, "ours-limited", {**settings, "RATE_LIMITS": [NEVER_REACHED]}
        ),
    }
    compare_variants(variants, args.asgi_server, workdir, args)


def _postgres_database() -> str:
    from bench.bench import _postgres_database as create

    return create()


if __name__ == "__main__":
    main()
