"""The authorization server's admin, live: every app, token and code with whose, which client, what access,
which endpoint, until when; the *Revoke* actions revoke through DOT's own paths.

An operator signs in to the admin of a live site with the authorization server on; the rows are made in the
site's database by ``manage.py shell`` (a token pair and a pending code per connection).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.support.auth import shell as site_shell
from tests.support.live import LiveServer
from tests.support.oauth import PASSWORD, make_user, start_oauth_server

ADMIN = "/admin/oauth2_provider"
ENDPOINT = "http://127.0.0.1/mcp"

CONNECT = f"""
import json, secrets, uuid
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken

def connect(username, application=None, name="Claude"):
    user, _ = get_user_model().objects.get_or_create(username=username)
    if application is None:
        application = Application.objects.create(
            name=name, client_type="public", authorization_grant_type="authorization-code",
            redirect_uris="http://127.0.0.1:9/cb", registration_source="dcr",
        )
    now = timezone.now()
    access = AccessToken.objects.create(
        user=user, application=application, token=secrets.token_urlsafe(32),
        expires=now + timedelta(hours=1), scope="mcp", resource=[{ENDPOINT!r}],
    )
    refresh = RefreshToken.objects.create(
        user=user, application=application, token=secrets.token_urlsafe(32), access_token=access,
        token_family=uuid.uuid4(), resource=[{ENDPOINT!r}],
    )
    grant = Grant.objects.create(
        user=user, application=application, code=secrets.token_urlsafe(16),
        expires=now + timedelta(seconds=60), redirect_uri="http://127.0.0.1:9/cb", scope="mcp",
        code_challenge="x" * 43, code_challenge_method="S256", resource=[{ENDPOINT!r}],
    )
    return {{"app": application.pk, "access": access.pk, "refresh": refresh.pk, "grant": grant.pk,
             "family": str(refresh.token_family)}}
"""
"""``connect(username, application_pk=None, name=...)`` in the site's shell: a connection's rows."""

STATE = """
import json
from oauth2_provider.models import AccessToken, Grant, RefreshToken
def state(c):
    return {"access": AccessToken.objects.filter(pk=c["access"]).exists(),
            "refresh_live": RefreshToken.objects.filter(pk=c["refresh"], revoked__isnull=True).exists(),
            "grant": Grant.objects.filter(pk=c["grant"]).exists()}
"""


def shell(site: LiveServer, code: str) -> Any:
    """Run ``code`` in the site's shell; the JSON it printed last."""
    return json.loads(site_shell(site, code).strip().splitlines()[-1])


def connections(site: LiveServer, *specs: str) -> list[dict[str, Any]]:
    """Make connections: ``"user"``, ``"user:name"`` (a new app), ``"user@<i>"`` (the ``i``-th one's app)."""
    lines = ["made = []"]
    for spec in specs:
        if "@" in spec:
            user, index = spec.split("@")
            lines.append(
                f"made.append(connect({user!r}, Application.objects.get(pk=made[{int(index)}]['app'])))"
            )
        else:
            user, _, name = spec.partition(":")
            lines.append(f"made.append(connect({user!r}, name={name or 'Claude'!r}))")
    made: list[dict[str, Any]] = shell(site, CONNECT + "\n".join(lines) + "\nprint(json.dumps(made))")
    return made


def states(site: LiveServer, made: list[dict[str, Any]]) -> list[dict[str, bool]]:
    found: list[dict[str, bool]] = shell(site, STATE + f"print(json.dumps([state(c) for c in {made!r}]))")
    return found


REVOKED = {"access": False, "refresh_live": False, "grant": False}
LIVE = {"access": True, "refresh_live": True, "grant": True}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-admin"))
    make_user(server, "root", is_staff=True, is_superuser=True)
    yield server
    server.stop()


@pytest.fixture
async def operator(site: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=site.base, timeout=30) as http:
        await http.get("/admin/login/")
        signed = await http.post(
            "/admin/login/",
            data={
                "username": "root",
                "password": PASSWORD,
                "csrfmiddlewaretoken": http.cookies["csrftoken"],
                "next": "/admin/",
            },
        )
        assert signed.status_code == 302, signed.text
        yield http


async def act(http: httpx.AsyncClient, model: str, action: str, *pks: Any) -> str:
    """Run an admin action on ``pks``; the messages it left."""
    data: dict[str, Any] = {"action": action, "_selected_action": [str(pk) for pk in pks]}
    data["csrfmiddlewaretoken"] = http.cookies["csrftoken"]
    done = await http.post(f"{ADMIN}/{model}/", data=data, follow_redirects=True)
    assert done.status_code == 200, done.text
    return " ".join(re.findall(r'<li class="(?:success|info)">(.*?)</li>', done.text))


async def test_the_lists_say_whose_which_client_what_access_and_until_when(
    site: LiveServer, operator: httpx.AsyncClient
) -> None:
    first, _second = connections(site, "alice:Cursor", "bob@0")
    tokens = (await operator.get(f"{ADMIN}/accesstoken/", params={"live": "1"})).text
    for cell in ("field-user", "field-application", "field-scope", "field-audience", "field-expires"):
        assert cell in tokens
    assert ENDPOINT in tokens
    assert "alice" in tokens
    apps = (await operator.get(f"{ADMIN}/application/", params={"q": "Cursor"})).text
    assert '<td class="field-people">2</td>' in apps
    assert "Registered itself (dynamic client registration)" in apps
    refresh = (await operator.get(f"{ADMIN}/refreshtoken/", params={"state": "live"})).text
    assert first["family"][:8] in refresh
    codes = (await operator.get(f"{ADMIN}/grant/", params={"live": "1"})).text
    assert "field-audience" in codes
    assert ENDPOINT in codes


async def test_revoke_selected_tokens_and_codes(site: LiveServer, operator: httpx.AsyncClient) -> None:
    by_access, by_refresh, by_code = connections(site, "carol", "carol", "carol")
    assert "Revoked 1 access token" in await act(
        operator, "accesstoken", "revoke_tokens", by_access["access"]
    )
    assert "Revoked 1 refresh token" in await act(
        operator, "refreshtoken", "revoke_tokens", by_refresh["refresh"]
    )
    assert "Revoked 1 code" in await act(operator, "grant", "revoke_codes", by_code["grant"])
    after = states(site, [by_access, by_refresh, by_code])
    assert after[0] == {"access": False, "refresh_live": False, "grant": True}  # the pair goes together
    assert after[1] == {"access": False, "refresh_live": False, "grant": True}
    assert after[2] == {"access": True, "refresh_live": True, "grant": False}


async def test_revoke_all_tokens_of_the_selected_apps(site: LiveServer, operator: httpx.AsyncClient) -> None:
    made = connections(site, "dave:Shared app", "erin@0", "dave:Another app")
    message = await act(operator, "application", "revoke_all_tokens", made[0]["app"])
    assert "Revoked 2 tokens" in message
    assert states(site, made) == [REVOKED, REVOKED, LIVE]


async def test_last_used_is_written_once_per_interval(site: LiveServer) -> None:
    (made,) = connections(site, "heidi")
    script = f"""
import asyncio, json
from datetime import timedelta
from django.core.cache import cache
from django.utils import timezone
from oauth2_provider.models import AccessToken
from mcp_server.oauth import usage

async def main():
    rows = AccessToken.objects.filter(pk={made["access"]})
    await rows.aupdate(updated=timezone.now() - timedelta(hours=2))
    token = await rows.aget()
    usage.note_use(token)
    usage.note_use(token)  # the same worker within the interval: no second write
    first = usage.pending_writes()
    await asyncio.gather(*usage._tasks)
    fresh = await rows.aget()
    usage.note_use(fresh)  # a row written within the interval: nothing to do, no query
    return [first, usage.pending_writes(), (timezone.now() - fresh.updated).total_seconds()]

cache.clear()
print(json.dumps(asyncio.run(main())))
"""
    first, second, age = shell(site, script)
    assert (first, second) == (1, 0)
    assert age < 60
