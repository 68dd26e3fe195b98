"""The demo's MCP Apps view in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright, hosted by a small page built on ``@modelcontextprotocol/ext-apps``'s ``AppBridge``
(``tests/apps_host/host.mjs``, bundled by ``scripts/apps_host`` into ``.apps-host/``, installed from npm on
first use as the conformance suite is).

The host page is served at the live server's origin (so its official TypeScript client reaches ``/mcp``
without CORS); it loads the ``ui://`` document into a sandboxed iframe under the CSP the server declared,
delivers the tool's input and result, and the view's "Reserve" button's ``tools/call`` goes through the
bridge to the server and changes the database. ``UPDATE_SCREENSHOTS=1`` also writes
``docs/images/apps-book-cards.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Frame, Page, Route, expect, sync_playwright

from tests.support.admin import query
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.live import ROOT, LiveServer

pytestmark = pytest.mark.browser

BUNDLE = ROOT / ".apps-host" / "host.js"
SCREENSHOT = ROOT / "docs" / "images" / "apps-book-cards.png"
HOST_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>MCP Apps test host</title>
<style>body { font-family: system-ui, sans-serif; margin: 16px; background: #f4f4f5; }
iframe { width: 720px; height: 320px; border: 1px solid #ccc; border-radius: 8px; background: white; }</style>
</head><body><p>A chat answer, and beside it the tool's view:</p><div id="frame"></div>
<script type="module" src="/__apps_host__/host.js"></script></body></html>"""
WAIT = 30_000
"""Milliseconds an expectation waits for its state (a loaded machine is slow, never wrong)."""
HOSTILE = "<img src=x onerror=\"document.title='pwned'\">"


def _fail_or_skip(problem: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="module")
def host_bundle() -> Path:
    """``scripts/apps_host``: ext-apps, the TypeScript client, esbuild (from npm, once); the host bundled."""
    if shutil.which("npm") is None:
        _fail_or_skip(
            "npm is not on PATH: cannot install @modelcontextprotocol/ext-apps (.ci/run installs it)"
        )
    subprocess.run([str(ROOT / "scripts" / "apps_host")], cwd=ROOT, check=True, timeout=900)
    return BUNDLE


@pytest.fixture(scope="module")
def chromium() -> str:
    if not CHROMIUM.exists():
        _fail_or_skip(f"{CHROMIUM} is missing (Debian package chromium)")
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": "json"})


@pytest.fixture
def page(chromium: str, host_bundle: Path, server: LiveServer) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 800, "height": 480})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))

            def host(route: Route) -> None:
                if route.request.url.endswith("/host.js"):
                    route.fulfill(body=host_bundle.read_bytes(), content_type="text/javascript")
                else:
                    route.fulfill(body=HOST_PAGE, content_type="text/html")

            page.route(f"{server.base}/__apps_host__/**", host)
            yield page
            assert errors == []
        finally:
            browser.close()


def open_view(page: Page, server: LiveServer, tool: str, arguments: dict[str, Any]) -> Frame:
    """Open the host page for ``tool(arguments)``; returns the view's frame once the host delivered it."""
    page.goto(f"{server.base}/__apps_host__/?{urlencode({'tool': tool, 'arguments': json.dumps(arguments)})}")
    page.wait_for_function("() => ['delivered', 'failed'].includes(window.hostState.step)", timeout=WAIT)
    state = page.evaluate("window.hostState")
    assert state["step"] == "delivered", state["error"]
    handle = page.locator("#view").element_handle()
    frame = handle.content_frame() if handle is not None else None
    assert frame is not None
    return frame


def test_the_book_cards_reserve_a_copy_through_the_host(page: Page, server: LiveServer) -> None:
    frame = open_view(page, server, "search_books", {"query": "Calvino"})
    state = page.evaluate("window.hostState")
    assert "reserve_copy" in state["tools"]  # the host declared the extension: the view's tool is listed
    assert state["csp"] == {"resourceDomains": [server.base]}
    assert page.locator("#view").get_attribute("sandbox") == "allow-scripts"
    cards = frame.locator(".card")
    expect(cards).to_have_count(2, timeout=WAIT)
    expect(frame.locator("#query")).to_have_text("Books matching “Calvino”", timeout=WAIT)
    card = frame.locator(".card", has_text="Invisible Cities")
    book_id = int(card.get_attribute("data-book-id") or 0)
    before = query(server, "SELECT copies_available FROM catalogue_book WHERE id = ?", book_id)[0]
    expect(card.locator(".copies")).to_have_text(
        f"{before['copies_available']} copies available", timeout=WAIT
    )
    # The view reported its content's size (ui/notifications/size-changed): the host fitted the iframe to it.
    page.wait_for_function("() => (window.hostState.height || 0) > 100", timeout=WAIT)
    assert page.evaluate("window.hostState.height") < 320
    if os.environ.get("UPDATE_SCREENSHOTS"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
    card.locator(".reserve").click()
    expect(card.locator(".status")).to_have_text("Reserved.", timeout=WAIT)
    left = before["copies_available"] - 1
    expect(card.locator(".copies")).to_have_text(
        "1 copy available" if left == 1 else f"{left} copies available", timeout=WAIT
    )
    assert page.evaluate("window.hostState.viewCalls") == ["reserve_copy"]
    # The reservation committed before the view got its answer.
    after = query(server, "SELECT copies_available FROM catalogue_book WHERE id = ?", book_id)[0]
    assert after["copies_available"] == left
    loans = query(server, "SELECT borrower FROM catalogue_loan WHERE book_id = ?", book_id)
    assert {"borrower": "guest (book cards)"} in loans


def test_a_hostile_argument_stays_text_in_the_view(page: Page, server: LiveServer) -> None:
    frame = open_view(page, server, "search_books", {"query": HOSTILE})
    expect(frame.locator("#empty")).to_have_text("No book matches.", timeout=WAIT)
    expect(frame.locator("#query")).to_have_text(f"Books matching “{HOSTILE}”", timeout=WAIT)
    assert frame.locator("img").count() == 0
    assert frame.evaluate("document.title") == "Books"
