"""Connected apps, live: a person's page lists what they allowed and revokes it; the ledger names the client.

The official client (``OAuthClientProvider``) signs in through the consent page as alice; the page at
``/oauth/apps/`` is read and posted by the same signed-in browser. Revoking there stops the app's access
and refresh tokens at once; an ``mcp_`` token of the same person keeps working on the same endpoint.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import re
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from mcp_server.oauth.scopes import describe
from tests.support.auth import manage, shell
from tests.support.live import LiveServer
from tests.support.oauth import Browser, make_user, start_oauth_server
from tests.support.raw import initialize
from tests.support.signin import SignIn
from tests.support.wait import wait_for

APPS = "/oauth/apps/"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # No token cache: test_last_used_is_recorded_behind_the_request backdates a token with a
    # QuerySet.update() from another process, which a cached row would show only after the TTL (docs,
    # *Token lookup*); a real token ages in the cache as in the database.
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-apps"), {"OAUTH_TOKEN_CACHE_TTL": 0})
    make_user(server, "bob")
    yield server
    server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def app_row(page: str, client_id: str) -> str:
    """The page's table row of the app ``client_id`` (``""`` when it is not listed)."""
    rows = re.findall(r'<tr class="connected-app".*?</tr>', page, re.S)
    return next((row for row in rows if f'data-client-id="{client_id}"' in row), "")


def revoke_action(row: str) -> str:
    found = re.search(r'<form method="post" action="(/oauth/apps/\d+/revoke/)"', row)
    assert found, row
    return found.group(1)


def csrf(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found
    return found.group(1)


async def test_the_page_needs_a_signed_in_person(site: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=site.base, timeout=30) as http:
        page = await http.get(APPS)
    assert page.status_code == 302
    assert page.headers["location"] == "/accounts/login/?next=/oauth/apps/"


@pytest.mark.parametrize(
    "path",
    ["/oauth/apps/99999999999999999999999999/revoke/", "/oauth/apps/0/revoke/", "/oauth/apps/x%00/revoke/"],
)
async def test_a_revoke_of_no_app_of_yours_is_refused_clearly(site: LiveServer, path: str) -> None:
    browser = Browser.open(site)
    try:
        await browser.login("bob")
        await browser.http.get(APPS)
        token = browser.http.cookies["csrftoken"]  # (bob has no app: the page shows no form)
        answer = await browser.http.post(path, data={"csrfmiddlewaretoken": token})
        assert answer.status_code in (302, 404), answer.text[:300]  # the page's message, or no such URL
        if answer.status_code == 302:
            shown = await browser.http.get(answer.headers["location"])
            assert "That app is not connected to your account." in shown.text
    finally:
        await browser.close()


async def test_a_person_revokes_a_connected_app_and_its_tokens_stop(site: LiveServer) -> None:
    sign_in = SignIn(site, client_name="Revocable <test> client")
    bob = Browser.open(site)
    try:
        assert (await sign_in.whoami())["user"] == "alice"
        info, tokens = sign_in.storage.client_info, sign_in.storage.tokens
        assert info is not None
        assert tokens is not None
        assert tokens.refresh_token
        person = sign_in.browser.http
        page = await person.get(APPS)
        assert page.status_code == 200
        assert page.headers["x-frame-options"] == "DENY"
        row = app_row(page.text, info.client_id)
        assert "Revocable &lt;test&gt; client" in row  # escaped: a client chooses its name
        assert "Registered itself (dynamic client registration)" in row
        assert html.escape(describe("mcp")) in html.escape(html.unescape(row))
        assert row.count("ago</time>") == 2  # connected, last used
        action = revoke_action(row)

        refused = await person.post(action, data={})  # no CSRF token: nothing is revoked
        assert refused.status_code == 403
        await bob.login("bob")
        other = await bob.http.post(action, data={"csrfmiddlewaretoken": bob.http.cookies["csrftoken"]})
        assert other.status_code == 302  # bob holds no token of it: his revoke touches nothing of alice's
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await initialize(http, site.url, **bearer(tokens.access_token))).status_code == 200

            done = await person.post(action, data={"csrfmiddlewaretoken": csrf(page.text)})
            assert done.status_code == 302
            assert done.headers["location"] == APPS
            after = await person.get(APPS)
            assert app_row(after.text, info.client_id) == ""
            assert "Revoked Revocable &lt;test&gt; client" in after.text

            gone = await initialize(http, site.url, **bearer(tokens.access_token))
            assert gone.status_code == 401
            assert 'error="invalid_token"' in gone.headers["www-authenticate"]
            refresh = await http.post(
                f"{site.base}/oauth/token/",
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": tokens.refresh_token,
                    "client_id": info.client_id,
                },
            )
        assert refresh.status_code == 400
        assert refresh.json()["error"] == "invalid_grant"
    finally:
        await sign_in.browser.close()
        await bob.close()


def _ledger_rows(site: LiveServer, method: str) -> list[tuple[str, str, str]]:
    code = (
        "import json; from mcp_server.models import LedgerEntry as L;"
        f"print(json.dumps(list(L.objects.filter(method={method!r}, state='answered')"
        ".values_list('client', 'oauth_client_id', 'oauth_client_name'))))"
    )
    return [(a, b, c) for a, b, c in json.loads(shell(site, code).strip().splitlines()[-1])]


async def test_the_ledger_names_the_oauth_client_and_an_mcp_token_works_beside_it(site: LiveServer) -> None:
    token = manage(site, "mcp_token", "create", "alice").strip().split()[-1]
    assert token.startswith("mcp_")
    sign_in = SignIn(site, client_name="Ledger test client")
    oauth_info = Implementation(name="oauth-client", version="1")
    token_info = Implementation(name="token-client", version="1")
    try:
        async with (
            sign_in.http() as oauth_http,
            Client(
                streamable_http_client(site.url, http_client=oauth_http), client_info=oauth_info
            ) as via_oauth,
            httpx2.AsyncClient(headers=bearer(token), timeout=30) as token_http,
            Client(
                streamable_http_client(site.url, http_client=token_http), client_info=token_info
            ) as via_token,
        ):  # both sessions open on the same endpoint at once
            for client in (via_oauth, via_token, via_oauth):
                result = await client.call_tool("whoami", {})
                assert not result.is_error, result
                assert (result.structured_content or {})["user"] == "alice"
        info = sign_in.storage.client_info
        assert info is not None
        oauth_row = ("oauth-client 1", info.client_id, "Ledger test client")
        token_row = ("token-client 1", "", "")
        await wait_for(
            lambda: asyncio.to_thread(
                lambda: {oauth_row, token_row} <= set(_ledger_rows(site, "tools/call"))
            ),
            "both calls in the ledger",
            within=30,
            every=0.2,
        )
        tokens = sign_in.storage.tokens
        assert tokens is not None
        async with httpx.AsyncClient(timeout=30) as http:  # a 2025-11-25 handshake with the same token
            assert (await initialize(http, site.url, **bearer(tokens.access_token))).status_code == 200
        handshake = ("raw-http-tests 1.0", info.client_id, "Ledger test client")
        await wait_for(
            lambda: asyncio.to_thread(lambda: handshake in _ledger_rows(site, "initialize")),
            "the handshake in the ledger",
            within=30,
            every=0.2,
        )
        assert oauth_row in _ledger_rows(site, "server/discover")
    finally:
        await sign_in.browser.close()


async def test_last_used_is_recorded_behind_the_request(site: LiveServer) -> None:
    sign_in = SignIn(site, client_name="Last used client")
    try:
        assert (await sign_in.whoami())["user"] == "alice"
        tokens, info = sign_in.storage.tokens, sign_in.storage.client_info
        assert tokens is not None
        assert info is not None
        checksum = hashlib.sha256(tokens.access_token.encode()).hexdigest()
        backdate = (
            "from datetime import timedelta; from django.utils import timezone;"
            "from oauth2_provider.models import AccessToken, RefreshToken;"
            "then = timezone.now() - timedelta(hours=3);"
            f"AccessToken.objects.filter(token_checksum={checksum!r}).update(created=then, updated=then);"
            f"RefreshToken.objects.filter(application__client_id={info.client_id!r}).update(created=then)"
        )
        shell(site, backdate)
        row = app_row((await sign_in.browser.http.get(APPS)).text, info.client_id)
        assert re.findall(r">([^<>]*) ago</time>", row) == [
            "3\xa0hours",
            "3\xa0hours",
        ]  # connected, last used

        assert (await sign_in.whoami())["user"] == "alice"  # the same access token, used now
        recent = (
            "from datetime import timedelta; from django.utils import timezone;"
            "from oauth2_provider.models import AccessToken;"
            f"t = AccessToken.objects.get(token_checksum={checksum!r});"
            "print(timezone.now() - t.updated < timedelta(seconds=60))"
        )
        await wait_for(
            lambda: asyncio.to_thread(lambda: shell(site, recent).strip().endswith("True")),
            "the use to be written",
            within=30,
            every=0.2,
        )
        row = app_row((await sign_in.browser.http.get(APPS)).text, info.client_id)
        assert re.findall(r">([^<>]*) ago</time>", row) == ["3\xa0hours", "0\xa0minutes"]
    finally:
        await sign_in.browser.close()
