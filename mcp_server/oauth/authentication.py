"""Validating the site's own OAuth access tokens at its MCP endpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.http import HttpRequest
from django.utils import timezone

from ..auth.base import AuthenticationFailed, AuthResult, BaseAuthentication
from ..auth.models import TOKEN_PREFIX
from ..auth.oauth import resource_url
from ..auth.tokens import bearer_token
from .scopes import token_scopes
from .token_cache import checksum_of, lookup
from .usage import note_use
from .validators import exact_resource

__all__ = ["OAuthGrant", "OAuthTokenAuthentication"]


@dataclass
class OAuthGrant:
    """``ctx.request.auth`` of a request made with an OAuth access token."""

    token: Any = field(repr=False)
    """DOT's ``AccessToken`` row."""
    scopes: list[str]
    """Token scopes (``tool:…``, ``resource:…``, ``prompt:…``); empty: everything the user may use."""
    client_id: str
    client_name: str
    step_up: ClassVar[bool] = True
    """The client can widen the grant by re-authorizing: out-of-scope entries are listed, marked."""


class OAuthTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer <access token>`` issued by the site's authorization server.

    List it before ``mcp_server.auth.tokens.TokenAuthentication`` (it leaves ``mcp_…`` tokens to that
    class). A token is refused with 401 ``invalid_token`` when unknown, expired, revoked, issued for
    another endpoint or for no endpoint (RFC 8707 audience, matched exactly), or when its user is
    inactive or gone. Tokens are looked up by their SHA-256 checksum (DOT stores nothing else), through
    the shared cache (:mod:`mcp_server.oauth.token_cache`: a revocation is seen at the next request).
    """

    realm = "mcp"

    def has_credentials(self, request: HttpRequest) -> bool:
        """Only with an ``Authorization`` header."""
        return "HTTP_AUTHORIZATION" in request.META

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        plain = bearer_token(request)
        if plain is None or plain.startswith(TOKEN_PREFIX):
            return None
        token = await lookup(checksum_of(plain))
        if token is None:
            raise AuthenticationFailed("Unknown token")
        if token.expires <= timezone.now():
            raise AuthenticationFailed("The token has expired")
        audiences = list(token.resource or [])
        if not audiences or not exact_resource(resource_url(request, request.path), audiences):
            raise AuthenticationFailed("The token was not issued for this endpoint")
        if token.user is None or not token.user.is_active:
            raise AuthenticationFailed("The token's user is inactive")
        application = token.application
        grant = OAuthGrant(
            token=token,
            scopes=token_scopes(token.scope or ""),
            client_id=getattr(application, "client_id", ""),
            client_name=getattr(application, "name", ""),
        )
        note_use(token)  # "last used", at most once a minute per token, written behind
        return token.user, grant

    def authenticate_header(self, request: HttpRequest) -> str | None:
        return f'Bearer realm="{self.realm}"'
