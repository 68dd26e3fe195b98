"""The official client signing in to the live site: ``OAuthClientProvider`` with a browser that consents.

``SignIn`` is one connection: the provider discovers, registers (DCR) and sends the person to the authorize
URL (the redirect handler records it); the callback handler plays the browser, signed in with a session,
answering the consent page with Allow, and hands back ``code``, ``state`` and ``iss``.
"""

from __future__ import annotations

from typing import Any

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.support.live import LiveServer
from tests.support.oauth import Browser

__all__ = ["REDIRECT", "MemoryStorage", "SignIn"]

REDIRECT = "http://127.0.0.1:54321/callback"


class MemoryStorage:
    """The client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class SignIn:
    """One connection's OAuth provider, with a browser that consents as ``username`` (alice)."""

    def __init__(
        self, site: LiveServer, client_name: str = "Headless test client", username: str = "alice"
    ) -> None:
        self.site = site
        self.username = username
        self.storage = MemoryStorage()
        self.authorize_urls: list[str] = []
        self.browser = Browser.open(site)
        self.provider = OAuthClientProvider(
            server_url=site.url,
            client_metadata=OAuthClientMetadata(
                client_name=client_name,
                redirect_uris=[REDIRECT],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=self.storage,
            redirect_handler=self.redirect_handler,
            callback_handler=self.callback_handler,
        )

    async def redirect_handler(self, url: str) -> None:
        self.authorize_urls.append(url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        await self.browser.login(self.username)
        params = await self.browser.authorize(self.authorize_urls[-1])
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    def http(self) -> httpx2.AsyncClient:
        """An HTTP client that authenticates with this connection's tokens (and signs in when it has none)."""
        return httpx2.AsyncClient(auth=self.provider, timeout=httpx2.Timeout(30, read=300))

    async def whoami(self) -> dict[str, Any]:
        async with (
            self.http() as http,
            Client(streamable_http_client(self.site.url, http_client=http)) as client,
        ):
            result = await client.call_tool("whoami", {})
            assert not result.is_error, result
            structured: dict[str, Any] = result.structured_content or {}
            return structured
