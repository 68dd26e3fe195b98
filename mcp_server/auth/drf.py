"""Django REST framework authentication classes used as MCP authentication classes.

List a DRF class (``"rest_framework.authentication.TokenAuthentication"``, ``BasicAuthentication``, a
JWT package's class) in ``MCP_SERVER["AUTHENTICATION_CLASSES"]`` and it is wrapped in
:class:`DRFAuthentication`: its synchronous ``authenticate`` runs in a worker thread, its
``AuthenticationFailed``/``NotAuthenticated`` become 401. DRF's own ``SessionAuthentication`` enforces CSRF,
which MCP clients cannot satisfy: use :class:`mcp_server.auth.session.SessionAuthentication` instead.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import HttpRequest

from .base import AuthenticationFailed, AuthResult, BaseAuthentication

__all__ = ["DRFAuthentication", "is_drf_authentication"]


def is_drf_authentication(cls: Any) -> bool:
    """Whether ``cls`` is a DRF authentication class (``False`` when DRF is not installed)."""
    try:
        from rest_framework.authentication import BaseAuthentication as DRFBase
    except ImportError:
        return False
    return isinstance(cls, type) and issubclass(cls, DRFBase)


class DRFAuthentication(BaseAuthentication):
    """Adapter around an instance of a DRF authentication class."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"<DRFAuthentication {type(self.inner).__name__}>"

    def _wrap(self, request: HttpRequest) -> Any:
        from rest_framework.request import Request

        return Request(request)

    def _authenticate(self, request: HttpRequest) -> AuthResult | None:
        from rest_framework import exceptions

        close_old_connections()
        try:
            result = self.inner.authenticate(self._wrap(request))
        except (exceptions.AuthenticationFailed, exceptions.NotAuthenticated) as exc:
            raise AuthenticationFailed(str(exc.detail)) from exc
        finally:
            close_old_connections()
        if result is None:
            return None
        user, auth = result
        return user, auth

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        return await sync_to_async(self._authenticate, thread_sensitive=False)(request)

    def authenticate_header(self, request: HttpRequest) -> str | None:
        header = self.inner.authenticate_header(self._wrap(request))
        return str(header) if header else None
