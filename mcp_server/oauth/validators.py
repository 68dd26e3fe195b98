"""DOT's request validator, narrowed for MCP: known scopes only, and an exact audience match."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

from .resources import canonical
from .scopes import all_valid

__all__ = ["MCPOAuth2Validator", "exact_resource"]


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
