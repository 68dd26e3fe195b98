"""DOT's request validator, narrowed for MCP: known scopes only, and an exact audience match."""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.cache import cache
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator

from .resources import canonical
from .scopes import all_valid

__all__ = ["USED_CODE_MEMORY", "MCPOAuth2Validator", "exact_resource"]

USED_CODE_MEMORY = 600.0
"""Seconds the server remembers which tokens a code gave (in the default cache), to revoke them when the
code comes back (RFC 6749 section 4.1.2): longer than a code lives (60 s)."""


def _code_key(code: str) -> str:
    return "mcp-oauth-code:" + hashlib.sha256(code.encode()).hexdigest()


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def exact_resource(request_uri: str, audiences: list[str]) -> bool:
    """RFC 8707 audience check: the endpoint's canonical URL is one of the token's resources, exactly."""
    wanted = canonical(request_uri.split("?", 1)[0])
    return any(canonical(str(a)) == wanted for a in audiences or [])


class MCPOAuth2Validator(OAuth2Validator):  # type: ignore[misc]
    """Accepts ``mcp`` and the ``tool:``/``resource:``/``prompt:`` scopes (:mod:`mcp_server.oauth.scopes`)."""

    def validate_scopes(
        self, client_id: str, scopes: list[str], client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        return bool(scopes) and all_valid(scopes)

    def save_bearer_token(self, token: dict[str, Any], request: Any, *args: Any, **kwargs: Any) -> Any:
        saved = super().save_bearer_token(token, request, *args, **kwargs)
        code = getattr(request, "code", None)
        if code and getattr(request, "grant_type", None) == "authorization_code":
            issued = {"access": _checksum(token["access_token"])}
            if token.get("refresh_token"):
                issued["refresh"] = _checksum(token["refresh_token"])
            cache.set(_code_key(code), issued, USED_CODE_MEMORY)
        return saved

    def validate_code(
        self, client_id: str, code: str, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        issued = cache.get(_code_key(code))
        if issued:  # a code used twice: what it gave is revoked too
            cache.delete(_code_key(code))
            refresh_model = get_refresh_token_model()
            refresh = refresh_model.objects.filter(token_checksum=issued.get("refresh", "-")).first()
            if refresh is not None and refresh.token_family:
                refresh_model.revoke_family(refresh.token_family)
            elif refresh is not None:
                refresh.revoke()
            get_access_token_model().objects.filter(token_checksum=issued["access"]).delete()
        return False
