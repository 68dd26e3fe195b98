"""Raw OAuth requests for the tests: register a client, build an authorize URL, get and exchange a code."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import httpx

from tests.support.live import LiveServer
from tests.support.oauth import Browser, pkce

__all__ = ["REDIRECT", "authorize_url", "client_id", "exchange", "get_code", "register"]

REDIRECT = "http://127.0.0.1:9999/cb"


async def register(http: httpx.AsyncClient, **metadata: Any) -> httpx.Response:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **metadata}
    return await http.post("/oauth/register/", json=body)


async def client_id(http: httpx.AsyncClient, **metadata: Any) -> str:
    done = await register(http, **metadata)
    assert done.status_code == 201, done.text
    return str(done.json()["client_id"])


def authorize_url(site: LiveServer, cid: str, **params: str) -> str:
    _verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": cid,
        "redirect_uri": REDIRECT,
        "state": "s-123",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": site.url,
        "scope": "mcp",
    }
    query.update(params)
    return "/oauth/authorize/?" + urlencode({k: v for k, v in query.items() if v != "-"})


async def get_code(site: LiveServer, browser: Browser, cid: str, **params: str) -> tuple[str, str]:
    verifier, challenge = pkce()
    url = authorize_url(site, cid, code_challenge=challenge, **params)
    answer = await browser.authorize(url)
    assert answer["state"] == "s-123"
    assert answer["iss"] == site.base
    return answer["code"], verifier


async def exchange(
    http: httpx.AsyncClient, site: LiveServer, cid: str, code: str, verifier: str
) -> httpx.Response:
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": cid,
        "code_verifier": verifier,
        "resource": site.url,
    }
    return await http.post("/oauth/token/", data=data)
