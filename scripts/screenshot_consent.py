"""A screenshot of the consent page, in Chromium: ``docs/images/consent.png`` (docs/howto/connect-clients.md).

``python scripts/screenshot_consent.py [-o PATH]`` (or ``scripts/screenshot_consent``) starts the demo site
on a free port with its authorization server on and user ``alice``, registers a client as claude.ai does
(Dynamic Client Registration, name ``Claude``, redirect ``https://claude.ai/api/mcp/auth_callback``), opens
its authorize URL in headless Chromium (Playwright, ``/usr/bin/chromium``), signs in at the site's login
and saves the consent page it lands on. Re-run it after the consent template changes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.live import LiveServer  # noqa: E402
from tests.support.oauth import PASSWORD, pkce, start_oauth_server  # noqa: E402

__all__ = ["OUTPUT", "authorize_url", "main", "shoot"]

OUTPUT = ROOT / "docs" / "images" / "consent.png"
REDIRECT = "https://claude.ai/api/mcp/auth_callback"


def authorize_url(site: LiveServer) -> str:
    """The authorize URL of a client registered by DCR as claude.ai registers itself."""
    with httpx.Client(base_url=site.base, timeout=30) as http:
        body = {"client_name": "Claude", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
        done = http.post("/oauth/register/", json=body)
        done.raise_for_status()
        client_id = done.json()["client_id"]
    _verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "screenshot",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": site.url,
        "scope": "mcp",
    }
    return f"{site.base}/oauth/authorize/?{urlencode(query)}"


def shoot(site: LiveServer, output: Path) -> None:
    """Sign in as alice through the authorize URL and save the consent page to ``output``."""
    from playwright.sync_api import expect, sync_playwright

    url = authorize_url(site)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 360}, device_scale_factor=1)
            page.goto(url)
            page.fill("#id_username", "alice")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            expect(page.locator("input[name=allow]")).to_be_visible(timeout=30_000)
            output.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(output), full_page=True)
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    """Command line: ``[-o PATH]`` (default ``docs/images/consent.png``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing (Debian package chromium)", file=sys.stderr)
        return 2
    site = start_oauth_server(Path(tempfile.mkdtemp(prefix="mcp-consent-shot-")))
    try:
        shoot(site, args.output)
    finally:
        site.stop()
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
