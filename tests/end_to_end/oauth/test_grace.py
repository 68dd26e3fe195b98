"""The refresh grace window (``OAUTH_REFRESH_GRACE``): two refreshes with one refresh token close together get
the same answer; a replay after the window, or by another client, revokes the whole grant."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.oauth import Browser, start_oauth_server
from tests.support.raw import initialize
from tests.support.raw_oauth import client_id, exchange, get_code
from tests.support.wait import wait_for

WINDOW = 1.0
"""The test site's grace window, in seconds (the default is 10)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = {"OAUTH_THROTTLE": {"token": 1000, "register": 1000}, "OAUTH_REFRESH_GRACE": WINDOW}
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-grace"), settings)
    yield server
    server.stop()


async def tokens(site: LiveServer, http: httpx.AsyncClient, browser: Browser) -> tuple[str, dict[str, Any]]:
    """A new client's id and its first token answer."""
    cid = await client_id(http)
    code, verifier = await get_code(site, browser, cid)
    first = await exchange(http, site, cid, code, verifier)
    assert first.status_code == 200, first.text
    return cid, first.json()


def refresh_data(cid: str, refresh_token: str) -> dict[str, str]:
    return {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": cid}


async def works(http: httpx.AsyncClient, site: LiveServer, access_token: str) -> bool:
    done = await initialize(http, site.url, Authorization=f"Bearer {access_token}")
    assert done.status_code in {200, 401}, done.text
    return done.status_code == 200


async def test_two_concurrent_refreshes_get_the_same_new_tokens(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    for _ in range(3):  # a few pairs: each pair is sent at once, over two connections
        cid, first = await tokens(site, http, browser)
        async with (
            httpx.AsyncClient(base_url=site.base, timeout=30) as one,
            httpx.AsyncClient(base_url=site.base, timeout=30) as two,
        ):
            data = refresh_data(cid, first["refresh_token"])
            answers = await asyncio.gather(
                one.post("/oauth/token/", data=data), two.post("/oauth/token/", data=data)
            )
        assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
        a, b = (answer.json() for answer in answers)
        assert a["access_token"] == b["access_token"]
        assert a["refresh_token"] == b["refresh_token"]
        assert a["refresh_token"] != first["refresh_token"]  # rotated, once
        assert answers[1].headers["cache-control"] == "no-store"
        assert await works(http, site, a["access_token"])
        assert not await works(http, site, first["access_token"])
        onward = await http.post("/oauth/token/", data=refresh_data(cid, a["refresh_token"]))
        assert onward.status_code == 200, onward.text  # the grant lives on


async def test_a_replay_after_the_window_revokes_the_whole_grant(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid, first = await tokens(site, http, browser)
    refreshed = await http.post("/oauth/token/", data=refresh_data(cid, first["refresh_token"]))
    assert refreshed.status_code == 200, refreshed.text
    second = refreshed.json()
    started = time.monotonic()
    # Replay the used token until the window closes: inside it each replay gets the same answer; the first
    # one after it is refused.

    async def refused() -> httpx.Response | None:
        replay = await http.post("/oauth/token/", data=refresh_data(cid, first["refresh_token"]))
        if replay.status_code != 200:
            return replay
        assert replay.json()["access_token"] == second["access_token"]
        return None

    replay = await wait_for(refused, "the grace window to close", within=WINDOW + 5, every=0.05)
    assert time.monotonic() - started >= WINDOW * 0.5
    assert replay.status_code == 400
    assert replay.json()["error"] == "invalid_grant"
    assert not await works(http, site, second["access_token"])
    after = await http.post("/oauth/token/", data=refresh_data(cid, second["refresh_token"]))
    assert after.status_code == 400
    assert after.json()["error"] == "invalid_grant"


async def test_another_client_inside_the_window_is_refused_and_revokes_the_grant(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid, first = await tokens(site, http, browser)
    thief = await client_id(http)
    refreshed = await http.post("/oauth/token/", data=refresh_data(cid, first["refresh_token"]))
    assert refreshed.status_code == 200, refreshed.text
    stolen = await http.post("/oauth/token/", data=refresh_data(thief, first["refresh_token"]))
    assert stolen.status_code == 400
    assert stolen.json()["error"] == "invalid_grant"
    assert "access_token" not in stolen.text
    assert not await works(http, site, refreshed.json()["access_token"])
    mine = await http.post("/oauth/token/", data=refresh_data(cid, first["refresh_token"]))
    assert mine.status_code == 400  # the grant is gone, the answer kept for the window with it


async def test_an_unknown_refresh_token_is_refused(http: httpx.AsyncClient) -> None:
    cid = await client_id(http)
    done = await http.post("/oauth/token/", data=refresh_data(cid, "not-a-token"))
    assert done.status_code == 400
    assert done.json()["error"] == "invalid_grant"
