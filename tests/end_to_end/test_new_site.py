"""A site we did not write: ``django-admin startproject``, then exactly the documented installation steps.

The settings and ``asgi.py`` lines are read from the code blocks of ``docs/howto/add-to-a-site.md`` (those
whose first line names the file), so the documentation and this test cannot drift apart. Nothing is
installed: the package is already in the environment, as ``pip install django-mcp-ledger`` would leave it.
The site then runs on Daphne and on Uvicorn, and the official client calls a tool there; with the
documented line that turns anonymous access off, a request without a token gets 401 and one with a token
made by ``manage.py mcp_token`` succeeds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.contrib.staticfiles import finders
from mcp import Client
from playwright.sync_api import expect, sync_playwright

from tests.support.auth import sdk_client
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.new_site import build_site, doc_blocks, run, serve, site_env
from tests.support.raw import initialize
from tests.support.wait import wait_for

ADMIN_PASSWORD = "new-site-admin-password"


def server_log(directory: Path, url: str, kind: str) -> str:
    """What the server started by :func:`serve` for ``url`` has written so far (its access log included)."""
    port = url.split(":")[2].split("/")[0]
    return (directory / f"{kind}-{port}.log").read_text(errors="replace")


@pytest.fixture(scope="module")
def open_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_site(tmp_path_factory.mktemp("new-site") / "open", protected=False)


@pytest.fixture(scope="module")
def protected_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    directory = build_site(tmp_path_factory.mktemp("new-site") / "protected", protected=True)
    env = {**site_env(directory), "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD}
    run(
        directory,
        "manage.py",
        "createsuperuser",
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@example.com",
        env=env,
    )
    token = (
        run(directory, "manage.py", "mcp_token", "create", "admin", "--name", "test").strip().splitlines()[-1]
    )
    assert token.startswith("mcp_")
    return directory, token


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_official_client_calls_a_tool(open_site: Path, kind: str) -> None:
    with serve(open_site, kind) as url:
        async with Client(url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {"add"}  # whoami is staff only
            result = await client.call_tool("add", {"a": 2, "b": 40})
            assert not result.is_error
            assert result.structured_content == {"result": 42}


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_the_official_client_leaves_no_error_in_the_access_log(open_site: Path, kind: str) -> None:
    """Issue 15, point 7: each connection of the official client used to log ``POST /mcp 400`` (its
    ``server/discover`` probe, refused before 2026-07-28 was served), which a newcomer reads as an error."""
    with serve(open_site, kind) as url:
        async with Client(url) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        async with httpx.AsyncClient() as http:  # a request after the client's, so its lines are written
            assert (await http.get(url.removesuffix("mcp") + "static/admin/css/base.css")).status_code == 200

        async def logged() -> bool:  # access lines are written after their responses
            return "base.css" in server_log(open_site, url, kind)

        await wait_for(logged)
        lines = [line for line in server_log(open_site, url, kind).splitlines() if "/mcp" in line]
    assert any("POST /mcp" in line and " 200" in line for line in lines), lines  # the access log is on
    assert not [line for line in lines if re.search(r"\b4\d\d\b", line)], lines


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_token_protected_site(protected_site: tuple[Path, str], kind: str) -> None:
    directory, token = protected_site
    with serve(directory, kind) as url:
        async with httpx.AsyncClient() as http:
            refused = await initialize(http, url)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="mcp"'
        async with sdk_client(url, token) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {"add", "whoami"}
            result = await client.call_tool("whoami", {})
            assert not result.is_error
            assert result.content[0].text == "admin"


def static_source(name: str) -> bytes:
    """The bytes of the static file ``name`` as the app ships it."""
    source = finders.find(name)
    assert isinstance(source, str), name
    return Path(source).read_bytes()


STATIC = {
    "admin/css/base.css": "text/css",
    "mcp_server/live.css": "text/css",
    "mcp_server/live.js": "text/javascript",
}
"""The admin's styles and its live page's script and styles, with the content type a browser needs."""


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_static_files_are_served_in_debug(open_site: Path, kind: str) -> None:
    """``daphne mysite.asgi:application`` as documented (DEBUG on, as ``startproject`` leaves it): the
    admin has its CSS and the live page its script, as under ``runserver``."""
    with serve(open_site, kind) as url:
        async with httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
            for name, content_type in STATIC.items():
                response = await http.get(f"/static/{name}")
                assert response.status_code == 200, name
                assert response.headers["content-type"].split(";")[0] == content_type, name
                assert response.content == static_source(name), name


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
def test_the_documented_token_client_runs_as_written(protected_site: tuple[Path, str], kind: str) -> None:
    """The client example runs in a process of its own with only its URL and token filled in: it imports
    nothing the official client does not bring (no ``httpx``), and the token opens the protected site."""
    directory, token = protected_site
    with serve(directory, kind) as url:
        token_client = doc_blocks("howto/authentication")["client.py"]
        script = token_client.replace("http://127.0.0.1:8000/mcp", url).replace('"mcp_…"', repr(token))
        assert script.count(url) == 1
        assert script.count(token) == 1
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=directory,
            env=site_env(directory),
            capture_output=True,
            text=True,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['add', 'whoami']\n"  # whoami is for staff: the token's user is one


@pytest.mark.browser
def test_the_admin_live_page_works_in_a_browser_under_daphne(protected_site: tuple[Path, str]) -> None:
    """``daphne newsite.asgi:application`` as documented, the admin in a real browser: styled, and the
    live page connected (its script loaded, its WebSocket routed by ``mcp_application``) with its chart."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is missing (Debian package chromium)")
    directory, _token = protected_site
    live = "/admin/mcp_server/ledgerentry/live/"
    with serve(directory, "daphne") as url, sync_playwright() as playwright:
        base = url.removesuffix("/mcp")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/admin/login/?next={live}")
            page.fill("#id_username", "admin")
            page.fill("#id_password", ADMIN_PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(f"{base}{live}")
            expect(page.locator("#mcp-live-state")).to_have_text("live", timeout=15_000)  # script + socket
            expect(page.locator("#mcp-live-chart")).to_be_visible()
            expect(page.locator("#mcp-live-updated")).not_to_be_empty()
            # The admin's styles (a coloured header) and the live page's own (its state as a pill).
            header = "getComputedStyle(document.getElementById('header')).backgroundColor"
            assert page.evaluate(header) not in {"", "rgba(0, 0, 0, 0)"}
            pill = "getComputedStyle(document.getElementById('mcp-live-state')).borderRadius"
            assert page.evaluate(pill) == "10px"
        finally:
            browser.close()
