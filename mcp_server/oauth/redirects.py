"""Which redirect URIs a registration may use (OAuth 2.1, RFC 8252 for native clients)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from oauth2_provider.settings import oauth2_settings

__all__ = ["LOOPBACK_HOSTS", "NEVER", "redirect_problem"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})

NEVER = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "filesystem", "ws", "wss"})
"""Schemes never accepted as a redirect, whatever ``ALLOWED_REDIRECT_URI_SCHEMES`` says."""


def redirect_problem(uri: Any) -> str | None:
    """Why ``uri`` cannot be registered as a redirect URI, ``None`` when it can.

    https anywhere; http on a loopback host only (any port is accepted at authorize time, RFC 8252);
    the custom schemes of native clients listed in ``ALLOWED_REDIRECT_URI_SCHEMES`` (``cursor://``,
    ``vscode://``). Never a fragment, never ``javascript:``, ``data:`` and the like.
    """
    if not isinstance(uri, str) or not uri or len(uri) > 2000 or any(c.isspace() for c in uri):
        return "Each redirect_uri must be an absolute URI without spaces"
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return f"{uri!r} is not a valid URI"
    scheme = parts.scheme.lower()
    if not scheme or scheme in NEVER or scheme not in oauth2_settings.ALLOWED_REDIRECT_URI_SCHEMES:
        return f"The redirect URI scheme {scheme or '(none)'!r} is not allowed"
    if parts.fragment or "#" in uri:
        return "A redirect URI must not have a fragment"
    if scheme in {"http", "https"} and not host:
        return f"{uri!r} has no host"
    if scheme == "http" and host not in LOOPBACK_HOSTS:
        return "http redirect URIs are allowed on loopback hosts only (127.0.0.1, [::1], localhost)"
    if scheme not in {"http", "https"} and not (parts.netloc or parts.path):
        return f"{uri!r} names no callback"
    return None
