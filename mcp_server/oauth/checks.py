"""System checks of the site's authorization server (``mcp_server.E06x`` / ``W06x``).

- ``mcp_server.W060`` ``ALLOW_ANONYMOUS`` is on: clients without a token are served anonymously and never
  asked to sign in.
- ``mcp_server.E060`` ``LOGIN_URL`` does not resolve: the authorize step cannot send the person to sign in.
- ``mcp_server.W061`` outside ``DEBUG``, neither HTTPS redirects (``SECURE_SSL_REDIRECT``) nor
  ``SECURE_PROXY_SSL_HEADER`` are set: tokens and codes would travel in clear.
- ``mcp_server.E061`` ``OAUTH2_PROVIDER`` weakens the server: PKCE not required, ``plain`` PKCE allowed,
  no ``iss``, or a dangerous redirect scheme (``javascript``, ``data``, …).
- ``mcp_server.E062`` ``mcp_server.oauth.authentication.OAuthTokenAuthentication`` is not among
  ``AUTHENTICATION_CLASSES`` (or comes after ``TokenAuthentication``, which refuses every token it
  does not know).
- ``mcp_server.E063`` ``OAUTH_THROTTLE`` is neither ``None`` nor a dict of ``"token"``/``"register"`` to
  positive integers (requests per minute per address).
- ``mcp_server.E066`` ``OAUTH_CIMD_HOSTS`` is neither ``None`` nor a list of host names, or
  ``OAUTH_CIMD_PRIVATE_HOSTS`` is not a list of host names.
- ``mcp_server.W066`` outside ``DEBUG``, ``OAUTH_CIMD_PRIVATE_HOSTS`` lets Client ID Metadata Documents be
  fetched from private or loopback addresses (server-side request forgery into the site's network).
- ``mcp_server.W067`` ``OAUTH2_PROVIDER`` weakens Client ID Metadata Documents: a fetcher that is not
  SSRF-hardened, no time, size or concurrency limit, or permission classes that ignore ``OAUTH_CIMD_HOSTS``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, Resolver404, resolve

__all__ = ["check_oauth_server"]

AUTH_CLASS = "mcp_server.oauth.authentication.OAuthTokenAuthentication"
TOKEN_CLASS = "mcp_server.auth.tokens.TokenAuthentication"


def _login_url_problem() -> str | None:
    try:
        url = str(resolve_url(settings.LOGIN_URL))
    except NoReverseMatch:
        return f"LOGIN_URL {settings.LOGIN_URL!r} is neither a URL name nor a path"
    if url.startswith(("http://", "https://")):
        return None
    try:
        resolve(url.split("?", 1)[0])
    except Resolver404:
        return f"LOGIN_URL {url!r} does not resolve to a view of this site"
    return None


def _weakening(provider: dict[str, Any]) -> list[str]:
    from .redirects import NEVER

    found = []
    if provider.get("PKCE_REQUIRED") is not True:
        found.append("PKCE_REQUIRED is not True")
    if provider.get("COMPLIANT_BCP_RFC9700_PKCE_METHOD") is not True:
        found.append("COMPLIANT_BCP_RFC9700_PKCE_METHOD is not True (plain PKCE accepted)")
    if provider.get("COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS") is not True:
        found.append("COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS is not True (no iss, RFC 9207)")
    bad = sorted({str(s).lower() for s in provider.get("ALLOWED_REDIRECT_URI_SCHEMES") or []} & NEVER)
    if bad:
        found.append(f"ALLOWED_REDIRECT_URI_SCHEMES allows {', '.join(bad)}")
    if provider.get("ALLOW_URI_WILDCARDS"):
        found.append("ALLOW_URI_WILDCARDS is on (redirect URIs must match exactly)")
    return found


def check_oauth_server(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The checks listed in this module's docstring (registered by the app config, not on import)."""
    from ..conf import mcp_settings

    messages: list[CheckMessage] = []
    if mcp_settings.ALLOW_ANONYMOUS is True:
        messages.append(
            Warning(
                "The site is its own OAuth authorization server but MCP_SERVER['ALLOW_ANONYMOUS'] is True: "
                "clients without a token are served anonymously and never asked to sign in.",
                hint="Set MCP_SERVER['ALLOW_ANONYMOUS'] = False.",
                id="mcp_server.W060",
            )
        )
    problem = _login_url_problem()
    if problem:
        messages.append(
            Error(
                problem,
                hint="Point LOGIN_URL at the site's login view, e.g. 'admin:login'.",
                id="mcp_server.E060",
            )
        )
    if not settings.DEBUG and not settings.SECURE_PROXY_SSL_HEADER and not settings.SECURE_SSL_REDIRECT:
        messages.append(
            Warning(
                "The OAuth authorization server runs without HTTPS: neither SECURE_SSL_REDIRECT nor "
                "SECURE_PROXY_SSL_HEADER is set.",
                hint="Serve the site over HTTPS; behind a TLS proxy set SECURE_PROXY_SSL_HEADER.",
                id="mcp_server.W061",
            )
        )
    for weak in _weakening(dict(getattr(settings, "OAUTH2_PROVIDER", None) or {})):
        messages.append(
            Error(f"OAUTH2_PROVIDER weakens the MCP authorization server: {weak}.", id="mcp_server.E061")
        )
    classes = [str(c) for c in mcp_settings.AUTHENTICATION_CLASSES]
    if AUTH_CLASS not in classes or (
        TOKEN_CLASS in classes and classes.index(TOKEN_CLASS) < classes.index(AUTH_CLASS)
    ):
        messages.append(
            Error(
                f"{AUTH_CLASS} is missing from MCP_SERVER['AUTHENTICATION_CLASSES'] "
                f"or comes after {TOKEN_CLASS}.",
                hint=f"List it before {TOKEN_CLASS}.",
                id="mcp_server.E062",
            )
        )
    messages += _check_throttle(mcp_settings.OAUTH_THROTTLE)
    messages += _check_cimd(mcp_settings.OAUTH_CIMD_HOSTS, mcp_settings.OAUTH_CIMD_PRIVATE_HOSTS)
    return messages


def _check_throttle(value: Any) -> list[CheckMessage]:
    good = value is None or (
        isinstance(value, dict)
        and set(value) <= {"token", "register"}
        and all(
            v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0) for v in value.values()
        )
    )
    if good:
        return []
    return [
        Error(
            "MCP_SERVER['OAUTH_THROTTLE'] must be None or a dict of 'token'/'register' to positive "
            f"integers, not {value!r}.",
            id="mcp_server.E063",
        )
    ]


def _hosts(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(h, str) and h for h in value)


SAFE_FETCHER = "oauth2_provider.cimd.SafeMetadataFetcher"


def _hardened(fetcher: Any) -> bool:
    """Whether ``fetcher`` (a class or its dotted path) is DOT's SSRF-hardened fetcher or a subclass."""
    from django.utils.module_loading import import_string

    if fetcher in {SAFE_FETCHER, "mcp_server.oauth.cimd.MetadataFetcher"}:
        return True  # known without importing the toolkit's models
    try:
        cls = import_string(fetcher) if isinstance(fetcher, str) else fetcher
    except ImportError:
        return False
    return isinstance(cls, type) and any(
        f"{c.__module__}.{c.__qualname__}" == SAFE_FETCHER for c in cls.__mro__
    )


def _cimd_weakening(provider: dict[str, Any]) -> list[str]:
    from oauth2_provider.settings import DEFAULTS

    def get(key: str) -> Any:
        return provider.get(key, DEFAULTS[key])

    if not get("CIMD_ENABLED"):
        return []
    found = []
    if not _hardened(get("CIMD_METADATA_FETCHER")):
        found.append(f"CIMD_METADATA_FETCHER {get('CIMD_METADATA_FETCHER')!r} is not a SafeMetadataFetcher")
    if not get("CIMD_FETCH_TIMEOUT_SECONDS") or get("CIMD_FETCH_TIMEOUT_SECONDS") > 10:
        found.append("CIMD_FETCH_TIMEOUT_SECONDS is not between 0 and 10 seconds")
    if not get("CIMD_MAX_DOCUMENT_SIZE") or get("CIMD_MAX_DOCUMENT_SIZE") > 64 * 1024:
        found.append("CIMD_MAX_DOCUMENT_SIZE is not between 1 byte and 64 KiB")
    if not get("CIMD_MAX_CONCURRENT_FETCHES"):
        found.append("CIMD_MAX_CONCURRENT_FETCHES is off (no cap on fetches in flight)")
    if "mcp_server.oauth.cimd.HostPermission" not in [
        str(c) for c in get("CIMD_REGISTRATION_PERMISSION_CLASSES")
    ]:
        found.append("CIMD_REGISTRATION_PERMISSION_CLASSES lacks mcp_server.oauth.cimd.HostPermission")
    return found


def _check_cimd(hosts: Any, private: Any) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    if not (hosts is None or _hosts(hosts)) or not (private == [] or _hosts(private)):
        messages.append(
            Error(
                "MCP_SERVER['OAUTH_CIMD_HOSTS'] must be None or a list of host names and "
                f"MCP_SERVER['OAUTH_CIMD_PRIVATE_HOSTS'] a list of them, not {hosts!r} and {private!r}.",
                id="mcp_server.E066",
            )
        )
    elif private and not settings.DEBUG:
        messages.append(
            Warning(
                f"MCP_SERVER['OAUTH_CIMD_PRIVATE_HOSTS'] ({', '.join(private)}) lets the site fetch client "
                "metadata documents from private and loopback addresses outside DEBUG.",
                hint="Leave it empty in production: a client_id URL could reach the site's own network.",
                id="mcp_server.W066",
            )
        )
    for weak in _cimd_weakening(dict(getattr(settings, "OAUTH2_PROVIDER", None) or {})):
        messages.append(
            Warning(f"OAUTH2_PROVIDER weakens Client ID Metadata Documents: {weak}.", id="mcp_server.W067")
        )
    return messages
