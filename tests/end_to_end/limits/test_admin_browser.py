"""What an operator sees of refusals in a real browser (headless Chromium via Playwright): the live page's
count of requests refused by a rate limit in the last minute, and the *Current usage* page naming the
caller who is being refused now."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from mcp import Client, MCPError
from playwright.sync_api import Page, expect

from tests.end_to_end.admin.test_browser import chromium, page, sign_in
from tests.support.admin import create_superuser
from tests.support.live import LiveServer

__all__ = ["chromium", "page"]  # the fixtures this module borrows from the live page's browser tests

pytestmark = pytest.mark.browser

ECHO = {"per": "address", "target": "tool:echo", "rate": "1/hour", "name": "echo an hour"}


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    live = start({"RATE_LIMITS": [ECHO]})
    create_superuser(live)
    return live


def refused_call(server: LiveServer) -> MCPError:
    """The official client calls echo twice (in a thread of its own): the second call is refused."""

    async def calls() -> MCPError:
        async with Client(server.url) as client:
            assert not (await client.call_tool("echo", {"text": "x"})).is_error
            try:
                await client.call_tool("echo", {"text": "x"})
            except MCPError as refused:
                return refused
        raise AssertionError("the second call was not refused")

    with ThreadPoolExecutor(1) as thread:  # Playwright's loop runs in this one
        return thread.submit(asyncio.run, calls()).result(timeout=60)


def test_the_live_page_and_the_usage_page_show_the_refusal(server: LiveServer, page: Page) -> None:
    assert refused_call(server).code == -31429
    sign_in(page, server, "/admin/mcp_server/ledgerentry/live/")
    expect(page.locator("#mcp-live-state")).to_have_text("live", timeout=15_000)
    # the ledger is written behind the replies: wait for the page to count the refusal
    expect(page.locator("#mcp-live-limited")).to_have_text("1", timeout=15_000)
    page.goto(f"{server.base}/admin/mcp_server/ratelimit/")
    page.click("text=Current usage")
    expect(page.locator("#mcp-usage-refused")).to_have_text("1")
    refused = page.locator("#mcp-usage-table tr.mcp-usage-refused")
    expect(refused).to_have_count(1)
    expect(refused).to_contain_text("address 127.0.0.1")
    expect(refused).to_contain_text("echo an hour")
    expect(refused.locator("td").nth(3)).to_have_text("2")  # the refused attempt counts too
