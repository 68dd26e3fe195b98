"""The official MCP conformance suite, both pinned versions and the 2026-07-28 requirements run, against the
demo site in every response mode.

``scripts/conformance --install-only`` installs the suites and Node 22 into ``.conformance/`` on first use
(npm needed); :func:`scripts.conformance_report.run_matrix` starts the server and judges the checks.
Clean means: no failure outside the json-mode allowlists, no warning at all, no stale allowlist entry; in
the 2026 run, the scenarios of features still being built elsewhere (``PENDING``) are not judged.
The suite's ``authorization`` command runs against the demo's own authorization server, the person's
sign-in and consent scripted (``scripts/conformance_authorization.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from scripts.conformance_authorization import SCENARIOS, allowed_warnings, run_authorization
from scripts.conformance_report import (
    ALLOWED_FAILURES,
    MODES,
    REQUIREMENTS_RUN,
    ROOT,
    RUNS,
    SUITE_VERSIONS,
    RunResult,
    format_table,
    run_matrix,
    suite_paths,
)
from tests.support.oauth import start_oauth_server

pytestmark = pytest.mark.conformance


@pytest.fixture(scope="module")
def installed_suites() -> None:
    """Install the suite versions (once; later runs find them in ``.conformance/``)."""
    if all(suite_paths(v)[1].exists() for v in SUITE_VERSIONS):
        return
    if shutil.which("npm") is None:
        problem = "npm is not on PATH: cannot install @modelcontextprotocol/conformance and Node 22"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {problem} (.ci/run installs Debian's npm)")
        pytest.skip(problem)
    subprocess.run(
        [str(ROOT / "scripts" / "conformance"), "--install-only"], cwd=ROOT, check=True, timeout=900
    )


@pytest.fixture(scope="module")
def matrix(installed_suites: None, tmp_path_factory: pytest.TempPathFactory) -> list[RunResult]:
    """Every run against every mode, side by side (once: each mode's test judges its own)."""
    return run_matrix(MODES, tuple(RUNS), tmp_path_factory.mktemp("conformance"))


@pytest.mark.parametrize("mode", MODES)
def test_conformance_suite(mode: str, matrix: list[RunResult]) -> None:
    results = [r for r in matrix if r.mode == mode]
    report = "\n\n".join(format_table(r) for r in results)
    assert [r.version for r in results] == list(RUNS)
    for result in results:
        assert result.scenarios, f"suite {result.version} produced no results\n{report}"
        assert not result.unexpected, f"unexpected in suite {result.version}, mode {mode}\n{report}"
        assert not result.stale, f"stale allowlist entries {result.stale}\n{report}"
        judged_failures = set(result.failures) - set(result.pending)
        if mode != "json":
            assert not judged_failures, report
            assert not set(result.warnings) - set(result.pending), report
        else:
            assert judged_failures == set(ALLOWED_FAILURES[result.pin]), report
    assert REQUIREMENTS_RUN in {r.version for r in results}


@pytest.mark.parametrize("mode", ["auto", "sse"])
def test_sse_polling_scenario(mode: str, installed_suites: None, tmp_path: Path) -> None:
    """The suite's pending scenario ``server-sse-polling`` (SEP-1699): a priming event first, a ``retry``
    field, and the tool's result after the client reconnects with ``Last-Event-ID`` (the demo's
    ``test_reconnection`` closes its stream before it answers). Every check passes; none warns."""
    (result,) = run_matrix(
        [mode], ("0.2.0-alpha.12",), tmp_path, extra_args=["--scenario", "server-sse-polling"]
    )
    report = format_table(result)
    assert [s.scenario for s in result.scenarios] == ["server-sse-polling"], report
    assert not result.failures, report
    assert not result.warnings, report
    assert result.scenarios[0].passed >= 3, report


async def test_the_authorization_command_passes_against_the_demos_authorization_server(
    installed_suites: None, tmp_path: Path
) -> None:
    """``conformance authorization`` (0.2.0-alpha.12): the RFC 8414 metadata scenario, then the authorization
    code grant, whose authorize URL a person (alice, signing in at the site's login) allows on the consent
    page. Every check passes, the CIMD one too (the metadata advertises it), and there is no warning."""
    site = start_oauth_server(tmp_path / "site")
    try:
        run = await run_authorization(site, tmp_path / "results")
    finally:
        site.stop()
    report = f"{run.table()}\n\n{run.output}"
    counts = {s.scenario: s for s in run.scenarios}
    assert sorted(counts) == sorted(SCENARIOS), report
    cimd = run.metadata.get("client_id_metadata_document_supported") is True  # its own check when advertised
    assert cimd, report  # the demo advertises CIMD (mcp_server.oauth.defaults)
    assert counts["authorization-server-metadata-endpoint"].passed == 2, report
    assert counts["authorization-code-grant"].passed == 1, report  # code, state, iss, token response
    assert not run.failures, report
    assert sorted(run.warnings) == allowed_warnings(run.metadata), report
    answer = parse_qs(urlsplit(run.callback).query)  # where the browser went back to the suite
    assert set(answer) == {"code", "state", "iss"}, report
    assert answer["iss"] == [site.base], report
    assert run.returncode == 0, report
    assert run.ok, report
