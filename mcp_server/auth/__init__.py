"""Who is calling: authentication classes tried in order, DRF-style, for every request to an endpoint.

``MCP_SERVER["AUTHENTICATION_CLASSES"]`` lists import paths of :class:`BaseAuthentication` subclasses (or of
Django REST framework authentication classes, when DRF is installed). The default is the session cookie,
then bearer tokens. ``MCP_SERVER["ALLOW_ANONYMOUS"]`` decides whether a request that none
of them authenticates is served as ``AnonymousUser`` or refused with 401.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ..conf import mcp_settings
from ..core.stores import bounded
from .base import AuthenticationFailed, AuthResult, BaseAuthentication

__all__ = [
    "AuthResult",
    "AuthenticationFailed",
    "BaseAuthentication",
    "Unauthorized",
    "authenticate_request",
    "get_authenticators",
    "load_authenticator",
]


class Unauthorized(Exception):
    """The request is refused with 401; ``challenges`` are its ``WWW-Authenticate`` values."""

    def __init__(self, message: str, challenges: list[str]) -> None:
        super().__init__(message)
        self.message = message
        self.challenges = challenges


def load_authenticator(path: str) -> BaseAuthentication:
    """Import and instantiate one entry of ``AUTHENTICATION_CLASSES`` (DRF classes come wrapped)."""
    from .drf import DRFAuthentication, is_drf_authentication

    cls = import_string(path)
    if isinstance(cls, type) and issubclass(cls, BaseAuthentication):
        return cls()
    if is_drf_authentication(cls):
        return DRFAuthentication(cls())
    raise ImproperlyConfigured(
        f"{path} is neither an mcp_server.auth.BaseAuthentication nor a DRF authentication class"
    )


@lru_cache(maxsize=8)
def _authenticators(paths: tuple[str, ...]) -> tuple[BaseAuthentication, ...]:
    return tuple(load_authenticator(path) for path in paths)


def get_authenticators() -> tuple[BaseAuthentication, ...]:
    """The configured authentication class instances, in order."""
    return _authenticators(tuple(mcp_settings.AUTHENTICATION_CLASSES))


def _challenges(
    request: HttpRequest,
    authenticators: tuple[BaseAuthentication, ...],
    resource_path: str,
    failure: AuthenticationFailed | None,
) -> list[str]:
    from .oauth import LOCAL_SCOPE, local_authorization_server, metadata_url, oauth_enabled

    challenges: list[str] = []
    for authenticator in authenticators:
        header = authenticator.authenticate_header(request)
        if header and header not in challenges:
            challenges.append(header)
    oauth = oauth_enabled()
    if oauth and not any(c.lower().startswith("bearer") for c in challenges):
        challenges.insert(0, 'Bearer realm="mcp"')
    if not challenges:
        challenges.append('Bearer realm="mcp"')
    out: list[str] = []
    for challenge in challenges:
        if challenge.lower().startswith("bearer"):
            params = []
            if failure is not None:
                description = failure.detail.replace('"', "'")
                params += [f'error="{failure.error}"', f'error_description="{description}"']
            if oauth:
                params.append(f'resource_metadata="{metadata_url(request, resource_path)}"')
            if oauth and local_authorization_server():
                params.append(f'scope="{LOCAL_SCOPE}"')
            challenge = ", ".join([challenge, *params])
        out.append(challenge)
    out.sort(key=lambda c: not c.lower().startswith("bearer"))
    return out


async def authenticate_request(request: HttpRequest, *, resource_path: str = "/mcp") -> AuthResult:
    """``(user, auth)`` for the request, ``(AnonymousUser(), None)`` when anonymous access is allowed.

    Raises :class:`Unauthorized` for wrong credentials, or for none when ``ALLOW_ANONYMOUS`` is off.
    ``resource_path`` is the endpoint's path, for the ``resource_metadata`` of the challenge. Only the
    classes that may find credentials in the request are asked
    (:meth:`BaseAuthentication.has_credentials`), within ``STORE_TIMEOUT`` together
    (:class:`~mcp_server.core.stores.StoreUnavailable`); when none may, no store is asked or waited for.
    """
    authenticators = get_authenticators()
    asked = [a for a in authenticators if a.has_credentials(request)]
    if asked:
        found = await bounded(_first_found(request, authenticators, asked, resource_path), "database")
        if found is not None:
            return found
    if mcp_settings.ALLOW_ANONYMOUS:
        anonymous: Any = AnonymousUser()
        return anonymous, None
    raise Unauthorized(
        "Unauthorized: authentication required", _challenges(request, authenticators, resource_path, None)
    )


async def _first_found(
    request: HttpRequest,
    authenticators: tuple[BaseAuthentication, ...],
    asked: list[BaseAuthentication],
    resource_path: str,
) -> AuthResult | None:
    """The first result of the ``asked`` classes, in order; :class:`Unauthorized` for a refusal."""
    for authenticator in asked:
        try:
            result = await authenticator.authenticate(request)
        except AuthenticationFailed as failure:
            raise Unauthorized(
                f"Unauthorized: {failure.detail}",
                _challenges(request, authenticators, resource_path, failure),
            ) from failure
        if result is not None:
            return result
    return None
