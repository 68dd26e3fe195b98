"""The workers' upkeep prunes the client registrations never used (the default upkeep hook of the app)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import httpx
import pytest

from tests.support.auth import shell
from tests.support.live import base_env, migrated_template, run_shell, start_server
from tests.support.oauth import ON
from tests.support.wait import wait_for

SETUP = """
from datetime import timedelta
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
def app(name, days):
    a = Application.objects.create(name=name, client_type='public', redirect_uris='http://127.0.0.1/cb',
        authorization_grant_type='authorization-code', registration_source=Application.RegistrationSource.DCR)
    Application.objects.filter(pk=a.pk).update(created=timezone.now() - timedelta(days=days))
    return a
app('old-unused', 2); app('new-unused', 0)
used = app('old-used', 2)
AccessToken.objects.create(application=used, token_checksum='0' * 64, scope='mcp',
    expires=timezone.now() + timedelta(hours=1))
"""

NAMES = (
    "from oauth2_provider.models import Application as A;"
    "print(sorted(A.objects.values_list('name', flat=True)))"
)


async def test_the_upkeep_prunes_unused_registrations(tmp_path: Path) -> None:
    database = tmp_path / "site.sqlite3"
    shutil.copy(migrated_template(tmp_path, **ON), database)
    site_env = {**ON, "DATABASE_URL": f"sqlite:///{database}"}
    # The registrations exist before the server starts: its upkeep's first round finds them.
    run_shell(base_env(database, **ON), SETUP)
    server = start_server(tmp_path, name="prune", **site_env)
    try:
        with httpx.Client(timeout=30) as http:
            assert (
                initialize_sync(http, server.url) == 401
            )  # an MCP request starts the runtime, and its upkeep

        async def pruned() -> str | None:
            names = await asyncio.to_thread(shell, server, NAMES)
            return names if "old-unused" not in names else None

        names = await wait_for(pruned, "the old unused registration to be pruned", within=30, every=0)
    finally:
        server.stop()
    assert "new-unused" in names  # younger than a day
    assert "old-used" in names  # holds a token


def initialize_sync(http: httpx.Client, url: str) -> int:
    done = http.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        headers={"Accept": "application/json, text/event-stream"},
    )
    return done.status_code


@pytest.mark.parametrize("hooks", [[], ["no.such.hook"]])
def test_upkeep_hooks_can_be_turned_off_and_are_checked(hooks: list[str]) -> None:
    from tests.support.live import manage_py_check

    env = base_env(Path("/dev/null"), {"UPKEEP_HOOKS": hooks}, **ON)
    done = manage_py_check(env)
    assert ("mcp_server.E041" in done.stdout + done.stderr) == bool(hooks)
