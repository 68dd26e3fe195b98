"""Bad input to the site's token endpoint, and what tokens are: codes once, refresh tokens per client, stored
hashed, bound to an endpoint, stopped with their user, throttled."""

from __future__ import annotations

import httpx
import pytest

from tests.support.auth import shell
from tests.support.live import LiveServer
from tests.support.oauth import Browser, start_oauth_server
from tests.support.raw import initialize
from tests.support.raw_oauth import REDIRECT, client_id, exchange, get_code, register

# -- tokens ------------------------------------------------------------------------------------------------


async def test_a_code_works_once_and_with_its_verifier_only(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    code, verifier = await get_code(site, browser, cid)
    wrong = await exchange(http, site, cid, code, verifier[::-1])
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"
    code, verifier = await get_code(site, browser, cid)
    first = await exchange(http, site, cid, code, verifier)
    assert first.status_code == 200, first.text
    token = first.json()
    assert token["token_type"] == "Bearer"
    assert token["expires_in"] <= 3600
    again = await exchange(http, site, cid, code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    # The second use revoked what the first gave: the access token and the refresh token.
    used = await initialize(http, site.url, Authorization=f"Bearer {token['access_token']}")
    assert used.status_code == 401
    refresh = await http.post(
        "/oauth/token/",
        data={"grant_type": "refresh_token", "refresh_token": token["refresh_token"], "client_id": cid},
    )
    assert refresh.status_code == 400
    assert refresh.json()["error"] == "invalid_grant"


async def test_a_refresh_token_of_another_client_is_refused(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    mine, other = await client_id(http), await client_id(http)
    code, verifier = await get_code(site, browser, mine)
    token = (await exchange(http, site, mine, code, verifier)).json()
    stolen = await http.post(
        "/oauth/token/",
        data={"grant_type": "refresh_token", "refresh_token": token["refresh_token"], "client_id": other},
    )
    assert stolen.status_code == 400
    assert stolen.json()["error"] == "invalid_grant"


async def test_tokens_are_stored_hashed_and_never_taken_from_the_query(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    code, verifier = await get_code(site, browser, cid)
    token = (await exchange(http, site, cid, code, verifier)).json()
    stored = shell(
        site,
        "from oauth2_provider.models import AccessToken, RefreshToken;"
        "print(list(AccessToken.objects.values_list('token', flat=True)) +"
        " list(RefreshToken.objects.values_list('token', flat=True)))",
    )
    assert token["access_token"] not in stored
    assert token["refresh_token"] not in stored
    query = await initialize(http, f"{site.url}?access_token={token['access_token']}")
    assert query.status_code == 401
    header = await initialize(http, site.url, Authorization=f"Bearer {token['access_token']}")
    assert header.status_code == 200


async def test_a_token_without_audience_is_refused(site: LiveServer, http: httpx.AsyncClient) -> None:
    plain = shell(
        site,
        "import secrets; from datetime import timedelta; from django.utils import timezone;"
        "from django.contrib.auth import get_user_model;"
        "from oauth2_provider.models import AccessToken, get_application_model, set_token_value;"
        "app = get_application_model().objects.create(name='x', client_type='public',"
        " authorization_grant_type='authorization-code', redirect_uris='http://127.0.0.1/cb');"
        "t = AccessToken(user=get_user_model().objects.get(username='alice'), application=app, scope='mcp',"
        " expires=timezone.now() + timedelta(hours=1)); raw = secrets.token_urlsafe(30);"
        "set_token_value(t, raw); t.save(); print(raw)",
    ).split()[-1]  # the shell prints its auto-imports first
    refused = await initialize(http, site.url, Authorization=f"Bearer {plain}")
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]


async def test_a_flood_of_token_and_registration_requests_is_throttled(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    strict = start_oauth_server(
        tmp_path_factory.mktemp("oauth-throttle"), {"OAUTH_THROTTLE": {"token": 5, "register": 3}}
    )
    try:
        async with httpx.AsyncClient(base_url=strict.base, timeout=30) as http:
            registered = [(await register(http)).status_code for _ in range(6)]
            tokens = [
                (
                    await http.post(
                        "/oauth/token/", data={"grant_type": "refresh_token", "refresh_token": "x"}
                    )
                ).status_code
                for _ in range(12)
            ]
            last = await http.post(
                "/oauth/token/", data={"grant_type": "refresh_token", "refresh_token": "x"}
            )
    finally:
        strict.stop()
    # A window may turn over during the flood: at most two windows' worth get through.
    assert registered.count(201) <= 6
    assert 429 in registered
    assert set(tokens) <= {400, 401, 429}
    assert 429 in tokens
    assert tokens.count(429) >= 12 - 10
    if last.status_code == 429:
        assert last.json()["error"] == "slow_down"
        assert int(last.headers["retry-after"]) >= 1


@pytest.mark.parametrize(
    ("data", "error"),
    [
        # Only the advertised grants reach DOT: RFC 9700 2.4 forbids the password grant, and DOT's device
        # flow answered a device_code grant without its code with a 500
        ({"grant_type": "password", "username": "alice", "password": "x"}, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
        ({"grant_type": "urn:ietf:params:oauth:grant-type:device_code"}, "unsupported_grant_type"),
        (
            {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": "x"},
            "unsupported_grant_type",
        ),
        ({"grant_type": "implicit"}, "unsupported_grant_type"),
        ({"grant_type": "nonsense"}, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "code": "nope", "redirect_uri": REDIRECT}, "invalid_grant"),
        ({"grant_type": "refresh_token", "refresh_token": "nope"}, "invalid_grant"),
        ({}, "unsupported_grant_type"),
    ],
)
async def test_bad_token_requests_get_the_rfc_error(
    http: httpx.AsyncClient, data: dict[str, str], error: str
) -> None:
    cid = await client_id(http)
    done = await http.post("/oauth/token/", data={**data, "client_id": cid})
    assert done.status_code == (401 if error == "invalid_client" else 400), done.text
    assert done.json()["error"] == error


async def test_a_deleted_users_token_stops(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    from tests.support.oauth import make_user

    make_user(site, "temp")
    temp = Browser.open(site)
    await temp.login("temp")
    cid = await client_id(http)
    try:
        code, verifier = await get_code(site, temp, cid)
    finally:
        await temp.close()
    token = (await exchange(http, site, cid, code, verifier)).json()
    assert (
        await initialize(http, site.url, Authorization=f"Bearer {token['access_token']}")
    ).status_code == 200
    shell(
        site,
        "from django.contrib.auth import get_user_model as g; g().objects.filter(username='temp').delete()",
    )
    refused = await initialize(http, site.url, Authorization=f"Bearer {token['access_token']}")
    assert refused.status_code == 401
