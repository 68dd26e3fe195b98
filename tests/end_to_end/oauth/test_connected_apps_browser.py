"""The connected-apps page in a real browser (headless Chromium, Playwright): a person signs in through the
site's login, sees the app the official client connected, revokes it, and its token is refused.
``UPDATE_SCREENSHOTS=1`` also writes ``docs/connected-apps.png``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.live import ROOT, LiveServer
from tests.support.oauth import PASSWORD, start_oauth_server
from tests.support.raw import initialize
from tests.support.signin import SignIn

pytestmark = pytest.mark.browser

SCREENSHOT = ROOT / "docs" / "connected-apps.png"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is missing (Debian package chromium)")
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-apps-browser"))
    yield server
    server.stop()


async def _connect(site: LiveServer) -> tuple[str, str]:
    """The official client connects as alice; ``(client_id, access token)``."""
    sign_in = SignIn(site, client_name="Claude (browser test)")
    try:
        assert (await sign_in.whoami())["user"] == "alice"
    finally:
        await sign_in.browser.close()
    assert sign_in.storage.client_info is not None
    assert sign_in.storage.tokens is not None
    return str(sign_in.storage.client_info.client_id), sign_in.storage.tokens.access_token


def status(site: LiveServer, token: str) -> int:
    """The HTTP status of an ``initialize`` with ``token`` (in a thread: Playwright holds this one's loop)."""

    async def ask() -> int:
        async with httpx.AsyncClient(timeout=30) as http:
            response = await initialize(http, site.url, Authorization=f"Bearer {token}")
        return response.status_code

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, ask()).result()


def test_a_person_revokes_a_connected_app_in_the_browser(site: LiveServer, tmp_path: Path) -> None:
    client_id, token = asyncio.run(_connect(site))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1100, "height": 640}).new_page()
        try:
            page.goto(f"{site.base}/oauth/apps/")
            page.wait_for_url("**/accounts/login/?next=/oauth/apps/")  # LOGIN_URL first
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(f"{site.base}/oauth/apps/")
            row = page.locator(f'tr.connected-app[data-client-id="{client_id}"]')
            expect(row.locator(".app-name")).to_have_text("Claude (browser test)")
            expect(row.locator(".app-identity")).to_have_text(
                "Registered itself (dynamic client registration)"
            )
            expect(row.locator(".app-access li")).to_have_text(
                "Use everything you may use on this MCP server, as you"
            )
            expect(row.locator(".app-last-used time")).to_have_count(1)
            shot = tmp_path / "connected-apps.png"
            page.screenshot(path=str(shot), full_page=True)
            if os.environ.get("UPDATE_SCREENSHOTS"):
                SCREENSHOT.parent.mkdir(exist_ok=True)
                shutil.copyfile(shot, SCREENSHOT)
            assert status(site, token) == 200

            row.locator("input.revoke").click()
            expect(page.locator(".messagelist")).to_contain_text("Revoked Claude (browser test)")
            expect(row).to_have_count(0)
            expect(page.locator("#no-connected-apps")).to_be_visible()
        finally:
            browser.close()
    assert status(site, token) == 401
