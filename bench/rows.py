"""The rows of ``bench/compare.py``: what each one runs, the performance issue's target for it, and how the
figures are printed (each row as it ends, a summary of the ratios against the targets, the docs' table).

Every ratio is this project's figure over the SDK's, in the same run: throughput (higher is better), p50,
p99, CPU time per request and RSS growth (lower is better).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ROWS",
    "Outcome",
    "Row",
    "print_markdown",
    "print_outcome",
    "print_summary",
]

Figures = dict[str, float]
"""One server's figures in a row: ``rps``, ``p50``, ``p99``, ``cpu_ms``, ``bad``; a memory row's also
``base_mib``, ``after_mib``, ``growth_mib`` and ``kib_per_session``."""


@dataclass(frozen=True)
class Row:
    """One comparison: this project in ``mode`` against ``bench.sdk_server``'s ``<sdk_app>_app``."""

    name: str  # what --only names
    title: str
    mode: str  # this project's RESPONSE_MODE
    sdk_app: str  # json, sse or sessions
    concurrency: int
    era: str = "2025"  # 2025: a session per connection; 2026: 2026-07-28 requests, no handshake
    kind: str = "calls"  # calls (tools/call echo), handshakes (initialize + initialized) or memory
    tool: str = "echo"  # the tool called: echo (async def on both servers) or echo_sync (a plain def)

    @property
    def unit(self) -> str:
        return "tools/call" if self.kind == "calls" else "handshake"


ROWS = (
    Row("c16", "tools/call, 2025-11-25 sessions, c16: auto vs SDK JSON", "auto", "json", 16),
    Row(
        "c16-2026", "tools/call, 2026-07-28 (no handshake), c16: auto vs SDK JSON", "auto", "json", 16, "2026"
    ),
    Row(
        "c16-sync",
        "tools/call of a sync handler (def, not async def), 2026-07-28, c16: auto vs SDK JSON",
        "auto",
        "json",
        16,
        "2026",
        tool="echo_sync",
    ),
    Row("json", "tools/call, 2025-11-25 sessions, c16: json vs SDK JSON", "json", "json", 16),
    Row("sse", "tools/call, 2025-11-25 sessions, c16: sse vs SDK SSE", "sse", "sse", 16),
    Row("c1", "tools/call, 2025-11-25 sessions, c1: auto vs SDK JSON", "auto", "json", 1),
    Row(
        "handshake",
        "initialize + initialized, c8: auto vs SDK JSON",
        "auto",
        "sessions",
        8,
        kind="handshakes",
    ),
    Row("memory", "RSS growth, sessions opened and left open, c8", "auto", "sessions", 8, kind="memory"),
)

THROUGHPUT = {"c16": 1.5, "c16-2026": 1.5, "json": 1.5, "sse": 2.0, "handshake": 1.2}
PG_REDIS_THROUGHPUT = 1.3  # the c16 row's target on PostgreSQL + Redis
P99 = 0.7  # every row
CPU = 0.67  # per tools/call
MEMORY = 0.1  # RSS growth


@dataclass
class Outcome:
    """A row's figures for both servers."""

    row: Row
    ours: Figures
    sdk: Figures

    def ratio(self, key: str) -> float:
        theirs = self.sdk[key]
        return self.ours[key] / theirs if theirs > 0 else float("nan")


def _check(ratio: float, bound: float | None, higher: bool) -> str:
    """``1.05x``, with the target and whether it is met when there is one."""
    if bound is None:
        return f"{ratio:.2f}x"
    met = ratio >= bound if higher else ratio <= bound
    return f"{ratio:.2f}x {'>=' if higher else '<='}{bound:g} {'ok' if met else 'NO'}"


def _cells(outcome: Outcome, pg_redis: bool) -> list[str]:
    """The summary's cells of a row: throughput, p50, p99, CPU (a memory row: RSS growth)."""
    name = outcome.row.name
    if outcome.row.kind == "memory":
        return [f"RSS growth {_check(outcome.ratio('growth_mib'), MEMORY, higher=False)}"]
    throughput = PG_REDIS_THROUGHPUT if pg_redis and name == "c16" else THROUGHPUT.get(name)
    p50 = _check(outcome.ratio("p50"), None, higher=False)
    if name == "c1":  # the target: below the SDK's
        p50 = f"{outcome.ratio('p50'):.2f}x <1 {'ok' if outcome.ratio('p50') < 1 else 'NO'}"
    cpu_bound = CPU if outcome.row.kind == "calls" else None
    return [
        _check(outcome.ratio("rps"), throughput, higher=True),
        p50,
        _check(outcome.ratio("p99"), P99, higher=False),
        _check(outcome.ratio("cpu_ms"), cpu_bound, higher=False),
    ]


def print_outcome(outcome: Outcome, ours_label: str, sdk_label: str) -> None:
    """A row's figures as it ends: each server's, then the ratios."""
    row, rate = outcome.row, "req/s" if outcome.row.kind == "calls" else "hs/s"
    print(f"\n{row.name}: {row.title}")
    if row.kind == "memory":
        print(f"  {'server':28} {'RSS before':>10} {'after':>8} {'growth':>8} {'KiB/sess':>8} {'bad':>4}")
        for label, s in ((sdk_label, outcome.sdk), (ours_label, outcome.ours)):
            print(
                f"  {label:28} {s['base_mib']:>7.1f}MiB {s['after_mib']:>5.1f}MiB {s['growth_mib']:>5.1f}MiB "
                f"{s['kib_per_session']:>8.2f} {int(s['bad']):>4}"
            )
        print(f"  ratio ours/sdk: RSS growth {outcome.ratio('growth_mib'):.3f}x")
        return
    print(f"  {'server':28} {rate:>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/' + row.unit:>18} {'bad':>4}")
    for label, s in ((sdk_label, outcome.sdk), (ours_label, outcome.ours)):
        print(
            f"  {label:28} {s['rps']:>8.0f} {s['p50']:>8.1f} {s['p99']:>8.1f} {s['cpu_ms']:>18.2f} "
            f"{int(s['bad']):>4}"
        )
    print(
        f"  ratio ours/sdk: throughput {outcome.ratio('rps'):.2f}x, p50 {outcome.ratio('p50'):.2f}x, "
        f"p99 {outcome.ratio('p99'):.2f}x, CPU per {row.unit} {outcome.ratio('cpu_ms'):.2f}x"
    )


def print_summary(outcomes: list[Outcome], backend: str) -> None:
    """Every ratio of the run next to the issue's target for it (``ok`` / ``NO``)."""
    pg_redis = backend == "postgres+redis"
    print(f"\nsummary, ours / SDK ({backend}; targets from the performance issue, ok = met)")
    print(f"  {'row':10} {'throughput':19} {'p50':17} {'p99':17} CPU per request")
    for outcome in outcomes:
        cells = _cells(outcome, pg_redis)
        widths = (19, 17, 17, 17)[: len(cells)]
        print(
            f"  {outcome.row.name:10} "
            + " ".join(f"{c:{w}}" for c, w in zip(cells, widths, strict=True)).rstrip()
        )
    if not pg_redis:
        print(f"  (PostgreSQL + Redis, c16 >={PG_REDIS_THROUGHPUT:g}x: run with --postgres --redis)")


X = "\u00d7"  # the docs' multiplication sign


def _targets(row: Row, pg_redis: bool) -> str:
    """The issue's targets for a row, as the docs' table states them."""
    if row.kind == "memory":
        return f"RSS growth ≤{MEMORY:g}{X}"
    throughput = PG_REDIS_THROUGHPUT if pg_redis and row.name == "c16" else THROUGHPUT.get(row.name)
    parts = [f"≥{throughput:g}{X}"] if throughput else []
    parts += ["p50 below the SDK's"] if row.name == "c1" else []
    parts += [f"p99 ≤{P99:g}{X}"] + ([f"CPU ≤{CPU:g}{X}"] if row.kind == "calls" else [])
    return ", ".join(parts)


def _backend_words(backend: str) -> str:
    database, layer = backend.split("+")
    words = "PostgreSQL" if database == "postgres" else "SQLite"
    return f"{words}, {'Redis' if layer == 'redis' else 'in-memory'} layer"


def _markdown_row(o: Outcome, where: str, sessions: int, pg_redis: bool) -> str:
    row, us, them = o.row, o.ours, o.sdk
    sdk = "SSE mode" if row.sdk_app == "sse" else "JSON mode"
    head = f"| {row.name}: {{}} | {where}, `{row.mode}` | {sdk} | "
    if row.kind == "memory":
        return head.format(f"RSS growth, {sessions} sessions left open") + (
            f"{us['growth_mib']:.1f} / {them['growth_mib']:.1f} MiB ({o.ratio('growth_mib'):.2f}{X}); "
            f"{us['kib_per_session']:.1f} / {them['kib_per_session']:.1f} KiB per session | | | | "
            f"{_targets(row, pg_redis)} |"
        )
    era = "2026-07-28 requests" if row.era == "2026" else "2025-11-25 sessions"
    what = "initialize handshakes" if row.kind == "handshakes" else era
    what += ", a sync handler" if row.tool == "echo_sync" else ""
    return head.format(f"{what}, c{row.concurrency}") + (
        f"{us['rps']:.0f} / {them['rps']:.0f} ({o.ratio('rps'):.2f}{X}) | "
        f"{us['p50']:.1f} / {them['p50']:.1f} | {us['p99']:.1f} / {them['p99']:.1f} | "
        f"{us['cpu_ms']:.2f} / {them['cpu_ms']:.2f} | {_targets(row, pg_redis)} |"
    )


def print_markdown(outcomes: list[Outcome], backend: str, sessions: int) -> None:
    """The table of the run, as docs/explanation/performance.md shows it."""
    print(
        "\n| row | this project | official SDK | throughput (ours / SDK) | p50 ms | p99 ms "
        "| CPU ms per request | target |"
    )
    print("|---|---|---|---|---|---|---|---|")
    where, pg_redis = _backend_words(backend), backend == "postgres+redis"
    for outcome in outcomes:
        print(_markdown_row(outcome, where, sessions, pg_redis))
