"""OAuth 2.0 Protected Resource Metadata (RFC 9728) for MCP endpoints whose tokens an external
authorization server issues.

When ``MCP_SERVER["OAUTH_AUTHORIZATION_SERVERS"]`` names issuers, each endpoint ``/<path>`` publishes its
metadata at ``/.well-known/oauth-protected-resource/<path>`` (the first endpoint also at
``/.well-known/oauth-protected-resource``), and every 401 points there with ``resource_metadata="…"`` in its
``WWW-Authenticate`` challenge, as the MCP authorization specification asks. Validating the tokens that
server issues is the job of an authentication class (JWT, introspection) the site lists.
"""

from __future__ import annotations

import io
import json
from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest
from django.http.request import split_domain_port, validate_host

from ..conf import mcp_settings

__all__ = [
    "WELL_KNOWN",
    "ProtectedResourceMetadata",
    "metadata_document",
    "metadata_url",
    "oauth_enabled",
    "resource_url",
]

WELL_KNOWN = "/.well-known/oauth-protected-resource"

CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, OPTIONS"),
    (b"access-control-allow-headers", b"mcp-protocol-version, authorization"),
]


def oauth_enabled() -> bool:
    """Whether an external authorization server is configured."""
    return bool(mcp_settings.OAUTH_AUTHORIZATION_SERVERS)


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
    if title:
        document["resource_name"] = title
    extra = {
        k: v
        for k, v in dict(mcp_settings.OAUTH_RESOURCE_METADATA).items()
        if k not in {"resource", "authorization_servers"}
    }
    return {**document, **extra}


class ProtectedResourceMetadata:
    """ASGI application answering ``GET /.well-known/oauth-protected-resource[/<path>]`` with JSON."""

    def __init__(self, resource_path: str, title: str | None = None) -> None:
        self.resource_path = resource_path
        self.title = title

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = ASGIRequest(scope, io.BytesIO())
        method = scope.get("method", "GET").upper()
        status, body, headers = 200, b"", list(CORS_HEADERS)
        from ..transports.rules import allowed_hosts

        domain, _port = split_domain_port(request.headers.get("host", ""))
        if not domain or not validate_host(domain, allowed_hosts()):
            status, body = 403, b'{"error": "host not allowed"}'
        elif method == "OPTIONS":
            status = 204
        elif method not in {"GET", "HEAD"}:
            status, body = 405, b'{"error": "method not allowed"}'
            headers.append((b"allow", b"GET, OPTIONS"))
        else:
            document = metadata_document(request, self.resource_path, self.title)
            body = json.dumps(document).encode()
        if body:
            headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
