"""The official client signs in to the site as its own authorization server, headlessly, end to end.

``OAuthClientProvider`` discovers (401 → PRM → RFC 8414), registers (DCR), sends the person to the
authorize URL (the redirect handler records it), and the callback handler plays the browser: a Django
session signed in as alice, the consent page, Allow, then ``code``, ``state`` and ``iss`` from the redirect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.oauth import make_user, start_oauth_server
from tests.support.raw import initialize
from tests.support.signin import REDIRECT, SignIn


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # No refresh grace: a replay is refused at once (the window has tests of its own, test_grace.py).
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-flow"), {"OAUTH_REFRESH_GRACE": 0})
    yield server
    server.stop()


@pytest.fixture
async def signed_in(site: LiveServer) -> AsyncIterator[SignIn]:
    sign_in = SignIn(site)
    assert (await sign_in.whoami())["user"] == "alice"
    yield sign_in
    await sign_in.browser.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_official_client_signs_in_registers_and_calls_a_tool(signed_in: SignIn) -> None:
    assert len(signed_in.authorize_urls) == 1
    url = signed_in.authorize_urls[0]
    assert "code_challenge_method=S256" in url
    assert "resource=" in url
    info = signed_in.storage.client_info
    assert info is not None
    assert info.client_id
    tokens = signed_in.storage.tokens
    assert tokens is not None
    assert tokens.refresh_token
    assert tokens.scope == "mcp"
    assert tokens.expires_in is not None
    assert tokens.expires_in <= 3600


async def test_the_client_refreshes_with_rotation_and_a_replayed_refresh_token_is_refused(
    site: LiveServer, signed_in: SignIn
) -> None:
    first = signed_in.storage.tokens
    assert first is not None
    signed_in.provider.context.token_expiry_time = 1.0  # the access token looks expired: the client refreshes
    assert (await signed_in.whoami())["user"] == "alice"
    second = signed_in.storage.tokens
    assert second is not None
    assert second.access_token != first.access_token
    assert second.refresh_token != first.refresh_token  # rotated
    info = signed_in.storage.client_info
    assert info is not None
    async with httpx.AsyncClient(base_url=site.base, timeout=30) as http:
        replay = await http.post(
            "/oauth/token/",
            data={
                "grant_type": "refresh_token",
                "refresh_token": first.refresh_token,
                "client_id": info.client_id,
            },
        )
        assert replay.status_code == 400
        assert replay.json()["error"] == "invalid_grant"
        # The replay revoked the family: the rotated refresh token no longer works either.
        after = await http.post(
            "/oauth/token/",
            data={
                "grant_type": "refresh_token",
                "refresh_token": second.refresh_token,
                "client_id": info.client_id,
            },
        )
        assert after.status_code == 400, after.text


async def test_revoked_tokens_stop_and_another_endpoint_refuses_the_token(
    site: LiveServer, signed_in: SignIn
) -> None:
    tokens = signed_in.storage.tokens
    info = signed_in.storage.client_info
    assert tokens is not None
    assert info is not None
    async with httpx.AsyncClient(timeout=30) as http:
        ok = await initialize(http, site.url, **bearer(tokens.access_token))
        assert ok.status_code == 200
        staff = await initialize(http, f"{site.base}/staff/mcp", **bearer(tokens.access_token))
        assert staff.status_code == 401
        assert 'error="invalid_token"' in staff.headers["www-authenticate"]
        revoked = await http.post(
            f"{site.base}/oauth/revoke/", data={"token": tokens.access_token, "client_id": info.client_id}
        )
        assert revoked.status_code == 200
        gone = await initialize(http, site.url, **bearer(tokens.access_token))
        assert gone.status_code == 401
        assert 'error="invalid_token"' in gone.headers["www-authenticate"]


async def test_an_inactive_users_token_stops_on_the_next_request(site: LiveServer, tmp_path: Path) -> None:
    make_user(site, "alice")
    sign_in = SignIn(site)
    try:
        assert (await sign_in.whoami())["user"] == "alice"
        tokens = sign_in.storage.tokens
        assert tokens is not None
        make_user(site, "alice", is_active=False)
        async with httpx.AsyncClient(timeout=30) as http:
            refused = await initialize(http, site.url, **bearer(tokens.access_token))
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    finally:
        make_user(site, "alice", is_active=True)
        await sign_in.browser.close()


async def test_mcp_tokens_keep_working_beside_oauth(site: LiveServer) -> None:
    from tests.support.auth import manage

    token = manage(site, "mcp_token", "create", "alice").strip().split()[-1]
    assert token.startswith("mcp_")
    async with httpx.AsyncClient(timeout=30) as http:
        ok = await initialize(http, site.url, **bearer(token))
    assert ok.status_code == 200


async def test_unused_registrations_are_pruned_and_used_ones_kept(
    site: LiveServer, signed_in: SignIn
) -> None:
    from tests.support.auth import manage, shell

    info = signed_in.storage.client_info
    assert info is not None
    async with httpx.AsyncClient(timeout=30) as http:
        unused = await http.post(
            f"{site.base}/oauth/register/",
            json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"},
        )
    assert unused.status_code == 201
    assert "Would delete 0" in manage(site, "mcp_oauth_prune", "--dry-run")  # younger than a day
    assert "Deleted" in manage(site, "mcp_oauth_prune", "--hours", "0")
    kept = shell(
        site,
        "from oauth2_provider.models import Application as A;"
        "print(sorted(A.objects.values_list('client_id', flat=True)))",
    )
    assert info.client_id in kept
    assert unused.json()["client_id"] not in kept


async def test_the_demo_home_page_says_clients_sign_in(site: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        home = await http.get(site.base + "/")
    assert home.status_code == 200
    assert "sign in with OAuth" in home.text
    assert "mcp_stdio --user &lt;username&gt;" in home.text
