"""Authentication, session ownership and permissions against real servers.

Each server gets users and tokens from ``tests/authapp/fixtures.py``: alice (no permission), bob (may lend,
may view the catalogue), sam (staff, logged in by session cookie), gone (inactive).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.auth import http_client, make_fixtures, manage, sdk_client, tool_names
from tests.support.live import LiveServer
from tests.support.raw import error_of, initialize, open_session, rpc

Fixtures = tuple[LiveServer, dict[str, Any]]


@pytest.fixture(scope="module")
def open_site(start: Callable[..., LiveServer]) -> Fixtures:
    """Default settings: session cookie and tokens, anonymous access allowed."""
    server = start()
    return server, make_fixtures(server)


@pytest.fixture(scope="module")
def closed_site(start: Callable[..., LiveServer]) -> Fixtures:
    """``ALLOW_ANONYMOUS = False``."""
    server = start({"ALLOW_ANONYMOUS": False})
    return server, make_fixtures(server)


async def whoami(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    session = await open_session(http, url)
    result = await session.call_tool("whoami")
    return dict(result["result"]["structuredContent"])


# -- who is calling -----------------------------------------------------------------------------------------


async def test_anonymous_token_and_cookie_users(open_site: Fixtures) -> None:
    server, data = open_site
    async with http_client() as http:
        assert await whoami(http, server.url) == {"user": None, "token": None}
    async with http_client(data["tokens"]["bob"]) as http:
        assert await whoami(http, server.url) == {"user": "bob", "token": "bob"}
    async with http_client(cookie=data["cookies"]["sam"]) as http:
        assert await whoami(http, server.url) == {"user": "sam", "token": None}


@pytest.mark.parametrize(
    ("header", "error"),
    [
        ("Bearer mcp_not-a-real-token", "invalid_token"),
        ("Bearer", "invalid_request"),
        ("Bearer two words", "invalid_request"),
    ],
)
async def test_wrong_credentials_get_401_even_when_anonymous_is_allowed(
    open_site: Fixtures, header: str, error: str
) -> None:
    server, _data = open_site
    async with httpx.AsyncClient() as http:
        response = await initialize(http, server.url, Authorization=header)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer realm="mcp"')
    assert f'error="{error}"' in challenge
    assert "resource_metadata" not in challenge  # no OAuth server configured
    assert error_of(response)["message"].startswith("Unauthorized")


@pytest.mark.parametrize("token", ["bob_expired", "gone"])
async def test_expired_tokens_and_inactive_users_are_refused(open_site: Fixtures, token: str) -> None:
    server, data = open_site
    async with http_client(data["tokens"][token]) as http:
        response = await initialize(http, server.url)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_a_revoked_token_stops_working_mid_session(open_site: Fixtures) -> None:
    server, data = open_site
    async with http_client(data["tokens"]["bob_to_revoke"]) as http:
        session = await open_session(http, server.url)
        assert (await session.call_tool("whoami"))["result"]["structuredContent"]["user"] == "bob"
        assert "Revoked" in manage(server, "mcp_token", "revoke", str(data["ids"]["bob_to_revoke"]))
        response = await session.post(rpc("tools/list", {}, 5))
        assert response.status_code == 401
        assert "revoked" in response.headers["www-authenticate"]
        assert (await session.delete()).status_code == 401


async def test_token_command_creates_and_lists(open_site: Fixtures) -> None:
    server, _data = open_site
    plain = manage(server, "mcp_token", "create", "alice", "--name", "cli", "--days", "1").strip()
    assert plain.startswith("mcp_")
    listing = manage(server, "mcp_token", "list", "alice")
    assert "cli" in listing
    assert plain not in listing  # only the prefix is stored and shown
    async with http_client(plain) as http:
        assert (await whoami(http, server.url))["user"] == "alice"


async def test_closed_site_needs_credentials(closed_site: Fixtures) -> None:
    server, data = closed_site
    async with httpx.AsyncClient() as http:
        response = await initialize(http, server.url)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Bearer realm="mcp"'
        for method in ("GET", "DELETE"):
            refused = await http.request(
                method, server.url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": "x"}
            )
            assert refused.status_code == 401
    async with http_client(cookie=data["cookies"]["sam"]) as http:
        assert (await whoami(http, server.url))["user"] == "sam"


async def test_official_client_with_a_bearer_token(closed_site: Fixtures) -> None:
    server, data = closed_site
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"whoami", "lend", "search_books"} <= names
        result = await client.call_tool("lend", {"book": "Earthsea"})
        assert not result.is_error
        assert result.content[0].text == "lent Earthsea"


# -- sessions belong to their user --------------------------------------------------------------------------


async def test_a_session_answers_only_its_own_user(open_site: Fixtures) -> None:
    server, data = open_site
    async with http_client(data["tokens"]["bob"]) as bob, http_client(data["tokens"]["alice"]) as alice:
        session = await open_session(bob, server.url)
        headers = session.headers()
        others: list[httpx.AsyncClient] = [alice]
        async with httpx.AsyncClient() as anonymous:
            others.append(anonymous)
            for other in others:
                posted = await other.post(server.url, json=rpc("tools/list", {}, 7), headers=headers)
                assert posted.status_code == 404, posted.text
                get_headers = {**headers, "Accept": "text/event-stream"}
                assert (await other.get(server.url, headers=get_headers)).status_code == 404
                assert (await other.delete(server.url, headers=headers)).status_code == 404
        # Still bob's, and still alive.
        assert "lend" in tool_names(await session.request("tools/list", {}))
        # The same user through another credential (a second token) is the same owner.
        async with http_client(data["tokens"]["bob2"]) as bob_again:
            posted = await bob_again.post(server.url, json=rpc("ping", None, 8), headers=headers)
            assert posted.status_code == 200


async def test_an_anonymous_session_is_not_a_users(open_site: Fixtures) -> None:
    server, data = open_site
    async with httpx.AsyncClient() as anonymous, http_client(data["tokens"]["bob"]) as bob:
        session = await open_session(anonymous, server.url)
        posted = await bob.post(server.url, json=rpc("ping", None, 3), headers=session.headers())
        assert posted.status_code == 404
        assert (await session.request("ping"))["result"] == {}


# -- permissions and token scopes ---------------------------------------------------------------------------


async def test_lists_and_calls_follow_permissions(open_site: Fixtures) -> None:
    server, data = open_site
    async with http_client(data["tokens"]["alice"]) as http:
        session = await open_session(http, server.url)
        names = tool_names(await session.request("tools/list", {}))
        assert "whoami" in names
        assert not names & {"lend", "staff_only"}
        refused = await session.call_tool("lend", {"book": "x"})
        assert refused["error"]["code"] == -32602
        assert "Unknown tool" in refused["error"]["message"]
        resources = (await session.request("resources/list", {}))["result"]["resources"]
        assert "auth://ledger" not in {r["uri"] for r in resources}
        templates = (await session.request("resources/templates/list", {}))["result"]["resourceTemplates"]
        assert "auth://notes/{pk}" not in {t["uriTemplate"] for t in templates}
        read = await session.request("resources/read", {"uri": "auth://notes/1"})
        assert read["error"]["code"] == -32002
        prompts = (await session.request("prompts/list", {}))["result"]["prompts"]
        assert "lending_letter" not in {p["name"] for p in prompts}
        got = await session.request("prompts/get", {"name": "lending_letter", "arguments": {"borrower": "x"}})
        assert got["error"]["code"] == -32602
        subscribed = await session.request("resources/subscribe", {"uri": "auth://ledger"})
        assert subscribed["error"]["code"] == -32002

    async with http_client(data["tokens"]["bob"]) as http:
        session = await open_session(http, server.url)
        assert {"lend", "whoami"} <= tool_names(await session.request("tools/list", {}))
        lent = await session.call_tool("lend", {"book": "Earthsea"})
        assert lent["result"]["content"][0]["text"] == "lent Earthsea"
        read = await session.request("resources/read", {"uri": "auth://notes/4"})
        assert read["result"]["contents"][0]["text"] == "note 4"
        got = await session.request(
            "prompts/get", {"name": "lending_letter", "arguments": {"borrower": "Ged"}}
        )
        assert "Ged" in got["result"]["messages"][0]["content"]["text"]

    async with http_client(cookie=data["cookies"]["sam"]) as http:  # a permission callable: is_staff
        session = await open_session(http, server.url)
        assert "staff_only" in tool_names(await session.request("tools/list", {}))
        assert (await session.call_tool("staff_only"))["result"]["content"][0]["text"] == "staff"


async def test_token_scopes_narrow_what_a_token_reaches(open_site: Fixtures) -> None:
    """An ``mcp_`` token cannot step up: what its scopes do not reach stays unlisted, and a call to it (the
    user may make it) is refused 403 ``insufficient_scope`` naming the scopes a token would need; what the
    user may not use is unknown, as before."""
    server, data = open_site
    async with http_client(data["tokens"]["bob_whoami_only"]) as http:
        session = await open_session(http, server.url)
        assert tool_names(await session.request("tools/list", {})) == {"whoami"}
        refused = await session.post(rpc("tools/call", {"name": "lend", "arguments": {"book": "x"}}, 7))
        assert refused.status_code == 403
        assert refused.headers["www-authenticate"] == (
            'Bearer error="insufficient_scope", scope="tool:whoami tool:lend", '
            "error_description=\"Insufficient scope: the token does not reach the tool 'lend'; "
            'authorize tool:lend"'
        )  # no resource_metadata: this site has no authorization server
        assert refused.json()["id"] == 7
        assert refused.json()["error"]["code"] == -32005
        read = await session.post(rpc("resources/read", {"uri": "auth://ledger"}, 8))
        assert read.status_code == 403
        assert read.json()["error"]["data"]["requiredScopes"] == ["resource:auth://ledger"]
        assert (await session.request("prompts/list", {}))["result"]["prompts"] == []
        unknown = await session.call_tool("staff_only")  # bob is not staff: invisible, whatever the scopes
        assert unknown["error"]["code"] == -32602


# -- DRF authentication classes -----------------------------------------------------------------------------


async def test_drf_basic_authentication(start: Callable[..., LiveServer]) -> None:
    # DRF is one of the test dependencies (pyproject.toml, extra "test"): without it this fails, never skips.
    server = start(
        {
            "AUTHENTICATION_CLASSES": ["rest_framework.authentication.BasicAuthentication"],
            "ALLOW_ANONYMOUS": False,
        }
    )
    make_fixtures(server)
    async with httpx.AsyncClient() as http:
        response = await initialize(http, server.url)
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Basic realm="api"'
        wrong = base64.b64encode(b"bob:wrong").decode()
        refused = await initialize(http, server.url, Authorization=f"Basic {wrong}")
        assert refused.status_code == 401
        assert "Invalid username/password" in error_of(refused)["message"]
    basic = base64.b64encode(b"bob:pw-bob").decode()
    async with httpx.AsyncClient(headers={"Authorization": f"Basic {basic}"}) as http:
        assert (await whoami(http, server.url))["user"] == "bob"
