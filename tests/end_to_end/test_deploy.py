"""The documented production recipe (``docs/howto/deploy.md``), run as written:
``uvicorn <site>.asgi:application --workers 2`` on PostgreSQL and Redis, static files through WhiteNoise
after ``collectstatic``, ``check --deploy`` clean.

The demo site's production settings (``project/production.py``, the documented *Deploying* block) run behind
an imagined TLS proxy: requests carry ``X-Forwarded-Proto: https`` as the proxy would set it. Two worker
processes share one listening socket and nothing routes a session to "its" worker: the ledger shows requests
of one session (and 2026-07-28 requests) served by both. The admin's live page loads its script and styles
and its WebSocket answers, as an operator's browser would need.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import psycopg
import pytest
import websockets
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.live import (
    ROOT,
    free_port,
    postgres_database,
    require_services,
    stop_process,
    wait_for_port,
)
from tests.support.stores import throwaway_redis
from tests.support.wait import wait_for

DEPLOY_COMMAND = "uvicorn mysite.asgi:application --workers 2 --host 127.0.0.1 --port 8000"
"""The documented production command line (``docs/howto/deploy.md``), ``mysite`` and the port replaced."""


def test_the_command_is_the_documented_one() -> None:
    deploying = (ROOT / "docs" / "howto" / "deploy.md").read_text()
    assert f"   {DEPLOY_COMMAND}\n" in deploying


PASSWORD = "deploy-operator-password"
PROXY = {"X-Forwarded-Proto": "https"}
"""What the TLS-terminating reverse proxy adds to every request it passes on."""


@dataclass
class Deployed:
    base: str
    env: dict[str, str]
    database: str
    log_path: Path

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def production_env(database: str, redis: str, static_root: Path) -> dict[str, str]:
    """A production shell: the production settings, the stores, a real secret; none of the tests' settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG"}
        and not k.startswith("MCP_TEST")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.production",
        DATABASE_URL=database,
        REDIS_URL=redis,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DJANGO_STATIC_ROOT=str(static_root),
        PYTHONPATH=str(ROOT),  # this checkout, should another be installed
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def command_line(port: int) -> list[str]:
    """The documented command for the demo site on ``port``; ``uvicorn`` from this environment's bin."""
    argv = shlex.split(DEPLOY_COMMAND.replace("mysite.asgi", "project.asgi").replace("8000", str(port)))
    argv[0] = str(Path(sys.executable).parent / argv[0])
    return argv


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    require_services()
    directory = tmp_path_factory.mktemp("deploy")
    with throwaway_redis() as redis, postgres_database() as database:
        env = production_env(database, redis.url(), directory / "static")
        manage(env, "migrate", "--noinput", "-v0")
        manage(env, "collectstatic", "--noinput", "-v0")
        assert "System check identified no issues" in manage(
            env, "check", "--deploy", "--fail-level", "WARNING"
        )
        manage(
            {**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
            "createsuperuser",
            "--noinput",
            "--username",
            "operator",
            "--email",
            "operator@example.com",
        )
        port = free_port()
        log_path = directory / "uvicorn.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(command_line(port), cwd=ROOT, env=env, stdout=log, stderr=log)
        try:
            try:
                wait_for_port(port, process)
            except Exception:
                raise RuntimeError(f"uvicorn did not start:\n{log_path.read_text()}") from None
            yield Deployed(f"http://127.0.0.1:{port}", env, database, log_path)
        finally:
            stop_process(process)


def ledger(database: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(database) as connection:
        return list(connection.execute(sql, params).fetchall())


def fresh_connections() -> httpx2.AsyncClient:
    """The official client's HTTP client, opening a new connection for every request (as requests from many
    clients through a proxy do): which worker accepts each one is up to the kernel."""
    return httpx2.AsyncClient(
        headers=PROXY,
        timeout=httpx2.Timeout(30, read=300),
        limits=httpx2.Limits(max_keepalive_connections=0),
    )


def pids(workers: set[str]) -> set[str]:
    """Worker ids are ``host:pid:suffix``."""
    return {worker.split(":")[-2] for worker in workers}


async def test_one_session_is_served_by_both_workers(deployed: Deployed) -> None:
    """A handshake-era session: its requests reach either process, and both serve them."""
    async with (
        fresh_connections() as http,
        Client(streamable_http_client(deployed.url, http_client=http), mode="legacy") as client,
    ):

        async def both_workers_served() -> bool:
            result = await client.call_tool("search_books", {"query": "Calvino"})
            assert not result.is_error
            rows = ledger(
                deployed.database,
                "select distinct worker from mcp_server_ledgerentry where method = 'tools/call'",
            )
            return len(pids({worker for (worker,) in rows})) >= 2

        await wait_for(both_workers_served, within=60)

    def settled() -> list[tuple[Any, ...]] | None:
        """The ledger is written behind the replies: the last answer's row may still read pending for
        a moment after the client has it. Wait for every row to settle (or fail naming the rows)."""
        rows = ledger(
            deployed.database,
            "select session_id, worker, state from mcp_server_ledgerentry where method = 'tools/call'",
        )
        return rows if {state for _, _, state in rows} == {"answered"} else None

    rows = await wait_for(lambda: asyncio.to_thread(settled), "every tools/call row answered", within=30)
    assert len({session for session, _, _ in rows}) == 1, rows  # one session ...
    assert None not in {session for session, _, _ in rows}
    assert len(pids({worker for _, worker, _ in rows})) == 2, rows  # ... served by both workers


async def test_2026_requests_are_served_by_both_workers(deployed: Deployed) -> None:
    """The official client's default mode (2026-07-28, stateless): any worker serves any request."""
    async with (
        fresh_connections() as http,
        Client(streamable_http_client(deployed.url, http_client=http)) as client,
    ):

        async def both_workers_served() -> bool:
            result = await client.call_tool("search_books", {"query": "Calvino"})
            assert not result.is_error
            rows = ledger(
                deployed.database,
                "select distinct worker from mcp_server_ledgerentry"
                " where protocol_version = '2026-07-28' and method = 'tools/call'",
            )
            return len(pids({worker for (worker,) in rows})) >= 2

        await wait_for(both_workers_served, within=60)
    log = deployed.log()
    assert '/mcp HTTP/1.1" 200' in log  # the access log is on ...
    assert '/mcp HTTP/1.1" 4' not in log  # ... and shows no refused request
    assert "Traceback" not in log


def login(http: httpx.Client, base: str) -> str:
    """Sign in to the admin as the operator; returns the session cookie.

    The cookies are ``Secure``: a browser sends them to the https:// site the proxy serves. This client
    talks to the app server behind the proxy, so it sends them itself.
    """
    form = http.get(f"{base}/admin/login/")
    assert form.status_code == 200, form.text
    csrf = form.cookies["csrftoken"]
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert match is not None
    signed_in = http.post(
        f"{base}/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": match.group(1), "username": "operator", "password": PASSWORD},
        headers={
            "Cookie": f"csrftoken={csrf}",
            "Origin": base.replace("http://", "https://"),
            "Referer": f"{base.replace('http://', 'https://')}/admin/login/",
        },
    )
    assert signed_in.status_code == 302, signed_in.text
    assert signed_in.headers["location"] == "/admin/"
    return signed_in.cookies["sessionid"]


def signed_in(base: str) -> str:
    with httpx.Client(headers=PROXY, timeout=30) as http:
        return login(http, base)


CONTENT_TYPES = {".css": "text/css", ".js": "text/javascript"}


def test_the_live_page_loads_its_script_and_styles(deployed: Deployed) -> None:
    with httpx.Client(headers=PROXY, timeout=30) as http:
        plain = http.get(f"{deployed.base}/admin/login/", headers={"X-Forwarded-Proto": "http"})
        assert plain.status_code == 301  # SECURE_SSL_REDIRECT: the proxy's plain-HTTP requests go to https
        session = login(http, deployed.base)
        live = f"{deployed.base}/admin/mcp_server/ledgerentry/live/"
        page = http.get(live, headers={"Cookie": f"sessionid={session}"})
        assert page.status_code == 200, page.text
        assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', page.text)
        names = {Path(asset).name.split(".")[0] + Path(asset).suffix for asset in assets}
        assert {"live.js", "live.css", "base.css"} <= names, assets  # hashed names, from the manifest
        for asset in assets:
            response = http.get(f"{deployed.base}{asset}")
            assert response.status_code == 200, asset
            suffix = Path(asset).suffix
            if suffix in CONTENT_TYPES:
                assert response.headers["content-type"].split(";")[0] == CONTENT_TYPES[suffix], asset
            assert "max-age=315360000" in response.headers["cache-control"], asset  # hashed: cached for good


async def test_the_live_page_websocket_answers_under_uvicorn(deployed: Deployed) -> None:
    """The live page's socket (``/mcp-admin/live/``), routed by ``mcp_application``, sends its snapshot."""
    session = await asyncio.to_thread(signed_in, deployed.base)
    origin = deployed.base.replace("http://", "https://")
    async with websockets.connect(
        f"{deployed.base.replace('http://', 'ws://')}/mcp-admin/live/",
        additional_headers={"Cookie": f"sessionid={session}", "Origin": origin, **PROXY},
        open_timeout=30,
    ) as socket:
        snapshot = json.loads(await socket.recv())
    assert snapshot["can_abort"] is True


# -- a brand-new site, deployed with the documented block -------------------------------------------------


@pytest.fixture(scope="module")
def new_site_deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    """``startproject``, the documented installation steps, its production block with this machine's stores
    filled in, the release commands, then the documented command line."""
    from tests.support.new_site import SITE, build_site, doc_blocks, run, site_env

    require_services()
    directory = build_site(tmp_path_factory.mktemp("deploy-new-site") / "site", protected=False)
    with throwaway_redis() as redis, postgres_database() as database:
        host, name = database.rsplit("/", 1)
        settings = (
            doc_blocks("howto/deploy")["settings.py"]
            .replace('"NAME": "mysite"', f'"NAME": {name!r}')
            .replace('"USER": "mysite"', '"USER": "postgres"')
            .replace("redis://127.0.0.1:6379", f"redis://127.0.0.1:{redis.port}")
        )
        assert settings.count(str(redis.port)) == 2
        assert host.endswith("@127.0.0.1:5432"), host  # the block's host and default port
        with (directory / SITE / "settings.py").open("a") as out:
            out.write("\nimport os\n\nDEBUG = False\nSECRET_KEY = os.environ['DJANGO_SECRET_KEY']\n")
            out.write("ALLOWED_HOSTS = ['127.0.0.1']\n\n" + settings)
        env = {**site_env(directory), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
        run(directory, "manage.py", "migrate", "--noinput", "-v0", env=env)
        run(directory, "manage.py", "collectstatic", "--noinput", "-v0", env=env)
        checked = subprocess.run(
            [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "System check identified no issues" in checked.stdout
        port = free_port()
        argv = shlex.split(DEPLOY_COMMAND.replace("mysite", SITE).replace("8000", str(port)))
        argv[0] = str(Path(sys.executable).parent / argv[0])
        log_path = directory / "uvicorn.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(argv, cwd=directory, env=env, stdout=log, stderr=log)
        try:
            try:
                wait_for_port(port, process)
            except Exception:
                raise RuntimeError(f"uvicorn did not start:\n{log_path.read_text()}") from None
            yield Deployed(f"http://127.0.0.1:{port}", env, database, log_path)
        finally:
            stop_process(process)


async def test_a_new_site_deployed_as_the_documentation_says(new_site_deployed: Deployed) -> None:
    """One session of the official client is served by both workers of a site we did not write, and the
    admin's styles load through WhiteNoise."""
    site = new_site_deployed
    async with (
        fresh_connections() as http,
        Client(streamable_http_client(site.url, http_client=http), mode="legacy") as client,
    ):

        async def both_workers_served() -> bool:
            result = await client.call_tool("add", {"a": 2, "b": 40})
            assert result.structured_content == {"result": 42}
            rows = ledger(site.database, "select distinct worker from mcp_server_ledgerentry")
            return len(pids({worker for (worker,) in rows})) >= 2

        await wait_for(both_workers_served, within=60)
    sessions = ledger(
        site.database, "select distinct session_id from mcp_server_ledgerentry where method = 'tools/call'"
    )
    assert len(sessions) == 1, sessions
    async with httpx.AsyncClient(headers=PROXY, timeout=30) as web:
        login = await web.get(f"{site.base}/admin/login/")
        assert login.status_code == 200
        styles = re.findall(r'href="(/static/admin/css/[^"]+\.css)"', login.text)
        assert styles, login.text
        for style in styles:
            response = await web.get(f"{site.base}{style}")
            assert response.status_code == 200, style
            assert response.headers["content-type"].split(";")[0] == "text/css", style
