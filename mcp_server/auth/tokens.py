"""Authentication by bearer token (``Authorization: Bearer mcp_…``), checked against ``AccessToken``."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest

from ..conf import now as clock_now
from .base import AuthenticationFailed, AuthResult, BaseAuthentication

__all__ = ["TokenAuthentication", "bearer_token"]

LAST_USED_EVERY = timedelta(seconds=60)
"""``last_used`` is written at most this often per token."""


def bearer_token(request: HttpRequest) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, ``None`` without one; malformed ones fail."""
    header = str(request.META.get("HTTP_AUTHORIZATION", ""))  # not ``request.headers``: built on first use
    scheme, _sep, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    value = value.strip()
    if not value or " " in value:
        raise AuthenticationFailed("Malformed Authorization header", error="invalid_request")
    return value


class TokenAuthentication(BaseAuthentication):
    """Bearer tokens made in the admin or with ``manage.py mcp_token``; ``auth`` is the ``AccessToken``.

    An unknown, expired or revoked token, or one whose user is inactive, is refused with 401
    ``invalid_token``. A header of another scheme (``Basic``, ``Token``) is left to the other classes.
    """

    realm = "mcp"

    def has_credentials(self, request: HttpRequest) -> bool:
        """Only with an ``Authorization`` header (a malformed one is refused by :meth:`authenticate`)."""
        return "HTTP_AUTHORIZATION" in request.META

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        from .models import AccessToken, hash_token

        plain = bearer_token(request)
        if plain is None:
            return None
        token = await AccessToken.objects.select_related("user").filter(key_hash=hash_token(plain)).afirst()
        now = clock_now()
        if token is None:
            raise AuthenticationFailed("Unknown token")
        if token.is_revoked:
            raise AuthenticationFailed("The token was revoked")
        if token.is_expired(now):
            raise AuthenticationFailed("The token has expired")
        if not token.user.is_active:
            raise AuthenticationFailed("The token's user is inactive")
        if token.last_used is None or now - token.last_used > LAST_USED_EVERY:
            await AccessToken.objects.filter(pk=token.pk).aupdate(last_used=now)
            token.last_used = now
        return token.user, token

    def authenticate_header(self, request: HttpRequest) -> str | None:
        return f'Bearer realm="{self.realm}"'
