"""Mutation testing of the core with cosmic-ray, in a throw-away copy of the tree.

``scripts/mutation`` runs this module. It copies the tree (minus ``.venv``, ``.git`` and caches) into the
run directory, so the mutants are seen by the Daphne and stdio subprocesses the tests start (they import
the copy's ``mcp_server``) and the working tree is never touched. For each module it lists every mutant
(``cosmic-ray init``); skips the mutants of type annotations (equivalent by construction: the modules use
``from __future__ import annotations``), the mutants cosmic-ray cannot apply or that do not compile, the
mutants triaged as equivalent in ``scripts/mutation_equivalents.json`` and, with ``--sample`` or
``--mutants``, all but the chosen ones; runs the module's targeted tests unmutated, to check they pass and
to set the per-mutant timeout; then runs them (``pytest -x``) once per mutant (``cosmic-ray exec``).

It prints per module: mutants, killed, survived, timed out, score (killed and timed out over tested), and
writes to the run directory ``report.md`` (every survivor: file, line, operator, diff), ``summary.json``,
``tested.json`` and ``survivors.json`` (for ``--mutants``). The modules of ``TARGETS`` hold over 2000 mutants
worth testing: a full run takes many hours on two cores, so it is not part of CI; ``--sample`` is for checks.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MODULES", "TARGETS", "annotation_spans", "main"]

ROOT = Path(__file__).resolve().parent.parent

NOT_THOUSAND = ["-k", "not thousand"]  # the 1000-cancel stress test alone takes ~25 s
TARGETS: dict[str, list[str]] = {
    "mcp_server/runtime/requests.py": [
        "tests/protocol/test_settlement.py",
        "tests/runtime/test_runtime.py",
        "tests/transports/test_exchange.py",
        "tests/ledger/test_backends.py",
    ],
    "mcp_server/protocol/settlement.py": [
        "tests/protocol/test_settlement.py",
        "tests/runtime/test_runtime.py",
    ],
    "mcp_server/protocol/guarantee.py": [
        "tests/protocol/test_guarantee.py",
        "tests/end_to_end/test_guarantee.py",
        "tests/registry/test_registry.py",
        "tests/end_to_end/registry/test_registry.py",
        *NOT_THOUSAND,
    ],
    "mcp_server/protocol/serving.py": [
        "tests/protocol/test_serving.py",
        "tests/runtime/test_runtime.py",
        "tests/end_to_end/test_guarantee.py",
        "tests/end_to_end/transports/test_stdio.py",
        *NOT_THOUSAND,
    ],
    "mcp_server/core/asgi_request.py": ["tests/core/test_asgi_request.py", "tests/auth/test_units.py"],
    "mcp_server/protocol/dispatcher.py": [
        "tests/protocol/test_dispatcher.py",
        "tests/end_to_end/test_features.py",
        "tests/registry/test_registry.py",
        "tests/end_to_end/registry/test_registry.py",
    ],
    "mcp_server/ledger/writer.py": [
        "tests/ledger/test_writer.py",
        "tests/ledger/test_writer_faults.py",
        "tests/protocol/test_settlement.py",
    ],
    "mcp_server/stores/ledger/database.py": [
        "tests/ledger/test_writer.py",
        "tests/ledger/test_backends.py",
        "tests/ledger/test_insert_adapters.py",
    ],
    "mcp_server/stores/ledger/insert_plan.py": [
        "tests/ledger/test_insert_adapters.py",
        "tests/ledger/test_backends.py",
    ],
    "mcp_server/stores/ledger/cache.py": ["tests/ledger/test_writer.py", "tests/ledger/test_backends.py"],
    "mcp_server/runtime.py": ["tests/runtime/test_runtime.py", "tests/transports/test_exchange.py"],
    "mcp_server/transports/stdio.py": ["tests/end_to_end/transports/test_stdio.py"],
    "mcp_server/transports/exchange.py": [
        "tests/transports/test_exchange.py",
        "tests/runtime/test_runtime.py",
    ],
    "mcp_server/transports/resumable.py": [
        "tests/transports/test_resumable_streams.py",
        "tests/end_to_end/transports/test_resumable.py",
    ],
    "mcp_server/protocol/__init__.py": ["tests/protocol/test_v2026_07_28.py"],  # a docstring: no mutants
    "mcp_server/protocol/claims.py": ["tests/protocol/test_claims.py", "tests/protocol/test_write_claims.py"],
    "mcp_server/protocol/client_messages.py": [
        "tests/core/test_context.py",
        "tests/end_to_end/core/test_context.py",
        "tests/transports/test_exchange.py",
    ],
    "mcp_server/protocol/lifecycle.py": [
        "tests/protocol/test_lifecycle.py",
        "tests/protocol/test_v2026_07_28.py",
    ],
    "mcp_server/protocol/listen.py": [
        "tests/protocol/test_listen.py",
        "tests/end_to_end/transports/test_listen.py",
    ],
    "mcp_server/protocol/middleware.py": ["tests/end_to_end/protocol/test_middleware.py"],
    "mcp_server/protocol/v2026_07_28.py": [
        "tests/protocol/test_v2026_07_28.py",
        "tests/end_to_end/transports/test_v2026_07_28.py",
    ],
    "mcp_server/protocol/outbound.py": [
        "tests/protocol/test_outbound.py",
        "tests/core/test_context.py",
        "tests/end_to_end/core/test_context.py",
        "tests/protocol/test_rounds.py",
    ],
    "mcp_server/protocol/pagination.py": [
        "tests/protocol/test_pagination.py",
        "tests/protocol/test_dispatcher.py",
    ],
    "mcp_server/protocol/peer.py": [
        "tests/core/test_context.py",
        "tests/end_to_end/core/test_context.py",
        "tests/protocol/test_rounds.py",
    ],
    "mcp_server/protocol/rounds.py": [
        "tests/protocol/test_rounds.py",
        "tests/protocol/test_rounds_ledger.py",
    ],
    "mcp_server/protocol/tasks.py": [
        "tests/runtime/test_tasks.py",
        "tests/runtime/test_task_bounds.py",
        "tests/end_to_end/protocol/test_tasks.py",
    ],
    "mcp_server/protocol/task_bounds.py": [
        "tests/runtime/test_task_bounds.py",
        "tests/end_to_end/protocol/test_tasks.py",
    ],
    "mcp_server/protocol/task_methods.py": [
        "tests/end_to_end/protocol/test_tasks.py",
        "tests/runtime/test_tasks.py",
        # visible_tasks
        "tests/end_to_end/auth/test_listen_access.py::test_a_listener_gets_none_of_another_users_tasks",
    ],
    "mcp_server/protocol/credentials.py": [
        "tests/protocol/test_credentials.py",
        "tests/end_to_end/auth/test_stream_revocation.py",
    ],
}
"""The targeted pytest arguments of each module (test files that do not exist are left out)."""

DEFAULT_MODULES = list(TARGETS)
FALLBACK_TESTS = [
    "tests/ledger/test_backends.py",
    "tests/end_to_end/test_guarantee.py",
    "tests/end_to_end/transports/test_stdio.py",
    *NOT_THOUSAND,
]
"""For a module with no entry in ``TARGETS`` and no ``--tests``: the end-to-end core of the suite."""

PYTEST_FLAGS = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
COPY_IGNORE = shutil.ignore_patterns(
    ".venv*", ".git", ".conformance", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache",
    ".hypothesis", ".coverage*", "*.egg-info", "mutants",
)  # fmt: skip
SKIP_ANNOTATION = "equivalent: inside a type annotation (postponed evaluation, never run)"
SKIP_LISTED = "listed equivalent: "
EQUIVALENTS = ROOT / "scripts" / "mutation_equivalents.json"
"""Mutants triaged as equivalent, each with its reason: skipped by later runs and shown in the report."""
SKIP_INVALID = "invalid: cosmic-ray cannot apply it, or the mutant does not compile (a bare * mutated)"
SKIP_SAMPLE = "not in the sample"
TESTED = ("killed", "survived", "timeout")


# -- which mutants are equivalent by construction -----------------------------------------------------------


def _char_column(lines: Sequence[str], line: int, byte_col: int) -> int:
    """``ast`` columns count UTF-8 bytes; cosmic-ray's (parso's) count characters."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Spans ``((line, col), (end_line, end_col))`` of the annotations Python never evaluates in ``source``.

    Empty unless the module has ``from __future__ import annotations``: without it, annotations run at
    import and their mutants are not equivalent.
    """
    tree = ast.parse(source)
    postponed = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )
    if not postponed:
        return []
    lines = source.splitlines()
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            found += [a.annotation for a in every if a.annotation is not None]
            if node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    spans = []
    for expr in found:
        assert expr.end_lineno is not None
        assert expr.end_col_offset is not None
        start = (expr.lineno, _char_column(lines, expr.lineno, expr.col_offset))
        end = (expr.end_lineno, _char_column(lines, expr.end_lineno, expr.end_col_offset))
        spans.append((start, end))
    return spans


def _compiles(source: str, mutation: dict[str, Any]) -> bool:
    """Whether the mutant is valid Python (cosmic-ray turns ``def f(a, *, b)`` into ``def f(a, +, b)``)."""
    mutating = importlib.import_module("cosmic_ray.mutating")
    plugins = importlib.import_module("cosmic_ray.plugins")
    operator = plugins.get_operator(mutation["operator_name"])(**mutation.get("operator_args", {}))
    try:
        mutated = mutating.mutate_code(source, operator, mutation["occurrence"])
    except Exception:  # cosmic-ray cannot apply it (its ExceptionReplacer fails on ``except (A, b.C)``)
        return False
    if mutated is None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(mutated, "<mutant>", "exec")
    except SyntaxError:
        return False
    return True


def _inside(spans: Iterable[tuple[tuple[int, int], tuple[int, int]]], start: Sequence[int]) -> bool:
    point = (int(start[0]), int(start[1]))
    return any(begin <= point < end for begin, end in spans)


# -- running cosmic-ray ------------------------------------------------------------------------------------


@dataclass
class Mutant:
    """One mutant and what became of it."""

    module: str
    line: int
    column: int
    operator: str
    occurrence: int
    function: str | None
    outcome: str  # killed, survived, timeout, incompetent, skipped, pending
    reason: str = ""
    diff: str = ""

    @property
    def key(self) -> tuple[int, int, str, int]:
        return self.line, self.column, self.operator, self.occurrence


@dataclass
class ModuleResult:
    """The counts of one module's run."""

    module: str
    tests: list[str]
    baseline_seconds: float = 0.0
    timeout: float = 0.0
    mutants: int = 0
    equivalent_by_construction: int = 0
    listed_equivalent: int = 0
    invalid: int = 0
    not_sampled: int = 0
    killed: int = 0
    survived: int = 0
    timed_out: int = 0
    incompetent: int = 0
    pending: int = 0
    seconds: float = 0.0
    error: str = ""
    survivors: list[Mutant] = field(default_factory=list)
    mutants_run: list[Mutant] = field(default_factory=list, repr=False)
    equivalents: list[Mutant] = field(default_factory=list, repr=False)

    @property
    def tested(self) -> int:
        return self.killed + self.survived + self.timed_out

    @property
    def score(self) -> float | None:
        return (self.killed + self.timed_out) / self.tested if self.tested else None


def _cosmic_ray(python: str, *args: str, cwd: Path, log: Path | None = None) -> None:
    command = [python, "-m", "cosmic_ray.cli", *args]
    if log is None:
        subprocess.run(command, cwd=cwd, check=True)
        return
    with log.open("ab") as out:
        subprocess.run(command, cwd=cwd, check=True, stdout=out, stderr=subprocess.STDOUT)


def _dump(python: str, session: Path, cwd: Path) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    output = subprocess.run(
        [python, "-m", "cosmic_ray.cli", "dump", str(session)],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [tuple(json.loads(line)) for line in output.splitlines() if line.strip()]


def _mark_skipped(session: Path, reasons: dict[str, str]) -> None:
    """Record ``job id -> reason`` as skipped results, so ``cosmic-ray exec`` leaves them out."""
    if not reasons:
        return
    work_db = importlib.import_module("cosmic_ray.work_db")
    work_item = importlib.import_module("cosmic_ray.work_item")
    with work_db.use_db(str(session), work_db.WorkDB.Mode.open) as db:
        for job_id, reason in reasons.items():
            result = work_item.WorkResult(output=reason, worker_outcome=work_item.WorkerOutcome.SKIPPED)
            db.set_result(job_id, result)


def _identity(mutation: dict[str, Any]) -> tuple[int, int, str, int]:
    """What names a mutant across runs on the same source: position, operator, occurrence."""
    line, column = mutation["start_pos"]
    return int(line), int(column), str(mutation["operator_name"]), int(mutation["occurrence"])


def load_equivalents(path: Path | None, module: str) -> dict[tuple[str, str], str]:
    """``(source line, operator) -> reason`` of the mutants of ``module`` listed as equivalent in ``path``.

    The file is a JSON list of ``{"module", "line" (the mutated line, stripped), "operators", "reason"}``;
    lines are matched by text, so the list survives edits elsewhere in the module.
    """
    if path is None or not path.is_file():
        return {}
    listed: dict[tuple[str, str], str] = {}
    for entry in json.loads(path.read_text()):
        if entry["module"] == module:
            for operator in entry["operators"]:
                listed[(entry["line"].strip(), operator)] = str(entry["reason"])
    return listed


def _config(module: str, test_command: str, timeout: float) -> str:
    return "\n".join(
        [
            "[cosmic-ray]",
            f"module-path = {json.dumps(module)}",
            f"timeout = {timeout:.1f}",
            "excluded-modules = []",
            f"test-command = {json.dumps(test_command)}",
            "",
            "[cosmic-ray.distributor]",
            'name = "local"',
            "",
        ]
    )


def _outcome(result: dict[str, Any] | None) -> str:
    if result is None:
        return "pending"
    if result.get("worker_outcome") == "skipped":
        return "skipped"
    if result.get("worker_outcome") != "normal" or result.get("test_outcome") == "incompetent":
        return "incompetent"
    if result.get("test_outcome") == "killed":
        return "timeout" if result.get("output") == "timeout" else "killed"
    return "survived"


def run_module(
    module: str, tests: list[str], args: argparse.Namespace, tree: Path, run_dir: Path
) -> ModuleResult:
    """Mutate one module and run its targeted tests against each mutant."""
    result = ModuleResult(module=module, tests=tests)
    slug = module.replace("/", ".").removesuffix(".py")
    session, config, log = (run_dir / f"{slug}{ext}" for ext in (".sqlite", ".toml", ".log"))
    python = args.python
    target = tree / module
    if not target.is_file():
        result.error = f"no such module: {module}"
        return result
    test_command = shlex.join([python, "-m", "pytest", *PYTEST_FLAGS, *tests])
    started = time.monotonic()
    if args.report_only:
        if not session.exists():
            result.error = "no session to report on"
            return result
        return collect(result, session, python, tree, started)
    original = (args.source / module).read_bytes()
    if target.read_bytes() != original:  # a resumed run that was stopped while a mutant was applied
        target.write_bytes(original)
    return mutate(result, session, config, log, original, test_command, args, tree, run_dir)


def mutate(
    result: ModuleResult,
    session: Path,
    config: Path,
    log: Path,
    original: bytes,
    test_command: str,
    args: argparse.Namespace,
    tree: Path,
    run_dir: Path,
) -> ModuleResult:
    """Baseline, list the mutants, skip the equivalent and unsampled ones, run the tests on the rest."""
    module, python, target = result.module, args.python, tree / result.module
    slug = session.stem
    started = time.monotonic()

    # Baseline: the targeted tests pass unmutated; their time sets the per-mutant timeout.
    print(f"== {module}: baseline ({test_command})", flush=True)
    began = time.monotonic()
    baseline = subprocess.run(shlex.split(test_command), cwd=tree, capture_output=True, text=True)
    result.baseline_seconds = time.monotonic() - began
    if baseline.returncode != 0:
        (run_dir / f"{slug}.baseline.txt").write_text(baseline.stdout + baseline.stderr)
        result.error = f"the targeted tests fail unmutated (see {slug}.baseline.txt)"
        return result
    result.timeout = args.timeout or max(args.min_timeout, args.timeout_factor * result.baseline_seconds)
    config.write_text(_config(module, test_command, result.timeout))

    if not session.exists():
        _cosmic_ray(python, "init", str(config), str(session), cwd=tree, log=log)
        source = original.decode("utf-8")
        spans = annotation_spans(source)
        skipped: dict[str, str] = {}
        candidates: dict[str, tuple[int, int, str, int]] = {}
        listed = load_equivalents(args.equivalents, module)
        lines = source.splitlines()
        for item, _ in _dump(python, session, tree):
            mutation = item["mutations"][0]
            text = lines[int(mutation["start_pos"][0]) - 1].strip()
            reason = listed.get((text, str(mutation["operator_name"])))
            if _inside(spans, mutation["start_pos"]):
                skipped[item["job_id"]] = SKIP_ANNOTATION
            elif reason is not None:
                skipped[item["job_id"]] = SKIP_LISTED + reason
            elif not _compiles(source, mutation):
                skipped[item["job_id"]] = SKIP_INVALID
            else:
                candidates[item["job_id"]] = _identity(mutation)
        if args.mutants is not None:
            wanted = {tuple(key) for key in json.loads(args.mutants.read_text()).get(module, [])}
            skipped.update({job: SKIP_SAMPLE for job, key in candidates.items() if key not in wanted})
            candidates = {job: key for job, key in candidates.items() if key in wanted}
        size = sample_size(args.sample, module)
        if size is not None and size < len(candidates):
            ordered = sorted(candidates, key=candidates.__getitem__)  # the same sample for the same source
            chosen = set(random.Random(f"{args.seed}:{module}").sample(ordered, size))
            skipped.update({job: SKIP_SAMPLE for job in candidates if job not in chosen})
        _mark_skipped(session, skipped)

    print(f"== {module}: mutating (timeout {result.timeout:.0f}s per mutant; log {log})", flush=True)
    try:
        _cosmic_ray(python, "exec", str(config), str(session), cwd=tree, log=log)
    finally:
        if target.read_bytes() != original:  # cosmic-ray restores each file; make sure of it
            target.write_bytes(original)
            result.error = "the module was left mutated (restored)"
    return collect(result, session, python, tree, started)


def collect(result: ModuleResult, session: Path, python: str, tree: Path, started: float) -> ModuleResult:
    """Read the outcome of every mutant of ``session`` into ``result``."""
    module = result.module
    for item, outcome in _dump(python, session, tree):
        mutation = item["mutations"][0]
        kind = _outcome(outcome)
        mutant = Mutant(
            module=module,
            line=int(mutation["start_pos"][0]),
            column=int(mutation["start_pos"][1]),
            operator=str(mutation["operator_name"]),
            occurrence=int(mutation["occurrence"]),
            function=mutation.get("definition_name"),
            outcome=kind,
            reason=str((outcome or {}).get("output") or "") if kind == "skipped" else "",
            diff=str((outcome or {}).get("diff") or ""),
        )
        result.mutants += 1
        if kind in TESTED:
            result.mutants_run.append(mutant)
        if kind == "skipped":
            if mutant.reason == SKIP_ANNOTATION:
                result.equivalent_by_construction += 1
            elif mutant.reason.startswith(SKIP_LISTED):
                result.listed_equivalent += 1
                result.equivalents.append(mutant)
            elif mutant.reason.startswith(SKIP_INVALID.split(":")[0]):
                result.invalid += 1
            else:
                result.not_sampled += 1
        elif kind == "killed":
            result.killed += 1
        elif kind == "timeout":
            result.timed_out += 1
        elif kind == "incompetent":
            result.incompetent += 1
        elif kind == "pending":
            result.pending += 1
        else:
            result.survived += 1
            result.survivors.append(mutant)
    result.survivors.sort(key=lambda m: (m.line, m.column, m.operator))
    result.seconds = time.monotonic() - started
    return result


# -- the report ----------------------------------------------------------------------------------------------


def _percent(score: float | None) -> str:
    return "-" if score is None else f"{100 * score:.1f}%"


def table(results: Sequence[ModuleResult]) -> str:
    """The per-module counts, as a Markdown table."""
    columns = [
        "module",
        "mutants",
        "in annotations",
        "listed equivalent",
        "invalid",
        "not sampled",
        "tested",
        "killed",
        "survived",
    ]
    columns += ["timed out", "incompetent", "score"]
    rows = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in results:
        counts = [r.mutants, r.equivalent_by_construction, r.listed_equivalent, r.invalid, r.not_sampled]
        counts += [r.tested, r.killed, r.survived]
        counts += [r.timed_out, r.incompetent]
        cells = " | ".join(str(c) for c in counts)
        note = f" ({r.error})" if r.error else ""
        rows.append(f"| {r.module}{note} | {cells} | {_percent(r.score)} |")
    tested = sum(r.tested for r in results)
    caught = sum(r.killed + r.timed_out for r in results)
    names = [
        "mutants",
        "equivalent_by_construction",
        "listed_equivalent",
        "invalid",
        "not_sampled",
        "tested",
        "killed",
        "survived",
    ]
    names += ["timed_out", "incompetent"]
    totals = [sum(getattr(r, name) for r in results) for name in names]
    cells = " | ".join(str(c) for c in totals)
    rows.append(f"| **all** | {cells} | {_percent(caught / tested if tested else None)} |")
    return "\n".join(rows)


def write_report(results: Sequence[ModuleResult], run_dir: Path, argv: Sequence[str]) -> Path:
    """``report.md`` (counts, then every survivor with its diff) and ``summary.json``."""
    lines = ["# Mutation testing report", "", f"Command: `scripts/mutation {shlex.join(argv)}`", ""]
    lines += [table(results), ""]
    for r in results:
        lines += [f"## {r.module}", "", f"Tests: `pytest {shlex.join([*PYTEST_FLAGS, *r.tests])}`"]
        lines += [f"Baseline {r.baseline_seconds:.1f}s, timeout {r.timeout:.0f}s, run {r.seconds:.0f}s.", ""]
        for m in r.survivors:
            lines += [f"### {m.module}:{m.line}:{m.column} {m.operator} (in `{m.function}`)", "", "```diff"]
            lines += [*m.diff.splitlines()[1:], "```", ""]
        if r.equivalents:
            lines += [f"Skipped as listed equivalent ({EQUIVALENTS.name}):", ""]
            lines += [
                f"- line {m.line} {m.operator}: {m.reason.removeprefix(SKIP_LISTED)}" for m in r.equivalents
            ]
            lines += [""]
    report = run_dir / "report.md"
    report.write_text("\n".join(lines))
    summary = [
        {
            **{k: v for k, v in asdict(r).items() if k not in ("mutants_run", "equivalents")},
            "tested": r.tested,
            "score": r.score,
        }
        for r in results
    ]
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    for name, kinds in (("tested", TESTED), ("survivors", ("survived",))):
        listing = {r.module: [m.key for m in r.mutants_run if m.outcome in kinds] for r in results}
        (run_dir / f"{name}.json").write_text(json.dumps(listing, indent=1))
    return report


# -- the command line ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/mutation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--modules",
        nargs="+",
        default=DEFAULT_MODULES,
        metavar="PATH",
        help="modules to mutate (default: the core)",
    )
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="MODULE=PYTEST-ARGS",
        help="targeted pytest arguments for a module, e.g. "
        "'mcp_server/protocol/new.py=tests/end_to_end/test_guarantee.py -k deadline' (repeatable)",
    )
    parser.add_argument(
        "--sample",
        action="append",
        default=[],
        metavar="N|MODULE=N",
        help="test N random mutants per module, or of one module (repeatable; default: every mutant)",
    )
    parser.add_argument("--seed", default="0", help="seed of the sample (default 0)")
    parser.add_argument(
        "--mutants",
        type=Path,
        metavar="JSON",
        help="test only these mutants: the tested.json or survivors.json of an earlier run",
    )
    parser.add_argument("--timeout", type=float, help="seconds per mutant (default: from the baseline)")
    parser.add_argument("--timeout-factor", type=float, default=4.0, help="timeout = factor x baseline")
    parser.add_argument("--min-timeout", type=float, default=30.0, help="the least per-mutant timeout")
    parser.add_argument(
        "--run-dir",
        type=Path,
        help="where the copy, sessions and report go (default: a temp dir); an existing one is resumed",
    )
    parser.add_argument("--source", type=Path, default=ROOT, help="the tree to copy (default: this checkout)")
    parser.add_argument(
        "--python", default=sys.executable, help="the venv's python (needs cosmic-ray, pytest)"
    )
    parser.add_argument(
        "--equivalents",
        type=Path,
        default=EQUIVALENTS,
        metavar="JSON",
        help=f"mutants triaged as equivalent, skipped (default scripts/{EQUIVALENTS.name}; '' for none)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the report of --run-dir without running anything"
    )
    parser.add_argument("--nice", type=int, default=10, help="niceness of the run (default 10)")
    return parser.parse_args(argv)


def copy_tree(source: Path, tree: Path, python: str) -> None:
    """A private copy of the tree; checks that its tests import the copy's ``mcp_server``."""
    if not tree.exists():
        shutil.copytree(source, tree, ignore=COPY_IGNORE, symlinks=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = subprocess.run(
        [python, "-c", "import mcp_server; print(mcp_server.__file__)"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the copy imports mcp_server from {where}, not {tree}: mutants would be unseen")


def targets(args: argparse.Namespace, tree: Path) -> dict[str, list[str]]:
    """Module -> pytest arguments, test files missing from the tree left out."""
    chosen = {module: list(TARGETS.get(module, FALLBACK_TESTS)) for module in args.modules}
    for spec in args.tests:
        module, _, tests = spec.partition("=")
        if module not in chosen:
            raise SystemExit(f"--tests names {module}, which is not in --modules")
        chosen[module] = shlex.split(tests)
    for module, tests in chosen.items():
        if module not in TARGETS and not any(module == s.partition("=")[0] for s in args.tests):
            fallback = shlex.join(FALLBACK_TESTS)
            print(f"warning: no targeted tests for {module}; using {fallback}", file=sys.stderr)
        missing = [t for t in tests if t.startswith("tests/") and not (tree / t.split("::")[0]).exists()]
        for test in missing:
            print(f"note: {test} is not in the tree; left out for {module}", file=sys.stderr)
        chosen[module] = [t for t in tests if t not in missing]
    return chosen


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def stop_strays(tree: Path) -> int:
    """Kill what the interrupted run left working in ``tree``: the test command cosmic-ray started in a
    session of its own, and the Daphne and stdio servers it started (all run with ``tree`` as their cwd).
    """
    stopped = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cwd = (proc / "cwd").resolve(strict=True)
        except OSError:
            continue
        if cwd == tree or tree in cwd.parents:
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)
                stopped += 1
    return stopped


def sample_size(samples: Sequence[str], module: str) -> int | None:
    """The sample size ``--sample`` gives ``module`` (``MODULE=N`` wins over a bare ``N``)."""
    size: int | None = None
    for spec in samples:
        name, _, count = spec.rpartition("=")
        if name == module:
            return int(count)
        if not name:
            size = int(count)
    return size


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.nice:
        os.nice(args.nice)
    run_dir = (args.run_dir or Path(tempfile.mkdtemp(prefix="mutation-"))).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    tree = run_dir / "tree"
    copy_tree(args.source.resolve(), tree, args.python)
    os.environ["CI"] = "true"  # a missing service fails the tests loudly, never skips them
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    print(f"run directory: {run_dir}", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    results: list[ModuleResult] = []
    try:
        for module, tests in targets(args, tree).items():
            result = run_module(module, tests, args, tree, run_dir)
            results.append(result)
            print(table([result]).splitlines()[-2], flush=True)
            write_report(results, run_dir, argv)
    except KeyboardInterrupt:
        stopped = stop_strays(tree)
        print(
            f"interrupted: stopped {stopped} test processes; resume with --run-dir {run_dir}", file=sys.stderr
        )
        return 130
    report = write_report(results, run_dir, argv)
    print(table(results))
    print(f"survivors: {report}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
