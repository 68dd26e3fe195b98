"""django-oauth-toolkit's settings as an MCP authorization server needs them.

DOT's own defaults keep legacy behaviour (``plain`` PKCE, no ``iss``, tokens stored in clear, DCR for
logged-in users only, a prefix audience match that lets a token without audience through, no Client ID
Metadata Documents). The app config
puts :data:`SAFE_DEFAULTS` under the site's own ``OAUTH2_PROVIDER``: a key the site sets wins (and
``manage.py check`` warns when it weakens the server).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

__all__ = ["REDIRECT_SCHEMES", "SAFE_DEFAULTS", "apply_safe_defaults"]

REDIRECT_SCHEMES = ["https", "http", "cursor", "vscode", "vscode-insiders", "windsurf", "claude"]
"""Redirect URI schemes registrations may use: https, http on loopback only, and native clients' own."""

SAFE_DEFAULTS: dict[str, Any] = {
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,  # RFC 9207
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,  # tokens stored as SHA-256 checksums only
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,  # never a token in the query string
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "REFRESH_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,  # a replayed refresh token revokes its whole family
    # No REFRESH_TOKEN_GRACE_PERIOD_SECONDS: in DOT 3.4.1 a replay within the grace window answers the
    # earlier tokens by value, which hashed storage no longer has (it answered 500 when tried).
    "REQUEST_APPROVAL_PROMPT": "force",  # consent every time
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    # Client ID Metadata Documents (mcp_server.oauth.cimd): fetched over https from public addresses only
    # (MCP_SERVER["OAUTH_CIMD_PRIVATE_HOSTS"] excepted), small, quickly, few at once, cached an hour at most.
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "mcp_server.oauth.cimd.MetadataFetcher",
    "CIMD_REGISTRATION_PERMISSION_CLASSES": ("mcp_server.oauth.cimd.HostPermission",),
    "CIMD_FETCH_TIMEOUT_SECONDS": 3,
    "CIMD_MAX_DOCUMENT_SIZE": 8 * 1024,
    "CIMD_METADATA_MIN_AGE_SECONDS": 300,
    "CIMD_METADATA_MAX_AGE_SECONDS": 3600,
    "CIMD_FAILURE_BACKOFF_SECONDS": 60,
    "CIMD_MAX_CONCURRENT_FETCHES": 4,
    "ALLOW_LOCALHOST_LOOPBACK": True,  # http://localhost:<any port> as RFC 8252 loopback
    "ALLOWED_REDIRECT_URI_SCHEMES": REDIRECT_SCHEMES,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    "SCOPES": {"mcp": "Use everything you may use on this site's MCP servers"},
    "DEFAULT_SCOPES": ["mcp"],
    "SCOPES_BACKEND_CLASS": "mcp_server.oauth.scopes.MCPScopes",
    "OAUTH2_VALIDATOR_CLASS": "mcp_server.oauth.validators.MCPOAuth2Validator",
    "RESOURCE_SERVER_TOKEN_RESOURCE_VALIDATOR": "mcp_server.oauth.validators.exact_resource",
}


def apply_safe_defaults() -> None:
    """Put :data:`SAFE_DEFAULTS` under ``settings.OAUTH2_PROVIDER`` and reload DOT's settings."""
    from oauth2_provider.settings import oauth2_settings

    user: dict[str, Any] = dict(getattr(settings, "OAUTH2_PROVIDER", None) or {})
    settings.OAUTH2_PROVIDER = {**SAFE_DEFAULTS, **user}
    oauth2_settings.reload()
