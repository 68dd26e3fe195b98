"""Fixtures of the authorization server tests: a live site with it on, raw HTTP, a signed-in browser."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.oauth import Browser, start_oauth_server


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    lenient = {"OAUTH_THROTTLE": {"token": 1000, "register": 1000}}  # these tests register many clients
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-hostile"), lenient)
    yield server
    server.stop()


@pytest.fixture
async def http(site: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=site.base, timeout=30) as client:
        yield client


@pytest.fixture
async def browser(site: LiveServer) -> AsyncIterator[Browser]:
    person = Browser.open(site)
    await person.login()
    yield person
    await person.close()
