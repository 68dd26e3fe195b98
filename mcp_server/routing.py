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
from django.urls import URLPattern, path, re_path

from .admin_live.routing import live_urlpatterns
from .registry.server import MCPServer, mcp
from .transports.consumer import MCPConsumer
from .transports.shutdown import LifespanApp

__all__ = ["mcp_application", "mcp_endpoint", "mcp_urlpatterns"]


def mcp_endpoint(server: MCPServer = mcp) -> Any:
    """The ASGI application serving ``server`` (POST, GET and DELETE), with the Django user in scope.

    Run-time changes to ``server``'s tools, resources and prompts are announced to its sessions.
    """
    from .updates import watch_registry

    watch_registry(server)
    return AuthMiddlewareStack(MCPConsumer.as_asgi(server=server))


def mcp_urlpatterns(servers: Mapping[str, MCPServer] | None = None) -> list[URLPattern]:
    """Channels URL patterns: each path is served with and without a trailing slash (no redirect)."""
    routes = servers if servers is not None else {"mcp": mcp}
    patterns: list[URLPattern] = []
    for prefix, server in routes.items():
        endpoint = mcp_endpoint(server)
        clean = prefix.strip("/")
        patterns += [path(clean, endpoint), path(f"{clean}/", endpoint)]
    return patterns


def mcp_application(django_app: Any, servers: Mapping[str, MCPServer] | None = None) -> ProtocolTypeRouter:
    """A ``ProtocolTypeRouter`` that serves the MCP endpoints and hands every other request to Django.

    WebSockets: the admin's live page of pending requests (staff only, same-origin only).
    """
    return ProtocolTypeRouter(
        {
            "http": URLRouter([*mcp_urlpatterns(servers), re_path(r"", django_app)]),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(live_urlpatterns()))),
            "lifespan": LifespanApp(),
        },
    )
