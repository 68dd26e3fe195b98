"""The admin of a real running server: users made with ``manage.py``, a signed-in HTTP client, its actions."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx

from tests.support.live import ROOT, LiveServer, run_shell

PASSWORD = "operator-password"
"""The password of every user these helpers create."""

_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def manage(server: LiveServer, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py`` against the server's database and settings."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**server.env, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def shell(server: LiveServer, code: str) -> subprocess.CompletedProcess[str]:
    """``manage.py shell -c code`` against the server's database and settings
    (``tests.support.live.run_shell``); never raises on a failed snippet."""
    return run_shell(server.env, code, check=False)


def create_superuser(server: LiveServer, username: str = "admin") -> str:
    """A superuser with :data:`PASSWORD` in the server's database (kept if it is there); returns its
    username."""
    code = (
        "from django.contrib.auth import get_user_model as g;"
        f"g().objects.filter(username={username!r}).exists() or g().objects.create_superuser("
        f"{username!r}, {username + '@example.com'!r}, {PASSWORD!r})"
    )
    shell(server, code).check_returncode()
    return username


def database_file(server: LiveServer) -> Path:
    url = server.env["DATABASE_URL"]
    assert url.startswith("sqlite:///"), url
    return Path(url.removeprefix("sqlite:///"))


def query(server: LiveServer, sql: str, *params: Any) -> list[dict[str, Any]]:
    """Rows of the server's SQLite database."""
    with closing(sqlite3.connect(database_file(server), timeout=30)) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(sql, params)]


def csrf_token(html: str) -> str:
    found = _CSRF.search(html)
    assert found is not None, "no CSRF token on the page"
    return found.group(1)


async def admin_client(base: str, username: str = "admin") -> httpx.AsyncClient:
    """An HTTP client signed in to the admin at ``base`` (close it when done)."""
    client = httpx.AsyncClient(base_url=base, timeout=30.0, headers={"Referer": f"{base}/admin/"})
    page = await client.get("/admin/login/")
    response = await client.post(
        "/admin/login/",
        data={
            "username": username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": csrf_token(page.text),
            "next": "/admin/",
        },
    )
    assert response.status_code == 302, response.text
    return client


async def run_action(
    client: httpx.AsyncClient, model: str, action: str, pks: Iterable[Any]
) -> httpx.Response:
    """Select ``pks`` on ``model``'s change list and run ``action``, as the form does."""
    changelist = f"/admin/mcp_server/{model}/"
    page = await client.get(changelist)
    assert page.status_code == 200, page.text
    data: dict[str, Any] = {
        "action": action,
        "_selected_action": [str(pk) for pk in pks],
        "index": "0",
        "csrfmiddlewaretoken": csrf_token(page.text),
    }
    return await client.post(changelist, data=data)


def admin_log(server: LiveServer, object_id: Any) -> list[dict[str, Any]]:
    """The admin log entries about one object (any model)."""
    return query(server, "SELECT * FROM django_admin_log WHERE object_id = ?", str(object_id))


def pending_rows(server: LiveServer) -> list[dict[str, Any]]:
    """The ledger's pending rows."""
    return query(server, "SELECT * FROM mcp_server_ledgerentry WHERE state = 'pending' ORDER BY id")
