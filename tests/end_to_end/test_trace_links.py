"""From the admin to the trace, on a running server that records its spans with the OpenTelemetry SDK
(``MCP_TEST_SPANS``) and links traces to an imagined Jaeger (``TRACE_URL``).

A slow call arrives with a ``traceparent`` header: its server span joins the caller's trace, its ledger row
keeps the span's ids, the requests list links them, and the live page, in headless Chromium (Debian's
``chromium``, through Playwright), shows the link in the call's row. Once the call ends, its exported span has
the very ids the row kept.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.support.admin import PASSWORD, create_superuser, pending_rows
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.live import LiveServer
from tests.support.raw import open_session, rpc
from tests.support.wait import wait_for
from tests.telemetry.span_file import read_spans

pytestmark = pytest.mark.browser

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
JAEGER = "https://jaeger.example/trace/{trace_id}?uiFind={span_id}"


@pytest.fixture(scope="module")
def traced(
    start: Callable[..., LiveServer], tmp_path_factory: pytest.TempPathFactory
) -> tuple[LiveServer, Path]:
    spans = tmp_path_factory.mktemp("trace-links") / "spans.jsonl"
    server = start({"RESPONSE_MODE": "json", "TRACE_URL": JAEGER}, MCP_TEST_SPANS=str(spans))
    create_superuser(server)
    return server, spans


@pytest.fixture
def page() -> Iterator[Page]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is missing (Debian package chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


def slow_call_with_a_trace(server: LiveServer, spans: Path) -> tuple[Callable[[], None], threading.Thread]:
    """A slow call sent with the caller's ``traceparent``, held until the returned function is called; then
    ended, and waited for until its server span is exported to ``spans``."""
    ready, stop = threading.Event(), threading.Event()

    async def hold() -> None:
        async with httpx.AsyncClient(timeout=90.0) as http:
            session = await open_session(http, server.url)
            call = rpc("tools/call", {"name": "slow", "arguments": {"seconds": 60}}, 1)
            running = asyncio.create_task(session.post(call, traceparent=f"00-{TRACE}-{CALLER_SPAN}-01"))

            async def pending() -> bool:
                return len(pending_rows(server)) == 1

            await wait_for(pending, "the traced call to be pending", within=20)
            ready.set()
            await asyncio.to_thread(stop.wait, 120)
            await session.delete()  # the call is answered -32000 and its span ends
            await running
            await wait_for(lambda: exported(spans), "the call's span to be exported", within=20)

    thread = threading.Thread(target=lambda: asyncio.run(hold()), daemon=True)
    thread.start()
    assert ready.wait(30), "the traced call did not start"
    return stop.set, thread


def call_spans(spans: Path) -> list[dict[str, Any]]:
    return [s for s in read_spans(spans) if s["kind"] == "SERVER" and s["name"] == "tools/call slow"]


async def exported(spans: Path) -> bool:
    return bool(call_spans(spans))


def sign_in(page: Page, server: LiveServer, next_path: str) -> None:
    page.goto(f"{server.base}/admin/login/?next={next_path}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{server.base}{next_path}")


def test_the_live_page_links_the_calls_trace(traced: tuple[LiveServer, Path], page: Page) -> None:
    server, spans = traced
    end_call, call = slow_call_with_a_trace(server, spans)
    try:
        (row,) = pending_rows(server)
        assert row["trace_id"] == TRACE  # the caller's trace, from its traceparent header
        span_id = row["span_id"]
        assert len(span_id) == 16
        assert span_id != CALLER_SPAN  # the server span's own id: a child of the caller's
        expected = f"https://jaeger.example/trace/{TRACE}?uiFind={span_id}"

        sign_in(page, server, "/admin/mcp_server/ledgerentry/live/")
        expect(page.locator("#mcp-live-state")).to_have_text("live", timeout=15_000)
        link = page.locator("#mcp-live-rows tr td.field-trace a.mcp-live-trace")
        expect(link).to_have_count(1, timeout=15_000)
        expect(link).to_have_text(f"{TRACE[:8]}…")
        expect(link).to_have_attribute("href", expected)
        expect(link).to_have_attribute("title", f"trace {TRACE}")

        page.goto(f"{server.base}/admin/mcp_server/ledgerentry/")
        links = page.locator("#result_list td.field-took a.mcp-trace")
        expect(links).to_have_count(2)  # initialize's own trace, and the call's
        expect(page.locator(f'#result_list td.field-took a.mcp-trace[href="{expected}"]')).to_have_count(1)
    finally:
        end_call()
        call.join(60)
    assert not call.is_alive()
    (span,) = call_spans(spans)
    assert (span["trace_id"], span["span_id"], span["parent_id"]) == (TRACE, span_id, CALLER_SPAN)
