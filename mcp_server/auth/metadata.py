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

from django.core.handlers.asgi import ASGIRequest
from django.http.request import split_domain_port, validate_host

from ..conf import allowed_hosts
from ..wire.asgi import JSON_CONTENT_TYPE, send_response
from .oauth import WELL_KNOWN, metadata_document, metadata_url, oauth_enabled, resource_url

__all__ = [
    "WELL_KNOWN",
    "ProtectedResourceMetadata",
    "metadata_document",
    "metadata_url",
    "oauth_enabled",
    "resource_url",
]

CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, OPTIONS"),
    (b"access-control-allow-headers", b"mcp-protocol-version, authorization"),
]


class ProtectedResourceMetadata:
    """ASGI application answering ``GET /.well-known/oauth-protected-resource[/<path>]`` with JSON."""

    def __init__(self, resource_path: str, title: str | None = None) -> None:
        self.resource_path = resource_path
        self.title = title

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = ASGIRequest(scope, io.BytesIO())
        method = scope.get("method", "GET").upper()
        status, body, headers = 200, b"", list(CORS_HEADERS)
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
            headers.append(JSON_CONTENT_TYPE)
        await send_response(send, status, headers, b"" if method == "HEAD" else body)
