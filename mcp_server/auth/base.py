"""What every MCP authentication class implements (the shape of Django REST framework's)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

__all__ = ["AuthResult", "AuthenticationFailed", "BaseAuthentication", "oauth_client_of"]

AuthResult = tuple[Any, Any]
"""``(user, auth)``: the Django user, and what authenticated it (a token, or ``None``)."""


class AuthenticationFailed(Exception):
    """Credentials were presented and are wrong (unknown, expired or revoked token; inactive user).

    The request is refused with 401 whatever ``ALLOW_ANONYMOUS`` says; ``error`` goes into the
    ``WWW-Authenticate`` challenge (RFC 6750 error codes: ``invalid_token``, ``invalid_request``).
    """

    def __init__(self, detail: str, *, error: str = "invalid_token") -> None:
        super().__init__(detail)
        self.detail = detail
        self.error = error


class BaseAuthentication:
    """Subclass and list the class in ``MCP_SERVER["AUTHENTICATION_CLASSES"]``.

    The classes are tried in order for every POST, GET and DELETE to an MCP endpoint; the first that
    returns ``(user, auth)`` wins. ``None`` means "no credentials of my kind here": the next class is
    tried, and when none is left the request is anonymous (refused with 401 unless ``ALLOW_ANONYMOUS``).
    Raising :class:`AuthenticationFailed` refuses the request with 401 at once.
    """

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        """Return ``(user, auth)`` for credentials of this class's kind, ``None`` when there are none."""
        raise NotImplementedError(f"{type(self).__name__}.authenticate() must be overridden")

    def has_credentials(self, request: HttpRequest) -> bool:
        """Whether ``request`` may carry credentials of this class's kind, read from the request alone (no
        store asked). ``False`` lets the request path skip :meth:`authenticate`, and the bound on the
        stores around it, for a request that carries none. The default, ``True``, always asks."""
        return True

    def authenticate_header(self, request: HttpRequest) -> str | None:
        """The ``WWW-Authenticate`` challenge of a 401 (e.g. ``'Bearer realm="mcp"'``), or ``None``."""
        return None


def oauth_client_of(auth: Any) -> tuple[str, str]:
    """``(client_id, name)`` of the OAuth client an ``auth`` result stands for, ``("", "")`` for none.

    What the ledger records of a request's OAuth client, next to its user: an ``auth`` that names one has
    string attributes ``client_id`` and ``client_name`` (the site's own authorization server's
    ``OAuthGrant`` does), read as they are, with no query. Layers below the authorization server know only
    this shape, never its classes.
    """
    client_id = getattr(auth, "client_id", None)
    if not isinstance(client_id, str) or not client_id:
        return "", ""
    name = getattr(auth, "client_name", "")
    return client_id, name if isinstance(name, str) else ""
