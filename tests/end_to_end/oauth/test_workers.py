"""Two workers of one site on PostgreSQL + Redis: a token issued through one works at the other, the token
cache is shared (and holds no token), a revocation or a deactivation at one is seen at the other's next
request, and the refresh grace spans the workers.

Both workers stand behind one public address, as behind a load balancer: requests to B carry A's ``Host``,
so the endpoint's canonical URL (the tokens' audience) is the same at both.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis

from tests.support.live import REDIS_URL, LiveServer, shared_site, start_server
from tests.support.oauth import ON, make_user
from tests.support.raw import initialize
from tests.support.signin import SignIn


@dataclass
class Site:
    a: LiveServer
    b: LiveServer
    prefix: str
    """The site's key prefix in Redis."""

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.a.port}"

    async def at_b(self, http: httpx.AsyncClient, token: str) -> int:
        done = await initialize(http, self.b.url, Authorization=f"Bearer {token}", Host=self.host)
        assert done.status_code in {200, 401}, done.text
        return done.status_code


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("oauth-workers")
    with shared_site(**ON) as env:  # migrated with DOT's tables too
        settings = {"OAUTH_THROTTLE": {"token": 1000, "register": 1000}}
        a = start_server(directory, settings, name="a", **env, **ON)
        try:
            b = start_server(directory, settings, name="b", **env, **ON)
            try:
                make_user(a, "alice")
                yield Site(a, b, env["MCP_TEST_REDIS_PREFIX"])
            finally:
                b.stop()
        finally:
            a.stop()


async def signed_in(site: Site) -> tuple[SignIn, str, str]:
    """The official client's whole flow against worker A: the sign-in, its access token and client id."""
    sign_in = SignIn(site.a)
    assert (await sign_in.whoami())["user"] == "alice"
    tokens, info = sign_in.storage.tokens, sign_in.storage.client_info
    assert tokens is not None
    assert info is not None
    return sign_in, tokens.access_token, info.client_id


async def test_a_token_from_a_works_at_b_and_its_revocation_at_a_is_seen_at_b(site: Site) -> None:
    sign_in, token, cid = await signed_in(site)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            assert await site.at_b(http, token) == 200
            assert await site.at_b(http, token) == 200  # from the cache now
            store = redis.Redis.from_url(REDIS_URL)
            try:
                key = f"{site.prefix}:1:mcp-oauth-token:{hashlib.sha256(token.encode()).hexdigest()}"
                cached = store.get(key)
            finally:
                store.close()
            assert cached is not None, "B did not cache the token's row"
            assert token.encode() not in cached
            assert b"md5$" not in cached  # nor the user's password hash (MD5 in the tests)
            revoked = await http.post(f"{site.a.base}/oauth/revoke/", data={"token": token, "client_id": cid})
            assert revoked.status_code == 200
            assert await site.at_b(http, token) == 401
    finally:
        await sign_in.browser.close()


async def test_a_user_deactivated_elsewhere_is_refused_at_b_on_the_next_request(site: Site) -> None:
    sign_in, token, _cid = await signed_in(site)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            assert await site.at_b(http, token) == 200
            make_user(site.a, "alice", is_active=False)  # in a process of its own (manage.py shell)
            assert await site.at_b(http, token) == 401
            make_user(site.a, "alice", is_active=True)
            assert await site.at_b(http, token) == 200
    finally:
        make_user(site.a, "alice", is_active=True)
        await sign_in.browser.close()


async def test_refreshes_at_a_and_at_b_at_once_get_the_same_tokens(site: Site) -> None:
    sign_in, _token, cid = await signed_in(site)
    await sign_in.browser.close()
    tokens = sign_in.storage.tokens
    assert tokens is not None
    assert tokens.refresh_token
    data = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token, "client_id": cid}
    async with httpx.AsyncClient(timeout=30) as http:
        answers = await asyncio.gather(
            http.post(f"{site.a.base}/oauth/token/", data=data),
            http.post(f"{site.b.base}/oauth/token/", data=data, headers={"Host": site.host}),
        )
        assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
        one, two = (answer.json() for answer in answers)
        assert one["access_token"] == two["access_token"]
        assert one["refresh_token"] == two["refresh_token"]
        assert await site.at_b(http, one["access_token"]) == 200
