"""Bad input to the site's authorization server (discovery, registration, authorize): each gets the RFC's
error code, never a 500, and never a redirect to a URI the client did not register."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.oauth import Browser, redirect_params
from tests.support.raw import initialize
from tests.support.raw_oauth import REDIRECT, authorize_url, client_id, register

# -- discovery ---------------------------------------------------------------------------------------------


async def test_the_401_and_the_metadata_lead_to_the_site(site: LiveServer, http: httpx.AsyncClient) -> None:
    refused = await initialize(http, site.url)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    prm_url = f"{site.base}/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{prm_url}"' in challenge
    assert 'scope="mcp"' in challenge
    prm = (await http.get(prm_url)).json()
    assert prm["resource"] == site.url
    assert prm["authorization_servers"] == [site.base]
    metadata = (await http.get("/.well-known/oauth-authorization-server")).json()
    assert metadata["issuer"] == site.base
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert "none" in metadata["token_endpoint_auth_methods_supported"]
    assert metadata["registration_endpoint"] == f"{site.base}/oauth/register/"
    assert metadata["revocation_endpoint"] == f"{site.base}/oauth/revoke/"
    assert metadata["scopes_supported"] == ["mcp"]
    assert metadata["response_types_supported"] == ["code"]
    assert set(metadata["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert metadata["client_id_metadata_document_supported"] is True
    assert "introspection_endpoint" not in metadata


# -- registration ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uris",
    [
        ["https://claude.ai/api/mcp/auth_callback"],
        ["https://chatgpt.com/connector_platform_oauth_redirect"],
        ["cursor://anysphere.cursor-mcp/oauth/callback"],
        ["http://127.0.0.1:33418", "https://vscode.dev/redirect"],
        ["http://localhost:6274/oauth/callback"],
        ["http://[::1]:8080/cb"],
    ],
)
async def test_real_clients_redirect_uris_register(http: httpx.AsyncClient, uris: list[str]) -> None:
    done = await register(http, redirect_uris=uris, client_name="A client")
    assert done.status_code == 201, done.text
    assert done.json()["redirect_uris"] == uris


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": None}, "invalid_redirect_uri"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["data:text/html,<script>alert(1)</script>"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["file:///etc/passwd"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://evil.example/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://ok.example/cb#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https:///nohost"]}, "invalid_redirect_uri"),
        ({"redirect_uris": [42]}, "invalid_redirect_uri"),
        ({"redirect_uris": [REDIRECT], "grant_types": ["password"]}, "invalid_client_metadata"),
        ({"redirect_uris": [REDIRECT], "client_name": ["x"]}, "invalid_client_metadata"),
    ],
)
async def test_bad_registrations_are_refused(
    http: httpx.AsyncClient, metadata: dict[str, Any], error: str
) -> None:
    done = await http.post("/oauth/register/", json=metadata)
    assert done.status_code == 400, done.text
    assert done.json()["error"] == error
    assert done.json()["error_description"]


async def test_a_registration_without_redirect_uris_is_refused(http: httpx.AsyncClient) -> None:
    done = await http.post("/oauth/register/", json={"client_name": "no redirects"})
    assert done.status_code == 400
    assert done.json()["error"] == "invalid_redirect_uri"


async def test_a_megabyte_of_metadata_is_refused(http: httpx.AsyncClient) -> None:
    body = json.dumps({"redirect_uris": [REDIRECT], "client_name": "x", "junk": "a" * 1_000_000})
    done = await http.post("/oauth/register/", content=body, headers={"content-type": "application/json"})
    assert done.status_code == 413
    assert done.json()["error"] == "invalid_client_metadata"


async def test_malformed_json_is_refused(http: httpx.AsyncClient) -> None:
    for body in ["{", "[]", "\xff"]:
        done = await http.post("/oauth/register/", content=body, headers={"content-type": "application/json"})
        assert done.status_code == 400
        assert done.json()["error"] == "invalid_client_metadata"


# -- authorize ---------------------------------------------------------------------------------------------


async def test_the_consent_page_names_the_client_the_host_and_the_server(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http, client_name="Totally Real Client")
    page = await browser.consent_page(authorize_url(site, cid))
    assert page.status_code == 200
    assert "Totally Real Client" in page.text
    assert "127.0.0.1" in page.text
    assert "a program on your own computer" in page.text  # loopback warning
    assert "Django MCP demo: a library catalogue" in page.text  # the server's title
    assert "Use everything you may use" in page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert 'name="csrfmiddlewaretoken"' in page.text


async def test_authorize_signs_the_person_in_first(site: LiveServer, http: httpx.AsyncClient) -> None:
    cid = await client_id(http)
    done = await http.get(authorize_url(site, cid))
    assert done.status_code == 302
    assert done.headers["location"].startswith("/accounts/login/?next=")


async def test_an_unregistered_redirect_is_never_followed(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    for uri in ["https://evil.example/cb", "http://127.0.0.1:9999/other", "javascript:alert(1)"]:
        page = await browser.consent_page(authorize_url(site, cid, redirect_uri=uri))
        assert page.status_code == 400, page.text
        assert "location" not in page.headers
    unknown = await browser.consent_page(authorize_url(site, "no-such-client"))
    assert unknown.status_code in {400, 401}
    assert "location" not in unknown.headers


async def test_loopback_redirects_match_on_any_port(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    page = await browser.consent_page(authorize_url(site, cid, redirect_uri="http://127.0.0.1:40000/cb"))
    assert page.status_code == 200, page.text


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"code_challenge": "-", "code_challenge_method": "-"}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
        ({"resource": "not a url"}, "invalid_target"),
        ({"resource": "-"}, "invalid_target"),  # the site has several endpoints: it must be named
        ({"scope": "admin"}, "invalid_scope"),
    ],
)
async def test_bad_authorize_requests_go_back_with_the_error(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser, params: dict[str, str], error: str
) -> None:
    cid = await client_id(http)
    done = await browser.consent_page(authorize_url(site, cid, **params))
    assert done.status_code == 302, done.text
    assert done.headers["location"].startswith(REDIRECT + "?")
    answer = redirect_params(done)
    assert answer["error"] == error
    assert answer["state"] == "s-123"
    assert answer["iss"] == site.base  # RFC 9207: in errors too


async def test_deny_returns_access_denied_to_the_registered_redirect_only(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    page = await browser.consent_page(authorize_url(site, cid))
    denied = await browser.answer(page, allow=False)
    assert denied.status_code == 302
    assert denied.headers["location"].startswith(REDIRECT + "?")
    answer = redirect_params(denied)
    assert answer["error"] == "access_denied"
    assert answer["state"] == "s-123"
    assert answer["iss"] == site.base
    for allow in (False, True):
        tampered = await browser.answer(page, allow=allow, redirect_uri="https://evil.example/cb")
        assert tampered.status_code == 400
        assert "location" not in tampered.headers
    other = await browser.answer(page, allow=True, resource=f"{site.base}/staff/mcp/../../evil")
    assert other.status_code == 400
    assert other.json()["error"] == "invalid_target"


async def test_the_consent_form_needs_its_csrf_token(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    page = await browser.consent_page(authorize_url(site, cid))
    forged = await browser.answer(page, allow=True, csrfmiddlewaretoken="forged")
    assert forged.status_code == 403


async def test_implicit_and_hybrid_response_types_are_refused(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    cid = await client_id(http)
    for response_type in ["token", "code token", "id_token"]:
        done = await browser.consent_page(authorize_url(site, cid, response_type=response_type))
        assert done.status_code in {302, 400}, done.text
        if done.status_code == 302:
            assert done.headers["location"].startswith(REDIRECT)
            # registered for "code" only: RFC 6749 4.1.2.1
            assert redirect_params(done)["error"] in {"unauthorized_client", "unsupported_response_type"}


async def test_an_update_of_a_registration_is_checked_as_one(http: httpx.AsyncClient) -> None:
    done = await register(http)
    assert done.status_code == 201
    registration = done.json()
    url, token = registration["registration_client_uri"], registration["registration_access_token"]
    body = {"redirect_uris": ["http://evil.example/cb"], "token_endpoint_auth_method": "none"}
    refused = await http.put(url, json=body, headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_redirect_uri"
    good = {**body, "redirect_uris": ["https://ok.example/cb"], "client_id": registration["client_id"]}
    updated = await http.put(url, json=good, headers={"Authorization": f"Bearer {token}"})
    assert updated.status_code == 200, updated.text
    assert updated.json()["redirect_uris"] == ["https://ok.example/cb"]
    anonymous = await http.put(url, json=good)
    assert anonymous.status_code == 401
