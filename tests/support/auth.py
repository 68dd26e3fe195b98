"""Helpers for the authentication tests: fixtures made in a live server's database, authenticated clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.live import LiveServer, run_manage, run_shell


def make_fixtures(server: LiveServer) -> dict[str, Any]:
    """Users alice, bob (lender, catalogue viewer), sam (staff), gone (inactive), carol (adds and changes
    books), their tokens and cookies."""
    made = shell(server, "import json; from tests.authapp.fixtures import make; print(json.dumps(make()))")
    return dict(json.loads(made.strip().splitlines()[-1]))  # after the shell's line on its auto-imports


def shell(server: LiveServer, code: str) -> str:
    """``manage.py shell -c code`` against the server's database (``tests.support.live.run_shell``): its
    stdout."""
    return run_shell(server.env, code).stdout


def manage(server: LiveServer, *args: str) -> str:
    """Run ``manage.py <args>`` against the server's database (``tests.support.live.run_manage``); returns
    stdout."""
    done = run_manage(server.env, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def http_client(token: str | None = None, cookie: str | None = None) -> httpx.AsyncClient:
    """An HTTP client sending a bearer token and/or a Django session cookie on every request."""
    return httpx.AsyncClient(
        timeout=30,
        headers=bearer(token) if token else None,
        cookies={"sessionid": cookie} if cookie else None,
    )


@asynccontextmanager
async def sdk_client(url: str, token: str) -> AsyncIterator[Client]:
    """The official client, sending ``Authorization: Bearer <token>``."""
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def tool_names(result: dict[str, Any]) -> set[str]:
    return {tool["name"] for tool in result["result"]["tools"]}
