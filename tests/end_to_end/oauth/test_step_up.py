"""Scopes that mean something: a call the user may make but the token's scopes do not reach is answered 403
``insufficient_scope`` naming the scopes to ask for, and the official client steps up from a narrow scope to a
wider one, against a live site that is its own authorization server.

alice has no permission: ``lend`` (``catalogue.add_loan``) and ``staff_only`` (staff) are hers to never see,
whatever the token's scopes; ``echo`` and ``whoami`` she may use.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult
from mcp.client.streamable_http import streamable_http_client

from tests.support.live import LiveServer
from tests.support.oauth import Browser, start_oauth_server
from tests.support.raw import RawSession, open_session, rpc, sessionless_headers, sessionless_meta
from tests.support.raw_oauth import client_id, exchange, get_code
from tests.support.signin import SignIn
from tests.support.wait import wait_for

REQUIRED = "django-mcp-ledger/requiredScope"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-step-up"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sse_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = start_oauth_server(tmp_path_factory.mktemp("oauth-step-up-sse"), {"RESPONSE_MODE": "sse"})
    yield server
    server.stop()


async def narrow_token(server: LiveServer, scope: str) -> str:
    """An access token for alice with ``scope`` only, through the raw authorization code flow."""
    browser = Browser.open(server)
    try:
        await browser.login()
        async with httpx.AsyncClient(base_url=server.base, timeout=30) as http:
            cid = await client_id(http)
            code, verifier = await get_code(server, browser, cid, scope=scope)
            done = await exchange(http, server, cid, code, verifier)
        assert done.status_code == 200, done.text
        assert done.json()["scope"] == scope
        return str(done.json()["access_token"])
    finally:
        await browser.close()


@pytest.fixture
async def echo_only(site: LiveServer) -> AsyncIterator[RawSession]:
    """A session of alice's whose token has the scope ``tool:echo`` alone."""
    token = await narrow_token(site, "tool:echo")
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        yield await open_session(http, site.url)


def challenge(site: LiveServer, scope: str, what: str, needed: str) -> str:
    """The ``WWW-Authenticate`` value of the 403, exactly."""
    return (
        f'Bearer error="insufficient_scope", scope="{scope}", '
        f'resource_metadata="{site.base}/.well-known/oauth-protected-resource/mcp", '
        f'error_description="Insufficient scope: the token does not reach {what}; authorize {needed}"'
    )


LISTS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


async def listing(session: RawSession, method: str, key: str) -> dict[str, dict[str, Any]]:
    """Every entry of a list method (all pages), by ``key`` (its name or URI)."""
    entries: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    while True:
        result = (await session.request(method, {"cursor": cursor} if cursor else {}))["result"]
        entries |= {e[key]: e for e in result[LISTS[method]]}
        cursor = result.get("nextCursor")
        if not cursor:
            return entries


# -- discovery ------------------------------------------------------------------------------------------


async def test_the_401_and_the_metadata_name_the_default_scope(site: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(site.url, json=rpc("ping"), headers={"Accept": "application/json"})
        prm = (await http.get(f"{site.base}/.well-known/oauth-protected-resource/mcp")).json()
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        f'Bearer realm="mcp", resource_metadata="{site.base}/.well-known/oauth-protected-resource/mcp", '
        'scope="mcp"'
    )
    assert prm["scopes_supported"] == ["mcp"]


# -- the 403 ----------------------------------------------------------------------------------------------


async def test_a_call_out_of_scope_is_refused_403_with_every_scope_to_ask_for(
    site: LiveServer, echo_only: RawSession
) -> None:
    echoed = await echo_only.call_tool("echo", {"text": "hi"})
    assert echoed["result"]["content"][0]["text"] == "hi"
    refused = await echo_only.post(rpc("tools/call", {"name": "whoami", "arguments": {}}, "r-1"))
    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/json"
    assert refused.headers["www-authenticate"] == challenge(
        site, "tool:echo tool:whoami", "the tool 'whoami'", "tool:whoami"
    )
    body = refused.json()  # a JSON-RPC client that knows nothing of OAuth still gets its reply
    assert body["id"] == "r-1"
    assert body["error"] == {
        "code": -32005,
        "message": "Insufficient scope: the token does not reach the tool 'whoami'; authorize tool:whoami",
        "data": {
            "error": "insufficient_scope",
            "scope": "tool:echo tool:whoami",
            "requiredScopes": ["tool:whoami"],
        },
    }
    read = await echo_only.post(rpc("resources/read", {"uri": "auth://public"}, 2))
    assert read.status_code == 403
    assert 'scope="tool:echo resource:auth://public"' in read.headers["www-authenticate"]


async def test_what_the_users_permissions_forbid_stays_invisible(echo_only: RawSession) -> None:
    for name in ("lend", "staff_only"):
        response = await echo_only.post(rpc("tools/call", {"name": name, "arguments": {"book": "x"}}, 3))
        assert response.status_code == 200
        assert "www-authenticate" not in response.headers
        assert response.json()["error"]["code"] == -32602
        assert response.json()["error"]["message"] == f"Unknown tool: {name}"
    ledger = await echo_only.post(rpc("resources/read", {"uri": "auth://ledger"}, 4))
    assert ledger.status_code == 200
    assert ledger.json()["error"]["code"] == -32002


async def test_tools_list_shows_what_the_token_lacks_marked_and_never_what_the_user_may_not_use(
    echo_only: RawSession,
) -> None:
    tools = await listing(echo_only, "tools/list", "name")
    assert REQUIRED not in (tools["echo"].get("_meta") or {})
    assert tools["whoami"]["_meta"][REQUIRED] == "tool:whoami"
    assert not {"lend", "staff_only"} & set(tools)
    resources = await listing(echo_only, "resources/list", "uri")
    assert resources["auth://public"]["_meta"][REQUIRED] == "resource:auth://public"
    assert "auth://ledger" not in resources
    templates = await listing(echo_only, "resources/templates/list", "uriTemplate")
    assert "auth://notes/{pk}" not in templates
    prompts = await listing(echo_only, "prompts/list", "name")
    assert "lending_letter" not in prompts


def ledger_rows(server: LiveServer, session_id: str, name: str) -> list[tuple[str, str, Any]]:
    """``(request id, state, outcome)`` of the session's ``tools/call`` rows for ``name``."""
    database = server.env["DATABASE_URL"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(database, timeout=30)) as db:
        rows = db.execute(
            "select request_key, state, outcome from mcp_server_ledgerentry"
            " where session_id = ? and method = 'tools/call' and name = ?",
            [session_id, name],
        ).fetchall()
    return [(key, state, json.loads(outcome) if outcome else None) for key, state, outcome in rows]


async def test_the_refused_request_is_settled_once_in_the_ledger(
    site: LiveServer, echo_only: RawSession
) -> None:
    refused = await echo_only.post(rpc("tools/call", {"name": "whoami", "arguments": {}}, 41))
    assert refused.status_code == 403
    assert echo_only.id is not None

    async def settled() -> bool:
        return any(state != "pending" for _k, state, _o in ledger_rows(site, echo_only.id or "", "whoami"))

    await wait_for(settled)
    rows = ledger_rows(site, echo_only.id, "whoami")
    assert len(rows) == 1
    _key, state, outcome = rows[0]
    assert state == "answered"
    assert outcome["error"]["code"] == -32005
    assert (await echo_only.stats())["pending"] == []  # the refusal left nothing in flight
    again = await echo_only.post(rpc("tools/call", {"name": "whoami", "arguments": {}}, 41))
    assert again.status_code == 403  # the id is free again: it was settled, not left pending


# -- where HTTP has no status to give -----------------------------------------------------------------------


async def test_sse_mode_answers_the_refusal_403_too(sse_site: LiveServer) -> None:
    token = await narrow_token(sse_site, "tool:echo")
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        session = await open_session(http, sse_site.url)
        refused = await session.post(rpc("tools/call", {"name": "whoami", "arguments": {}}, 9))
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == -32005
        assert refused.headers["www-authenticate"] == challenge(
            sse_site, "tool:echo tool:whoami", "the tool 'whoami'", "tool:whoami"
        )
        echoed = await session.post(rpc("tools/call", {"name": "echo", "arguments": {"text": "x"}}, 10))
        assert echoed.status_code == 200
        assert echoed.headers["content-type"].startswith("text/event-stream")


async def test_a_batch_member_out_of_scope_gets_the_error_naming_the_scopes(site: LiveServer) -> None:
    token = await narrow_token(site, "tool:echo")
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        session = await open_session(http, site.url, version="2025-03-26")
        batch = [
            rpc("tools/call", {"name": "echo", "arguments": {"text": "a"}}, 1),
            rpc("tools/call", {"name": "whoami", "arguments": {}}, 2),
        ]
        response = await session.post(batch)
    assert response.status_code == 200
    assert "www-authenticate" not in response.headers
    replies = {r["id"]: r for r in response.json()}
    assert replies[1]["result"]["content"][0]["text"] == "a"
    assert replies[2]["error"]["code"] == -32005
    assert replies[2]["error"]["data"]["scope"] == "tool:echo tool:whoami"


async def test_a_2026_request_out_of_scope_is_refused_403(site: LiveServer) -> None:
    token = await narrow_token(site, "tool:echo")
    params = {"name": "whoami", "arguments": {}, "_meta": sessionless_meta()}
    headers = sessionless_headers("tools/call", "whoami", Authorization=f"Bearer {token}")
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(site.url, json=rpc("tools/call", params, 5), headers=headers)
    assert refused.status_code == 403
    assert refused.json()["id"] == 5
    assert refused.headers["www-authenticate"] == challenge(
        site, "tool:echo tool:whoami", "the tool 'whoami'", "tool:whoami"
    )


# -- the official client steps up ----------------------------------------------------------------------------


class NarrowFirst(SignIn):
    """The official client's OAuth provider, with a person who grants only ``tool:echo`` the first time
    (the browser asks the authorization server for less than the client did) and what is asked afterwards."""

    def __init__(self, site: LiveServer) -> None:
        super().__init__(site, client_name="Step-up test client")

    async def callback_handler(self) -> AuthorizationCodeResult:
        url = self.authorize_urls[-1]
        if len(self.authorize_urls) == 1:
            assert scope_of(url) == ["mcp"], url  # what the 401 said
            parts = urlsplit(url)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()} | {"scope": "tool:echo"}
            url = urlunsplit(parts._replace(query=urlencode(query)))
        await self.browser.login()
        params = await self.browser.authorize(url)
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))


def scope_of(url: str) -> list[str]:
    return parse_qs(urlsplit(url).query)["scope"][0].split()


async def test_the_official_client_steps_up_from_a_narrow_scope_to_a_wider_one(site: LiveServer) -> None:
    person = NarrowFirst(site)
    try:
        async with (
            httpx2.AsyncClient(auth=person.provider, timeout=httpx2.Timeout(30, read=300)) as http,
            Client(streamable_http_client(site.url, http_client=http)) as client,
        ):
            echoed = await client.call_tool("echo", {"text": "narrow"})
            assert not echoed.is_error
            tokens = person.storage.tokens
            assert tokens is not None
            assert tokens.scope == "tool:echo"
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert (listed["whoami"].meta or {})[REQUIRED] == "tool:whoami"
            who = await client.call_tool("whoami", {})  # 403, re-authorization, the same request again
            assert not who.is_error, who
            assert (who.structured_content or {})["user"] == "alice"
        assert len(person.authorize_urls) == 2
        assert scope_of(person.authorize_urls[0]) == ["mcp"]  # the 401's scope
        wider = scope_of(person.authorize_urls[1])
        assert {"tool:echo", "tool:whoami"} <= set(wider)  # the challenge's scopes, with what was granted
        stepped = person.storage.tokens
        assert stepped is not None
        assert stepped.access_token != tokens.access_token
        assert {"tool:echo", "tool:whoami"} <= set((stepped.scope or "").split())
    finally:
        await person.browser.close()
