"""ASGI routing: serve MCP endpoints beside an existing Django application.

Most sites need one line in ``asgi.py``::

    application = mcp_application(get_asgi_application())

Sites that already use a Channels ``ProtocolTypeRouter`` add :func:`mcp_urlpatterns` to their HTTP routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.core.exceptions import ImproperlyConfigured
from django.urls import URLPattern, path, re_path

from .admin_live.routing import live_urlpatterns
from .conf import mcp_settings
from .registry.server import MCPServer, mcp
from .transports.body_limit import limit_daphne_bodies
from .transports.consumer import MCPConsumer
from .transports.shutdown import LifespanApp

__all__ = ["ExactPathsFirst", "mcp_application", "mcp_endpoint", "mcp_urlpatterns", "serve_static_in_debug"]


def mcp_endpoint(server: MCPServer = mcp) -> Any:
    """The ASGI application serving ``server`` (POST, GET and DELETE).

    Callers are identified by ``AUTHENTICATION_CLASSES`` (the session cookie is read only when the request
    carries one). Run-time changes to ``server``'s tools, resources and prompts are announced to its sessions.
    """
    from .protocol.dispatcher import handler_table
    from .updates import watch_registry

    handler_table(server)  # a raw method that takes a built-in's name fails here, at start-up
    watch_registry(server)
    return MCPConsumer.as_asgi(server=server)


def mcp_urlpatterns(servers: Mapping[str, MCPServer] | None = None) -> list[URLPattern]:
    """Channels URL patterns: each path is served with and without a trailing slash (no redirect).

    ``servers`` maps paths to servers, e.g. ``{"mcp": mcp, "internal/mcp": internal}`` (default: ``mcp`` at
    ``/mcp``). With ``OAUTH_AUTHORIZATION_SERVERS`` set, each path also gets its OAuth Protected Resource
    Metadata at ``/.well-known/oauth-protected-resource/<path>`` (the first path also without the suffix).
    Under Daphne, bodies over ``MAX_REQUEST_BYTES`` to these paths are refused before they are read (see
    :mod:`~mcp_server.transports.body_limit`).
    """
    from .auth.metadata import WELL_KNOWN, ProtectedResourceMetadata, oauth_enabled

    routes = servers if servers is not None else {"mcp": mcp}
    patterns: list[URLPattern] = []
    names: dict[str, MCPServer] = {}
    for prefix, server in routes.items():
        if names.setdefault(server.key, server) is not server:
            raise ImproperlyConfigured(
                f"Two routed MCP servers have the key {server.key!r}: each needs its own (sessions "
                "belong to a server by its key)."
            )
        endpoint = mcp_endpoint(server)
        clean = prefix.strip("/")
        patterns += [path(clean, endpoint), path(f"{clean}/", endpoint)]
        if oauth_enabled():
            metadata: Any = ProtectedResourceMetadata(f"/{clean}", server.title or mcp_settings.SERVER_TITLE)
            well_known = WELL_KNOWN.lstrip("/")
            if prefix == next(iter(routes)):  # the first path also answers without the suffix
                patterns.append(path(well_known, metadata))
            patterns.append(path(f"{well_known}/{clean}", metadata))
    limit_daphne_bodies(routes)
    return patterns


def serve_static_in_debug(django_app: Any) -> Any:
    """``django_app`` serving static files (the admin's CSS, the live page's script) when ``DEBUG`` is on.

    ``runserver`` does this by itself; Daphne and Uvicorn do not, so without it the admin has no styles and
    its live page no script under ``daphne mysite.asgi:application``. With ``DEBUG`` off (production) static
    files are the job of WhiteNoise or the reverse proxy, as for any Django site.
    """
    from django.apps import apps
    from django.conf import settings
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    if not settings.DEBUG or not apps.is_installed("django.contrib.staticfiles") or not settings.STATIC_URL:
        return django_app
    if isinstance(django_app, ASGIStaticFilesHandler):  # the site wrapped it already
        return django_app
    return ASGIStaticFilesHandler(django_app)


class ExactPathsFirst:
    """``router``, with the paths of ``patterns`` that have no converter (the MCP endpoints, their metadata)
    looked up in a dict first: the scope the application gets is the one ``URLRouter`` would give it
    (``path_remaining`` and ``url_route`` set), without the walk through every pattern per request."""

    def __init__(self, patterns: list[URLPattern], router: Any) -> None:
        self.inner = router  # (named as Channels names what a middleware wraps: the checks follow it)
        self.exact: dict[str, Any] = {
            str(p.pattern): p.callback for p in patterns if "<" not in str(p.pattern) and not p.default_args
        }

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        path = scope.get("path")
        if path is not None and "path_remaining" not in scope:
            root_path = scope.get("root_path", "")
            if path.startswith(root_path):
                application = self.exact.get(path[len(root_path) :].lstrip("/"))
                if application is not None:
                    routed = {**scope, "path_remaining": "", "url_route": {"args": (), "kwargs": {}}}
                    return await application(routed, receive, send)
        return await self.inner(scope, receive, send)


def mcp_application(django_app: Any, servers: Mapping[str, MCPServer] | None = None) -> ProtocolTypeRouter:
    """A ``ProtocolTypeRouter`` that serves the MCP endpoints and hands every other request to Django.

    In ``DEBUG``, static files are served too, as ``runserver`` serves them (:func:`serve_static_in_debug`).
    WebSockets: the admin's live page of pending requests (staff only, same-origin only).
    """
    django_app = serve_static_in_debug(django_app)
    patterns = mcp_urlpatterns(servers)
    return ProtocolTypeRouter(
        {
            "http": ExactPathsFirst(patterns, URLRouter([*patterns, re_path(r"", django_app)])),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(live_urlpatterns()))),
            "lifespan": LifespanApp(),
        },
    )
