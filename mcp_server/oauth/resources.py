"""The site's MCP endpoints as OAuth resources (RFC 8707): their canonical URLs, read off the routing."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.module_loading import import_string

from ..auth.oauth import resource_url

__all__ = ["canonical", "endpoint_icons", "endpoint_paths", "endpoint_title", "site_resources"]


def _walk(app: Any, depth: int = 0) -> list[tuple[str, Any]]:
    from ..transports.consumer import MCPConsumer

    if depth > 8:
        return []
    found: list[tuple[str, Any]] = []
    mapping = getattr(app, "application_mapping", None)
    if isinstance(mapping, dict) and "http" in mapping:
        return _walk(mapping["http"], depth + 1)
    for route in getattr(app, "routes", None) or []:
        callback = getattr(route, "callback", None)
        if getattr(callback, "consumer_class", None) is MCPConsumer:
            server = (getattr(callback, "consumer_initkwargs", None) or {}).get("server")
            found.append(("/" + str(route.pattern).strip("/"), server))
        elif callback is not None:
            found += _walk(callback, depth + 1)
    for attr in ("inner", "app", "application"):
        inner = getattr(app, attr, None)
        if inner is not None and inner is not app:
            found += _walk(inner, depth + 1)
    return found


@lru_cache(maxsize=1)
def _endpoints(asgi_application: str) -> tuple[tuple[str, Any], ...]:
    try:
        app = import_string(asgi_application)
    except ImportError:
        return (("/mcp", None),)
    first: dict[str, Any] = {}
    for path, server in _walk(app):
        first.setdefault(path, server)  # the first server of a path wins
    return tuple(first.items()) or (("/mcp", None),)


def _server(path: str) -> Any:
    wanted = "/" + path.strip("/")
    endpoints = _endpoints(str(getattr(settings, "ASGI_APPLICATION", "") or ""))
    return next((server for p, server in endpoints if p == wanted), None)


def endpoint_paths() -> tuple[str, ...]:
    """The paths of the MCP endpoints ``ASGI_APPLICATION`` routes (``("/mcp",)`` when none is found)."""
    return tuple(path for path, _server in _endpoints(str(getattr(settings, "ASGI_APPLICATION", "") or "")))


def endpoint_title(path: str) -> str:
    """The title of the MCP server at ``path`` (``""`` when unknown)."""
    from ..conf import mcp_settings

    server = _server(path)
    title = getattr(server, "title", None) or mcp_settings.SERVER_TITLE or getattr(server, "name", "")
    return str(title or "")


def endpoint_icons(path: str) -> list[dict[str, Any]]:
    """The icons of the MCP server at ``path`` (its ``icons``, else ``SERVER_ICONS``; ``[]`` when none)."""
    from ..conf import mcp_settings

    icons = getattr(_server(path), "icons", None) or mcp_settings.SERVER_ICONS or []
    return [icon for icon in icons if isinstance(icon, dict)]


def canonical(uri: str) -> str:
    """``uri`` without a trailing slash (``https://site/mcp/`` and ``https://site/mcp`` are one resource)."""
    return uri.rstrip("/")


def site_resources(request: HttpRequest) -> list[str]:
    """The canonical URLs of the site's MCP endpoints, as this request's origin names them."""
    return [resource_url(request, path) for path in endpoint_paths()]
