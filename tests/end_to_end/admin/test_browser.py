"""The live page in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

An operator signs in to the admin of a running server and opens "Pending requests". A slow tool call made by
the official ``mcp`` client appears on the page without a reload; the operator aborts it; the client gets
error -32003 and the row leaves the page. ``UPDATE_SCREENSHOTS=1`` also writes ``docs/admin-live.png``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, MCPError
from mcp_types import Implementation
from playwright.sync_api import Page, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from mcp_server.wire.errors import REQUEST_ABORTED
from tests.support.admin import PASSWORD, admin_log, create_superuser, pending_rows, shell
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.live import ROOT, LiveServer
from tests.support.raw import open_session, rpc

pytestmark = pytest.mark.browser

SCREENSHOT = ROOT / "docs" / "admin-live.png"
CLIENT = Implementation(name="library-assistant", version="2.3.0")

SEED_HISTORY = """
import random
from datetime import timedelta
from django.utils import timezone
from mcp_server.models import LedgerEntry

rng = random.Random(7)
now = timezone.now()
names = ["search_books", "get_book", "reserve_book", "echo"]
rows = []
for minute in range(59, 0, -1):
    for n in range(rng.randint(3, 12) + (15 if 18 < minute < 26 else 0)):
        created = now - timedelta(minutes=minute, seconds=rng.uniform(0, 59))
        took = rng.uniform(20, 240) if rng.random() < 0.02 else rng.lognormvariate(-2.5, 0.8)
        rows.append(LedgerEntry(
            request_key=f"s:history-{minute}-{n}", method="tools/call", name=rng.choice(names),
            worker="history", created=created, state="answered",
            settled_at=min(now, created + timedelta(seconds=took)), outcome={"result": True},
        ))
LedgerEntry.objects.bulk_create(rows)
"""
"""An hour of past traffic, written straight into the ledger so that the chart has something to draw."""

RENDER_COUNTER = """() => {
  window.__renders = 0;
  new MutationObserver(() => { window.__renders += 1; })
    .observe(document.getElementById("mcp-live-updated"), { childList: true });
}"""
"""Counts the snapshots the page renders from now on (``render`` rewrites ``#mcp-live-updated`` each time)."""


@pytest.fixture(scope="module")
def chromium() -> str:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is missing (Debian package chromium)")
    return str(CHROMIUM)


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    live = start({"RESPONSE_MODE": "sse"})
    create_superuser(live)
    seeded = shell(live, SEED_HISTORY)
    assert seeded.returncode == 0, seeded.stderr
    return live


@pytest.fixture
def page(chromium: str) -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


class SlowCall(threading.Thread):
    """The official client calls the ``slow`` tool in a thread of its own, and keeps what came back."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        async def call() -> None:
            async with Client(self.url, client_info=CLIENT) as client:
                self.result = await client.call_tool("slow", {"seconds": 60})

        try:
            asyncio.run(call())
        except BaseException as exc:
            self.error = exc


def background_requests(server: LiveServer) -> tuple[Callable[[], None], threading.Thread]:
    """Two slow calls from a raw-HTTP client, to keep other rows on the page; returns how to end them."""
    ready = threading.Event()
    stop = threading.Event()

    async def hold() -> None:
        async with httpx.AsyncClient(timeout=90.0) as http:
            session = await open_session(http, server.url)
            calls = [
                asyncio.create_task(session.post(rpc("tools/call", {"name": "slow", "arguments": {}}, n)))
                for n in (1, 2)
            ]
            await session.wait_pending(1, 2)
            ready.set()
            await asyncio.to_thread(stop.wait, 120)  # the test's thread says when
            await session.delete()
            await asyncio.gather(*calls)

    thread = threading.Thread(target=lambda: asyncio.run(hold()), daemon=True)
    thread.start()
    assert ready.wait(20), "the background requests did not start"
    return stop.set, thread


def test_operator_sees_a_slow_call_live_and_aborts_it(server: LiveServer, page: Page, tmp_path: Path) -> None:
    live_url = f"{server.base}/admin/mcp_server/ledgerentry/live/"
    page.goto(f"{server.base}/admin/login/?next=/admin/mcp_server/ledgerentry/live/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(live_url)
    expect(page.locator("#mcp-live-state")).to_have_text("live", timeout=15_000)
    expect(page.locator("#mcp-live-updated")).not_to_be_empty()
    expect(page.locator("#mcp-live-chart rect.throughput-bar")).to_have_count(60)
    expect(page.locator("#mcp-live-rows tr")).to_have_count(0)
    page.evaluate("window.__notReloaded = true")

    end_background, background = background_requests(server)
    call = SlowCall(server.url)
    call.start()
    try:
        client_cell = page.locator("td.field-client", has_text=f"{CLIENT.name} {CLIENT.version}")
        row = page.locator("#mcp-live-rows tr").filter(has=client_cell)
        expect(row).to_have_count(1, timeout=15_000)
        expect(page.locator("#mcp-live-rows tr")).to_have_count(3)
        expect(page.locator("#mcp-live-pending")).to_have_text("3")
        assert page.evaluate("window.__notReloaded") is True

        box = row.locator("input.action-select")
        box.check()
        # Count the snapshots the page renders from now on (each one sets "updated …" anew) and wait for
        # two: the rows are redrawn from them, and the selection must survive.
        page.evaluate(RENDER_COUNTER)
        page.wait_for_function("window.__renders >= 2", timeout=10_000)
        expect(box).to_be_checked()
        expect(row).to_have_class(re.compile(r"\bselected\b"))
        expect(page.locator("#mcp-live-abort")).to_be_enabled()
        shot = tmp_path / "admin-live.png"
        page.screenshot(path=str(shot), full_page=True)
        if os.environ.get("UPDATE_SCREENSHOTS"):
            SCREENSHOT.parent.mkdir(exist_ok=True)
            shutil.copyfile(shot, SCREENSHOT)

        pk = int(row.get_attribute("data-pk") or 0)
        assert [r["name"] for r in pending_rows(server) if r["id"] == pk] == ["slow"]
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#mcp-live-abort")
        expect(page.locator("#mcp-live-message")).to_have_text("Aborted 1.")
        expect(row).to_have_count(0, timeout=10_000)
        expect(page.locator("#mcp-live-rows tr")).to_have_count(2)
        assert page.evaluate("window.__notReloaded") is True

        call.join(15)
        assert not call.is_alive(), "the client is still waiting"
        error = call.error
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        assert isinstance(error, MCPError), repr(call.error)
        assert error.code == REQUEST_ABORTED
        assert error.message == "Request aborted by an operator"
        assert call.result is None
        assert len(admin_log(server, pk)) == 1
    finally:
        end_background()
        background.join(30)
    expect(page.locator("#mcp-live-rows tr")).to_have_count(0, timeout=10_000)
    expect(page.locator("#mcp-live-empty")).to_be_visible()


FITS = """() => {
  const results = document.querySelector("#changelist .results");
  const table = document.getElementById("result_list");
  const last = table.querySelector("thead th:last-child").getBoundingClientRect();
  return {
    page: [document.documentElement.scrollWidth, window.innerWidth],
    results: [results.scrollWidth, results.clientWidth],
    lastColumnRight: [Math.round(last.right), Math.round(results.getBoundingClientRect().right)],
  };
}"""
"""Widths that tell whether the request list fits: the page, the list's scroll box, its last column."""


LONG_VALUES = """
from django.utils import timezone
from mcp_server.models import LedgerEntry

for n, state in enumerate(["aborted", "closed", "cancelled", "answered"]):
    LedgerEntry.objects.create(
        request_key=f"s:zz-{n}-" + "a-client-chose-a-long-request-id-" * 4, method="tools/call",
        name="x" * 120,
        worker="worker-7.eu-west-1.compute.internal.example.org:123456:abcdef", created=timezone.now(),
        state=state, settled_at=timezone.now(), outcome={"result": True},
    )
"""
"""Rows with values as long as real ones get: a client's long string id, a long tool name, a cloud host, the
longest states."""


def sign_in(page: Page, server: LiveServer, next_path: str) -> None:
    page.goto(f"{server.base}/admin/login/?next={next_path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{server.base}{next_path}")


def test_the_request_list_fits_a_1400_pixel_window(server: LiveServer, page: Page) -> None:
    """Issue 15: at 1400 px the request list's last columns ran off the page. With real rows (pending calls
    with their sessions, users and workers, settled history) every column is on screen, with no scrolling."""
    seeded = shell(server, LONG_VALUES)
    assert seeded.returncode == 0, seeded.stderr
    end_background, background = background_requests(server)
    try:
        path = (
            "/admin/mcp_server/ledgerentry/"  # pending first, then the newest: the long row is near the top
        )
        sign_in(page, server, path)
        expect(page.locator("#result_list tbody tr").first).to_be_visible()
        expect(page.locator("#result_list td.field-session_link a").first).to_be_visible()  # a real session
        long_rows = page.locator("#result_list td.field-worker_id", has_text="worker-7.eu-west-1")
        expect(long_rows).to_have_count(4)
        # Once laid out with its styles (the page may be measured before its stylesheet applies), the list
        # fits; a list that does not fit never does, and the wait times out with its widths.
        fits = f"() => Object.values(({FITS})()).every(([width, room]) => width <= room)"
        try:
            page.wait_for_function(fits, timeout=10_000)
        except PlaywrightTimeout:
            pytest.fail(f"the request list does not fit at 1400 px: {page.evaluate(FITS)}")
    finally:
        end_background()
        background.join(30)
