"""OAuth 2.0 Protected Resource Metadata (RFC 9728): where an endpoint's metadata lives and what it says.

The ASGI application that publishes it is :class:`mcp_server.auth.metadata.ProtectedResourceMetadata`;
authentication uses :func:`metadata_url` in the ``WWW-Authenticate`` challenge of every 401.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from ..conf import mcp_settings

__all__ = [
    "LOCAL_SCOPE",
    "WELL_KNOWN",
    "insufficient_scope_challenge",
    "local_authorization_server",
    "metadata_document",
    "metadata_url",
    "oauth_enabled",
    "resource_url",
]

WELL_KNOWN = "/.well-known/oauth-protected-resource"

LOCAL_SCOPE = "mcp"
"""The default scope of the site's own authorization server: everything the user may use."""


def local_authorization_server() -> bool:
    """Whether the site is its own authorization server (``mcp_server.oauth`` is installed)."""
    from django.apps import apps

    return apps.is_installed("mcp_server.oauth")


def oauth_enabled() -> bool:
    """Whether an authorization server is configured: an external one, or the site itself."""
    return bool(mcp_settings.OAUTH_AUTHORIZATION_SERVERS) or local_authorization_server()


def _origin(request: HttpRequest) -> str:
    headers = request.headers
    host = headers.get("x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
    host = (host or headers.get("host") or "").split(",")[0].strip()
    if not host:
        host = f"{request.META.get('SERVER_NAME', 'localhost')}:{request.META.get('SERVER_PORT', '80')}"
    return f"{request.scheme}://{host}"


def _clean(path: str) -> str:
    return "/" + path.strip("/")


def resource_url(request: HttpRequest, resource_path: str) -> str:
    """The endpoint's URL as the resource identifier (scheme honours ``SECURE_PROXY_SSL_HEADER``)."""
    return _origin(request) + _clean(resource_path)


def metadata_url(request: HttpRequest, resource_path: str) -> str:
    """Where the endpoint at ``resource_path`` publishes its metadata (RFC 9728, section 3.1)."""
    return _origin(request) + WELL_KNOWN + _clean(resource_path)


def metadata_document(request: HttpRequest, resource_path: str, title: str | None = None) -> dict[str, Any]:
    """The metadata of the endpoint at ``resource_path``; ``OAUTH_RESOURCE_METADATA`` adds fields."""
    document: dict[str, Any] = {
        "resource": resource_url(request, resource_path),
        "authorization_servers": list(mcp_settings.OAUTH_AUTHORIZATION_SERVERS),
        "bearer_methods_supported": ["header"],
    }
    if local_authorization_server():  # the site itself, first; its issuer is its origin
        document["authorization_servers"].insert(0, _origin(request))
        document["scopes_supported"] = [LOCAL_SCOPE]
    if title:
        document["resource_name"] = title
    extra = {
        k: v
        for k, v in dict(mcp_settings.OAUTH_RESOURCE_METADATA).items()
        if k not in {"resource", "authorization_servers"}
    }
    return {**document, **extra}


def insufficient_scope_challenge(
    request: HttpRequest | None, resource_path: str, scope: str, description: str
) -> str:
    """The ``WWW-Authenticate`` value of a 403 for too narrow a token (RFC 6750 section 3.1, MCP's scope
    challenge): ``error="insufficient_scope"``, the ``scope`` to ask for, and ``resource_metadata`` when an
    authorization server is configured."""
    tokens = [t for t in scope.split() if all("\x21" <= c <= "\x7e" and c not in '"\\' for c in t)]
    params = ['error="insufficient_scope"', f'scope="{" ".join(tokens)}"']
    if oauth_enabled() and request is not None:
        params.append(f'resource_metadata="{metadata_url(request, resource_path)}"')
    text = "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in description[:200])
    params.append(f'error_description="{text}"')
    return "Bearer " + ", ".join(params)
