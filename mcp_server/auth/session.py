"""Authentication by Django's session cookie: whoever is logged in to the site is the MCP user."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import aget_user
from django.http import HttpRequest

from ..conf import django_setting
from ..core.asgi_request import header_value
from .base import AuthResult, BaseAuthentication

__all__ = ["SessionAuthentication"]


class SessionAuthentication(BaseAuthentication):
    """The user of the request's session cookie, when one is logged in.

    Under :func:`mcp_server.routing.mcp_endpoint` Channels' ``AuthMiddlewareStack`` has already put that
    user in ``scope["user"]``; otherwise the session named by the cookie is loaded here. No CSRF token is
    asked for: the endpoint only takes ``application/json`` POSTs (a cross-site form cannot send one
    without a CORS preflight, which it does not answer), and ``Origin`` is checked against the allowlist.
    """

    def has_credentials(self, request: HttpRequest) -> bool:
        """Only with a user in the ASGI scope (Channels' ``AuthMiddlewareStack``) or a session cookie."""
        scope = getattr(request, "scope", {}) or {}
        if scope.get("user") is not None:
            return True
        # No cookie header: no session cookie, and no need to build the request to say so.
        return header_value(request, "cookie") is not None and (
            django_setting("SESSION_COOKIE_NAME") in request.COOKIES
        )

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        scope = getattr(request, "scope", {}) or {}
        user: Any = scope.get("user")
        if user is None:
            user = await self._from_cookie(request)
        if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
            return None
        return user, None

    @staticmethod
    async def _from_cookie(request: HttpRequest) -> Any:
        session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
        if not session_key:
            return None
        engine = import_module(settings.SESSION_ENGINE)
        request.session = engine.SessionStore(session_key)
        return await aget_user(request)
