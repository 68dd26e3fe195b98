"""A test file run again, in a pytest process of its own, on PostgreSQL (and Redis): the tests of a file use
this process's database (SQLite by default); run there too, they meet PostgreSQL's rules (what it refuses,
how it returns ids). The file calls :func:`rerun_on_postgresql` from one test of its own, which the run
there skips (:data:`not_in_rerun`)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

from .live import POSTGRES_URL, REDIS_URL, ROOT, redis_namespace, require_services

__all__ = ["INNER", "not_in_rerun", "rerun_on_postgresql"]

INNER = "MCP_TEST_RERUN_INNER"
"""Set in the environment of the run on PostgreSQL."""

not_in_rerun = pytest.mark.skipif(
    bool(os.environ.get(INNER)) or "postgresql" in settings.DATABASES["default"]["ENGINE"],
    reason="this process runs on PostgreSQL already",
)
"""The mark of the test that calls :func:`rerun_on_postgresql` (it would call itself again there)."""


def rerun_on_postgresql(path: str) -> None:
    """Run the test file ``path`` on a fresh PostgreSQL database (pytest-django creates ``test_<name>``) and a
    Redis namespace of its own; fails unless it passes with only the calling test skipped. Skips (under CI:
    fails) without the services."""
    require_services()
    import psycopg
    from psycopg import sql

    name = f"mcp_rerun_{secrets.token_hex(4)}"
    try:
        with redis_namespace() as prefix:
            env = {
                **os.environ,
                INNER: "1",
                "DATABASE_URL": f"{POSTGRES_URL}/{name}",
                "REDIS_URL": REDIS_URL,
                "MCP_TEST_REDIS_PREFIX": prefix,
            }
            run = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
    finally:  # its own teardown cannot drop it while a writer's connection lingers
        with psycopg.connect(f"{POSTGRES_URL}/postgres", autocommit=True) as admin:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            admin.execute(drop.format(sql.Identifier(f"test_{name}")))
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-2000:]
    assert " passed" in run.stdout  # it ran
    assert "1 skipped" in run.stdout  # and skipped only the caller
