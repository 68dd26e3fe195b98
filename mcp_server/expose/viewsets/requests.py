"""The HTTP request a viewset sees when a tool calls it: a real ``WSGIRequest`` that DRF wraps in its own
``Request``, authenticated as the MCP caller.

The method, query string and JSON body are the tool call's; the client's address, host, scheme and headers
(user agent, ``X-Forwarded-For``, language) are those of the MCP request, so that throttles keyed on the
address and links built by paginators behave as over HTTP. A signed-in caller is forced in the way DRF's own
``force_authenticate`` does it (``_force_auth_user``/``_force_auth_token``, read by ``Request.__init__``): the
viewset's ``authentication_classes`` do not run, because the MCP endpoint already authenticated the caller
(``ctx.user``, and ``ctx.request.auth`` as ``request.auth``). The MCP request's ``Authorization`` header and
cookies are not passed on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest
from rest_framework.utils.encoders import JSONEncoder

from ...core.context import Context

__all__ = ["build_request", "query_string", "stdio_host"]

_SKIPPED_HEADERS = {
    "HTTP_ACCEPT",
    "HTTP_AUTHORIZATION",
    "HTTP_CONTENT_TYPE",
    "HTTP_CONTENT_LENGTH",
    "HTTP_COOKIE",
}
"""The MCP request's credentials stay with it: the viewset is given the caller, not the caller's token."""


def query_string(query: Mapping[str, Any]) -> str:
    """``a=1&b=x&b=y``: lists repeat the parameter, booleans are ``true``/``false`` as JSON writes them."""
    pairs: list[tuple[str, str]] = []
    for name, value in query.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is None:
                continue
            text = json.dumps(item) if isinstance(item, bool) else str(item)
            pairs.append((name, text))
    return urlencode(pairs)


def stdio_host() -> str:
    """The host of a request built over stdio (no HTTP request behind it): one ``ALLOWED_HOSTS`` accepts, so
    that a paginator's links can be built (``.example.com`` gives ``example.com``; ``*`` or none,
    ``localhost``)."""
    for pattern in settings.ALLOWED_HOSTS:
        host = pattern.lstrip(".")
        if host and host != "*":
            return str(host)
    return "localhost"


def _environ(source: HttpRequest | None) -> dict[str, Any]:
    if source is None:  # stdio: no HTTP request behind the call
        return {
            "SERVER_NAME": stdio_host(),
            "SERVER_PORT": "80",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http",
        }
    meta = source.META
    environ = {
        key: value for key, value in meta.items() if key.startswith("HTTP_") and isinstance(value, str)
    }
    for key in _SKIPPED_HEADERS:
        environ.pop(key, None)
    environ.update(
        SERVER_NAME=str(meta.get("SERVER_NAME", "localhost")),
        SERVER_PORT=str(meta.get("SERVER_PORT", "80")),
        REMOTE_ADDR=str(meta.get("REMOTE_ADDR", "")),
    )
    environ["wsgi.url_scheme"] = source.scheme or "http"
    return environ


def build_request(
    ctx: Context,
    method: str,
    *,
    query: Mapping[str, Any] | None = None,
    data: Any = None,
) -> HttpRequest:
    """A Django request for the viewset: ``method``, ``query`` as its query string, ``data`` as its JSON
    body, the MCP request's client address and headers, and ``ctx``'s user forced as DRF's user."""
    body = b"" if data is None else json.dumps(data, cls=JSONEncoder).encode()
    environ = _environ(ctx.request)
    environ.update(
        {
            "REQUEST_METHOD": method.upper(),
            "PATH_INFO": ctx.request.path_info if ctx.request is not None else "/",
            "SCRIPT_NAME": "",
            "QUERY_STRING": query_string(query or {}),
            "HTTP_ACCEPT": "application/json",
            "CONTENT_TYPE": "application/json" if data is not None else "",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
        }
    )
    request = WSGIRequest(environ)
    user = ctx.user if ctx.user is not None else AnonymousUser()
    request.user = user
    if getattr(user, "is_authenticated", False):
        request._force_auth_user = user  # type: ignore[attr-defined]
        request._force_auth_token = getattr(ctx.request, "auth", None)  # type: ignore[attr-defined]
    # An anonymous caller is not forced: the viewset's authenticators find no credential, as over HTTP for a
    # request without one, so that a refusal says "Authentication credentials were not provided."
    return request
