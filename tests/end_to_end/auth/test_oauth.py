"""OAuth 2.0 Protected Resource Metadata (RFC 9728) when an external authorization server is configured."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import initialize

ISSUER = "https://auth.example.com"


@pytest.fixture(scope="module")
def oauth_site(start: Callable[..., LiveServer]) -> LiveServer:
    return start(
        {
            "ALLOW_ANONYMOUS": False,
            "OAUTH_AUTHORIZATION_SERVERS": [ISSUER],
            "OAUTH_RESOURCE_METADATA": {"scopes_supported": ["tool:*"], "resource": "ignored"},
        }
    )


async def test_401_points_to_the_metadata(oauth_site: LiveServer) -> None:
    async with httpx.AsyncClient() as http:
        response = await initialize(http, oauth_site.url)
        assert response.status_code == 401
        metadata_url = f"{oauth_site.base}/.well-known/oauth-protected-resource/mcp"
        assert response.headers["www-authenticate"] == (
            f'Bearer realm="mcp", resource_metadata="{metadata_url}"'
        )
        staff = await initialize(http, f"{oauth_site.base}/staff/mcp/")
        assert '/.well-known/oauth-protected-resource/staff/mcp"' in staff.headers["www-authenticate"]
        bad = await initialize(http, oauth_site.url, Authorization="Bearer nope")
        challenge = bad.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge
        assert f'resource_metadata="{metadata_url}"' in challenge


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/.well-known/oauth-protected-resource/mcp", "/mcp"),
        ("/.well-known/oauth-protected-resource", "/mcp"),
        ("/.well-known/oauth-protected-resource/staff/mcp", "/staff/mcp"),
    ],
)
async def test_metadata_documents(oauth_site: LiveServer, path: str, resource: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(oauth_site.base + path, headers={"MCP-Protocol-Version": "2025-11-25"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["access-control-allow-origin"] == "*"
    document = response.json()
    assert document["resource"] == oauth_site.base + resource
    assert document["authorization_servers"] == [ISSUER]
    assert document["bearer_methods_supported"] == ["header"]
    assert document["scopes_supported"] == ["tool:*"]
    assert "resource_name" in document


async def test_metadata_preflight_and_methods(oauth_site: LiveServer) -> None:
    url = f"{oauth_site.base}/.well-known/oauth-protected-resource/mcp"
    async with httpx.AsyncClient() as http:
        preflight = await http.options(url)
        assert preflight.status_code == 204
        assert "mcp-protocol-version" in preflight.headers["access-control-allow-headers"]
        assert (await http.post(url)).status_code == 405
        assert (await http.get(url, headers={"Host": "evil.example"})).status_code == 403


async def test_no_metadata_without_an_authorization_server(live_server: LiveServer) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{live_server.base}/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 404  # the request went on to Django
