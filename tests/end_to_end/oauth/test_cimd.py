"""Client ID Metadata Documents against a live site, with the documents on a real local HTTPS server.

The site allows client ids from 127.0.0.1 and localhost (``OAUTH_CIMD_HOSTS``) and lets 127.0.0.1 alone be
fetched from a loopback address (``OAUTH_CIMD_PRIVATE_HOSTS``), trusting the document server's certificate
through ``SSL_CERT_FILE``. The official client signs in with one; bad documents are refused at authorize.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from tests.support.auth import shell
from tests.support.cimd_server import DocumentServer
from tests.support.live import LiveServer
from tests.support.oauth import Browser, redirect_params, start_oauth_server
from tests.support.raw_oauth import REDIRECT, authorize_url
from tests.support.signin import MemoryStorage

FLOW_REDIRECT = "http://127.0.0.1:54321/callback"
ICON = "https://static.example.org/catalogue-icon.png"
TIMEOUT = 3  # the site's CIMD_FETCH_TIMEOUT_SECONDS (mcp_server.oauth.defaults)


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocumentServer]:
    server = DocumentServer(tmp_path_factory.mktemp("cimd-docs"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, documents: DocumentServer) -> Iterator[LiveServer]:
    overrides = {
        "OAUTH_THROTTLE": {"token": 1000, "register": 1000},
        "OAUTH_CIMD_HOSTS": ["127.0.0.1", "localhost"],
        "OAUTH_CIMD_PRIVATE_HOSTS": ["127.0.0.1"],
        "SERVER_ICONS": [{"src": ICON, "mimeType": "image/png", "sizes": ["64x64"]}],
    }
    directory = tmp_path_factory.mktemp("oauth-cimd")
    server = start_oauth_server(directory, overrides, SSL_CERT_FILE=str(documents.ca_file))
    yield server
    server.stop()


def client_document(name: str = "CIMD Test Client", **extra: Any) -> dict[str, Any]:
    return {
        "client_name": name,
        "redirect_uris": [REDIRECT, FLOW_REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }


async def test_the_metadata_advertises_client_id_metadata_documents(http: httpx.AsyncClient) -> None:
    metadata = (await http.get("/.well-known/oauth-authorization-server")).json()
    assert metadata["client_id_metadata_document_supported"] is True


async def test_the_official_client_signs_in_with_a_client_id_metadata_document(
    site: LiveServer, documents: DocumentServer
) -> None:
    url = documents.publish("/clients/official.json", client_document("Official CIMD client"))
    storage = MemoryStorage()
    authorize_urls: list[str] = []
    browser = Browser.open(site)

    async def redirect_handler(authorize: str) -> None:
        authorize_urls.append(authorize)

    async def callback_handler() -> AuthorizationCodeResult:
        await browser.login()
        page = await browser.consent_page(authorize_urls[-1])
        assert "Official CIMD client" in page.text, page.text
        params = redirect_params(await browser.answer(page, allow=True))
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    def provider() -> OAuthClientProvider:
        return OAuthClientProvider(
            server_url=site.url,
            client_metadata=OAuthClientMetadata(
                client_name="Official CIMD client",
                redirect_uris=[FLOW_REDIRECT],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=url,
        )

    async def whoami(auth: OAuthClientProvider) -> Any:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=300)) as client_http,
            Client(streamable_http_client(site.url, http_client=client_http)) as client,
        ):
            result = await client.call_tool("whoami", {})
            assert not result.is_error, result
            return (result.structured_content or {})["user"]

    try:
        assert await whoami(provider()) == "alice"
        assert storage.client_info is not None
        assert storage.client_info.client_id == url  # no registration: the URL is the client id
        assert len(authorize_urls) == 1
        assert httpx.URL(authorize_urls[0]).params["client_id"] == url
        assert documents.fetches["/clients/official.json"] == 1
        source = shell(
            site,
            f"from oauth2_provider.models import Application as A; print(A.objects.get(client_id={url!r})"
            ".registration_source)",
        )
        assert source.strip().splitlines()[-1] == "cimd"
        storage.tokens = None  # a second sign-in of the same client: the cached document is used
        assert await whoami(provider()) == "alice"
        assert len(authorize_urls) == 2
        assert documents.fetches["/clients/official.json"] == 1
    finally:
        await browser.close()


async def test_the_consent_page_says_who_claims_the_identity(
    site: LiveServer, documents: DocumentServer, browser: Browser
) -> None:
    url = documents.publish("/clients/page.json", client_document("Claimed Name Client"))
    page = await browser.consent_page(authorize_url(site, url))
    assert page.status_code == 200, page.text
    assert "Claimed Name Client" in page.text
    assert "claimed by <strong>127.0.0.1</strong>" in page.text
    assert f'<img src="{ICON}"' in page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    denied = await browser.answer(page, allow=False)
    assert denied.status_code == 302
    assert denied.headers["location"].startswith(REDIRECT + "?")
    assert redirect_params(denied)["error"] == "access_denied"


def _refused(page: httpx.Response, reason: str) -> None:
    assert page.status_code == 400, page.text
    assert "location" not in page.headers
    assert "invalid_client" in page.text
    assert reason in page.text, page.text


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("/clients/huge.json", client_document(junk="a" * 1_000_000), "exceeds the maximum allowed size"),
        ("/clients/mismatch.json", None, "does not match the URL"),
        (
            "/clients/js.json",
            client_document(redirect_uris=["javascript:alert(1)"]),
            "scheme &#x27;javascript&#x27; is not allowed",
        ),
        ("/clients/secret.json", client_document(client_secret="s3cret"), "must not include client_secret"),
        ("/clients/missing.json", "missing", "returned HTTP 404"),
    ],
)
async def test_a_bad_document_is_refused_at_authorize(
    site: LiveServer,
    documents: DocumentServer,
    browser: Browser,
    path: str,
    body: Any,
    reason: str,
) -> None:
    if body is None:
        url = documents.publish(
            path, client_document(), client_id=documents.url("/clients/someone-else.json")
        )
    elif body == "missing":
        url = documents.url(path)
    else:
        url = documents.publish(path, body)
    _refused(await browser.consent_page(authorize_url(site, url)), reason)
    again = await browser.consent_page(authorize_url(site, url))  # in DOT's backoff: not fetched again
    _refused(again, reason)
    assert documents.fetches[path] == 1


async def test_a_document_on_a_private_address_is_refused(
    site: LiveServer, documents: DocumentServer, browser: Browser
) -> None:
    path = "/clients/via-localhost.json"
    url = documents.url(path, host="localhost")  # allowed as a client id host, not for private addresses
    documents.publish(path, client_document(), client_id=url)
    _refused(await browser.consent_page(authorize_url(site, url)), "resolves to a non-public address")
    assert documents.fetches[path] == 0


async def test_a_host_off_the_allow_list_is_refused_without_a_fetch(
    site: LiveServer, browser: Browser
) -> None:
    url = "https://clients.example.com/client.json"
    _refused(
        await browser.consent_page(authorize_url(site, url)), "from clients.example.com are not accepted"
    )


async def test_a_stalling_document_is_refused_within_the_fetch_timeout(
    site: LiveServer, documents: DocumentServer, browser: Browser
) -> None:
    started = time.monotonic()
    page = await browser.consent_page(authorize_url(site, documents.url("/slow.json")))
    elapsed = time.monotonic() - started
    assert documents.stalled.is_set()  # the fetch did reach the stall
    _refused(page, "client_id document")
    assert elapsed < TIMEOUT + 5, elapsed


async def test_a_dripping_document_is_refused_at_the_fetch_deadline(
    site: LiveServer, documents: DocumentServer, browser: Browser
) -> None:
    started = time.monotonic()
    page = await browser.consent_page(authorize_url(site, documents.url("/drip.json")))
    elapsed = time.monotonic() - started
    assert documents.fetches["/drip.json"] == 1
    _refused(page, "took longer than the fetch timeout")
    assert elapsed < TIMEOUT + 5, elapsed


async def test_the_consent_page_names_where_each_identity_comes_from(
    site: LiveServer, http: httpx.AsyncClient, browser: Browser
) -> None:
    shell(
        site,
        "from oauth2_provider.models import Application as A;"
        "A.objects.get_or_create(client_id='admin-made', defaults=dict(name='Admin Made App',"
        " client_type='public', authorization_grant_type='authorization-code',"
        " redirect_uris='cursor://anysphere.cursor-mcp/oauth/callback', registration_source='manual'))",
    )
    cursor = "cursor://anysphere.cursor-mcp/oauth/callback"
    page = await browser.consent_page(authorize_url(site, "admin-made", redirect_uri=cursor))
    assert page.status_code == 200, page.text
    assert "Admin Made App" in page.text
    assert "registered in advance by this site's administrators" in page.text
    assert "handles cursor: links" in page.text  # the custom-scheme warning
    assert 'id="redirect-host">anysphere.cursor-mcp<' in page.text
    assert "a program on your own computer" not in page.text
    registered = await http.post(
        "/oauth/register/",
        json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "Self Made"},
    )
    page = await browser.consent_page(authorize_url(site, registered.json()["client_id"]))
    assert "It registered itself with this site" in page.text
    assert "a program on your own computer" in page.text
    assert "Use everything you may use on this MCP server, as you" in page.text
    assert 'name="allow" value="Allow"' in page.text
    assert 'value="Deny"' in page.text


def test_the_consent_page_in_chromium_renders_and_deny_goes_back(
    site: LiveServer, documents: DocumentServer
) -> None:
    from playwright.sync_api import Route, sync_playwright

    from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
    from tests.support.oauth import PASSWORD

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (Debian package chromium)")
    url = documents.publish("/clients/chromium.json", client_document("Chromium CIMD Client"))
    landed: list[str] = []

    def client_callback(route: Route) -> None:
        landed.append(route.request.url)
        route.fulfill(status=200, body="back at the client")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            back = re.compile("^" + re.escape(REDIRECT))
            page.route(back, client_callback)
            page.goto(site.base + authorize_url(site, url))  # to the login first, then back here
            page.fill("input[name=username]", "alice")
            page.fill("input[name=password]", PASSWORD)
            page.click("[type=submit]")
            page.wait_for_selector("#authorizationForm")
            assert "Chromium CIMD Client asks to use" in page.inner_text("h1")
            assert "claimed by 127.0.0.1" in page.inner_text("#client-identity")
            assert page.is_visible("input[value=Allow]")
            page.click("input[value=Deny]")
            page.wait_for_url(back, timeout=30_000)
        finally:
            browser.close()
    assert len(landed) == 1
    answer = {k: v[0] for k, v in parse_qs(urlsplit(landed[0]).query).items()}
    assert answer["error"] == "access_denied"
    assert answer["state"] == "s-123"
