"""The official MCP conformance suite, both pinned versions, against the demo site in every response mode.

``scripts/conformance --install-only`` installs the suites and Node 22 into ``.conformance/`` on first use
(npm needed); :func:`scripts.conformance_report.run_matrix` starts the server and judges the checks.
Clean means: no failure outside the json-mode allowlist, no warning at all, no stale allowlist entry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.conformance_report import (
    ALLOWED_FAILURES,
    MODES,
    ROOT,
    SUITE_VERSIONS,
    format_table,
    run_matrix,
    suite_paths,
)

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


@pytest.mark.parametrize("mode", MODES)
def test_conformance_suite(mode: str, installed_suites: None, tmp_path: Path) -> None:
    results = run_matrix([mode], SUITE_VERSIONS, tmp_path)
    report = "\n\n".join(format_table(r) for r in results)
    assert [r.version for r in results] == list(SUITE_VERSIONS)
    for result in results:
        assert result.scenarios, f"suite {result.version} produced no results\n{report}"
        assert not result.unexpected, f"unexpected in suite {result.version}, mode {mode}\n{report}"
        assert not result.stale, f"stale allowlist entries {result.stale}\n{report}"
        if mode != "json":
            assert not result.failures, report
            assert not result.warnings, report
        else:
            assert set(result.failures) == set(ALLOWED_FAILURES["json"]), report
